package wasm

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"adhost/abi"
)

// The hand-written http_head encoder must write what json.Marshal writes
// for the map the host used to build.
func TestAppendHTTPHeadMatchesMarshal(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Content-Type": {"text/event-stream"}},
		{"Content-Type": {"application/json"}, "X-Request-Id": {"abc", "def"}, "Empty": {}, "Date": {"Mon, 30 Nov 2026 13:00:00 GMT"}},
		{"X-B": {"1"}, "X-A": {"2"}, "X-a-c": {"3"}, "X-A-B": {"4"}, "Xa": {"5"}, "X": {"6"}, "x-": {"7"}},
		{"X-Html": {"<a href=\"x\">&amp;</a>"}, "X-Ctl": {"a\tb\x01\x7f"}, "X-Utf8": {"é 日本 \xff \u2028"}},
		{"X-And&": {"1"}, "X-Lt<": {"2"}},                     // escaped names
		{"X-Caf\u00e9": {"1"}, "X-Q\"": {"2"}, "X-\\": {"3"}}, // non-ASCII or quoted names
		{"X-Dup": {"1"}, "x-dup": {"2"}},                      // equal once lower-cased: slow path
	} {
		r := abi.HTTPResponse{Status: 201, Headers: map[string]string{}}
		for k, v := range h {
			if len(v) > 0 {
				r.Headers[strings.ToLower(k)] = v[0]
			}
		}
		want, _ := json.Marshal(r)
		got := appendHTTPHead([]byte("prefix"), 201, h)
		if string(got) != "prefix"+string(want) {
			if _, dup := h["X-Dup"]; dup {
				// Either value may win, as with the map.
				var back abi.HTTPResponse
				if err := json.Unmarshal(got[len("prefix"):], &back); err == nil && len(back.Headers) == 1 {
					continue
				}
			}
			t.Errorf("%v:\n got %s\nwant %s", h, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		buf := make([]byte, 0, 256)
		appendHTTPHead(buf, 200, http.Header{"Content-Type": {"text/event-stream"}, "Date": {"x"}})
	}); n > 2 {
		t.Errorf("%v allocations", n)
	}
}

var httpRequestMetas = []string{
	`{"method":"POST","url":"https://api.openai.com/v1/chat/completions","headers":{"content-type":"application/json","accept":"text/event-stream"},"stream":true}`,
	`{"method":"GET","url":"https://x.test/models","headers":{"accept":"application/json"}}`,
	` { "method" : "PUT" , "url" : "https://x.test/" , "headers" : { } , "stream" : false } `,
	`{"method":"POST","url":"https://x.test/","stream":true}`,
	`{}`,
	`{"url":"https://x.test/"}`,
	`{"method":"POST","method":"GET","url":"u"}`,                          // repeated key: last wins
	`{"method":"POST","url":"u","headers":{"a":"1","a":"2"}}`,             // repeated header: last wins
	`{"method":"POST","url":"u","headers":{"a":"1"},"headers":{"b":"2"}}`, // repeated object: merged
	`{"Method":"POST","URL":"u"}`,                                         // case-insensitive keys
	`{"method":"POST","url":"u","extra":1}`,
	`{"method":"POST","url":"u\u0041\n","headers":{"x-\u00e9":"\"v\""}}`,
	`{"method":"POST","url":"u","headers":null,"stream":null}`,
	`{"method":"POST","url":"u","headers":{"a":null}}`,
	`{"method":"POST","url":"u","stream":"true"}`,
	`{"method":"POST","url":"u","stream":truex}`,
	`{"method":"POST","url":"u","stream":tru`,
	`{"method":"POST","url":"u"} {}`,
	`{"method":"POST","url":"u"}]`,
	`{"method":1,"url":"u"}`,
	`{"method":"POST","url":"\xff"}`,
	`{"method":"POST","url":"u","headers":{"a":"1",}}`,
	`{"method":"POST","url":"u",}`,
	`[]`,
	`null`,
	``,
}

// decodeHTTPRequest must agree with decodeStrict into abi.HTTPRequest.
func TestDecodeHTTPRequestMatchesStrict(t *testing.T) {
	var req startRequest
	for _, in := range httpRequestMetas {
		checkDecodeHTTPRequest(t, &req, []byte(in))
	}
	many := `{"method":"POST","url":"u","headers":{`
	for i := range 40 {
		if i > 0 {
			many += ","
		}
		many += `"h` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":"v"`
	}
	checkDecodeHTTPRequest(t, &req, []byte(many+"}}"))
	checkDecodeHTTPRequest(t, &req, []byte(httpRequestMetas[0]))
	in := []byte(httpRequestMetas[0])
	if n := testing.AllocsPerRun(100, func() { _ = decodeHTTPRequest(in, &req) }); n > 5 {
		t.Errorf("%v allocations", n)
	}
}

func checkDecodeHTTPRequest(t *testing.T, req *startRequest, in []byte) {
	t.Helper()
	var want abi.HTTPRequest
	werr := decodeStrict(in, &want)
	gerr := decodeHTTPRequest(in, req)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: decodeStrict error %v, fast error %v", in, werr, gerr)
	}
	if werr != nil {
		return
	}
	got := map[string]string{}
	for _, h := range req.headers {
		got[h.name] = h.value
	}
	if want.Headers == nil {
		want.Headers = map[string]string{}
	}
	if req.method != want.Method || req.url != want.URL || req.stream != want.Stream || !maps.Equal(got, want.Headers) || len(req.headers) != len(got) {
		t.Fatalf("%q:\n got %+v\nwant %+v", in, *req, want)
	}
}

func FuzzDecodeHTTPRequest(f *testing.F) {
	for _, in := range httpRequestMetas {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var req startRequest
		checkDecodeHTTPRequest(t, &req, in)
	})
}

func BenchmarkHTTPMeta(b *testing.B) {
	in := []byte(httpRequestMetas[0])
	b.Run("decode-request", func(b *testing.B) {
		b.ReportAllocs()
		var req startRequest
		for b.Loop() {
			if err := decodeHTTPRequest(in, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	h := http.Header{"Content-Type": {"text/event-stream"}, "Date": {"Mon, 30 Nov 2026 13:00:00 GMT"}, "Cache-Control": {"no-cache"}, "X-Request-Id": {"req_123"}}
	b.Run("encode-head", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendHTTPHead(buf[:0], 200, h)
		}
	})
}

func FuzzAppendHTTPHead(f *testing.F) {
	f.Add("Content-Type", "text/event-stream", "x-a", "<&>", 200)
	f.Add("X-\u00e9", "\xff", "X-\u00c9", "", -1)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, status int) {
		h := http.Header{k1: {v1}, k2: {v2}}
		r := abi.HTTPResponse{Status: status, Headers: map[string]string{}}
		for k, v := range h {
			r.Headers[strings.ToLower(k)] = v[0]
		}
		want, _ := json.Marshal(r)
		got := appendHTTPHead(nil, status, h)
		if string(got) != string(want) && strings.ToLower(k1) != strings.ToLower(k2) {
			t.Fatalf("%v: got %s, want %s", h, got, want)
		}
	})
}
