package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

const openAIChunk = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82b7c2c4","choices":[{"index":0,"delta":{"content":" world\u00e9\ud83d\ude00"},"logprobs":null,"finish_reason":null}],"usage":null}`

func TestGet(t *testing.T) {
	for _, tc := range []struct {
		doc, path string
		want      string // String() of the value, or Raw for non-strings
		kind      Kind
		err       error
	}{
		{doc: openAIChunk, path: "choices[0].delta.content", want: " worldé😀", kind: String},
		{doc: openAIChunk, path: "choices[0].finish_reason", want: "null", kind: Null},
		{doc: openAIChunk, path: "created", want: "1741570283", kind: Number},
		{doc: openAIChunk, path: "choices[1]", err: ErrNotFound},
		{doc: openAIChunk, path: "nope", err: ErrNotFound},
		{doc: openAIChunk, path: "model.x", err: ErrType},
		{doc: openAIChunk, path: "choices.x", err: ErrType},
		{doc: openAIChunk, path: "id[0]", err: ErrType},
		{doc: `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": 1"}}`, path: "delta.partial_json", want: `{"a": 1`, kind: String},
		{doc: `{"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3}}`, path: "usageMetadata.promptTokenCount", want: "12", kind: Number},
		{doc: ` [1, [2, {"a" : [3]}]] `, path: "[1][1].a[0]", want: "3", kind: Number},
		{doc: `{"a":1,"a":2}`, path: "a", want: "2", kind: Number}, // last wins, as encoding/json
		{doc: `{"\u0074ype":"x"}`, path: "type", want: "x", kind: String},
		{doc: `{"a":{"b":true}}`, path: "", want: `{"a":{"b":true}}`, kind: Object},
		{doc: `{"a":{"b":true}}`, path: "a.b", want: "true", kind: Bool},
		{doc: `{}`, path: "a", err: ErrNotFound},
		{doc: `[]`, path: "[0]", err: ErrNotFound},
		{doc: `"s"`, path: "", want: "s", kind: String},
	} {
		t.Run(tc.doc+"/"+tc.path, func(t *testing.T) {
			v, err := Get([]byte(tc.doc), tc.path)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Get err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if v.Kind() != tc.kind {
				t.Fatalf("kind = %v, want %v", v.Kind(), tc.kind)
			}
			got := string(v.Raw())
			if v.Kind() == String {
				got, _ = v.String()
				if !v.Equal(tc.want) {
					t.Errorf("Equal(%q) = false", tc.want)
				}
			}
			if got != tc.want {
				t.Errorf("value = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	for _, doc := range []string{
		``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1,]`, `[1 2]`,
		`{"a":[}`, `{"a":{]}`, `"abc`, `"a\x"`, `"\u12"`, "\"a\x01\"", `01`, `-`, `1.`, `1e`, `1e+`,
		`tru`, `nul`, `{"a":1}x`, `{"a":1} {}`, `[` + strings.Repeat("[", 20) + `]`, `{"a":nan}`,
	} {
		for _, path := range []string{"", "a", "[0]", "a.b"} {
			_, err := Get([]byte(doc), path)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Errorf("Get(%q, %q) err = %v, want *SyntaxError", doc, path, err)
			}
		}
		if Valid([]byte(doc)) {
			t.Errorf("Valid(%q) = true", doc)
		}
	}
}

func TestPick(t *testing.T) {
	var f [4]Value
	if err := Pick([]byte(openAIChunk), f[:], "choices", "usage", "nope", "choices"); err != nil {
		t.Fatal(err)
	}
	if f[0].Kind() != Array || !f[1].IsNull() || f[2].Exists() || string(f[3].Raw()) != string(f[0].Raw()) {
		t.Errorf("Pick = %v %v %v %v", f[0].Kind(), f[1].Kind(), f[2].Kind(), f[3].Kind())
	}
	choice, _ := f[0].Get("[0]")
	var g [2]Value
	if err := choice.Pick(g[:], "delta", "finish_reason"); err != nil || g[0].Kind() != Object || !g[1].IsNull() {
		t.Errorf("Value.Pick = %v %v, %v", g[0].Kind(), g[1].Kind(), err)
	}
	if err := Pick([]byte(`{"a":1,"a":2}`), f[:1], "a"); err != nil || string(f[0].Raw()) != "2" {
		t.Errorf("duplicate: %s %v", f[0].Raw(), err)
	}
	if err := Pick([]byte(`[1]`), f[:1], "a"); err != ErrType || f[0].Exists() {
		t.Errorf("array: %v", err)
	}
	var se *SyntaxError
	for _, doc := range []string{`{"a":1`, `{"a":1} x`, `{"a":[}`, ``} {
		if err := Pick([]byte(doc), f[:1], "a"); !errors.As(err, &se) {
			t.Errorf("Pick(%q) err = %v, want *SyntaxError", doc, err)
		}
	}
	if err := Pick([]byte(`{}`), f[:1], "a", "b"); err == nil {
		t.Error("short out: no error")
	}
	if err := (Value{}).Pick(f[:1], "a"); err != ErrType {
		t.Errorf("zero Value: %v", err)
	}
}

func TestBadPath(t *testing.T) {
	for _, p := range []string{".a", "a.", "a..b", "[", "[x]", "[1", "a[0]b", "[0].", "a.[0]", "[99999999999999999999]"} {
		_, err := Get([]byte(`{"a":[{"b":1}]}`), p)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("Get(path %q) err = %v, want *PathError", p, err)
		}
	}
}

func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		i       int64
		ierr    error
		f       float64
		ferr    error
		isFloat bool
	}{
		{in: "0", i: 0, f: 0},
		{in: "-0", i: 0, f: math.Copysign(0, -1)},
		{in: "9223372036854775807", i: math.MaxInt64, f: 9223372036854775807},
		{in: "-9223372036854775808", i: math.MinInt64, f: -9223372036854775808},
		{in: "9223372036854775808", ierr: ErrRange, f: 9223372036854775808},
		{in: "99999999999999999999999", ierr: ErrRange, f: 1e23},
		{in: "1.5", ierr: ErrType, f: 1.5},
		{in: "1e3", ierr: ErrType, f: 1000},
		{in: "1e400", ierr: ErrType, ferr: ErrRange},
	} {
		v, err := Get([]byte(`{"n":`+tc.in+`}`), "n")
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		i, err := v.Int()
		if err != tc.ierr || err == nil && i != tc.i {
			t.Errorf("Int(%s) = %d, %v; want %d, %v", tc.in, i, err, tc.i, tc.ierr)
		}
		f, err := v.Float()
		if err != tc.ferr || err == nil && f != tc.f {
			t.Errorf("Float(%s) = %g, %v; want %g, %v", tc.in, f, err, tc.f, tc.ferr)
		}
	}
	if _, err := GetInt([]byte(`{"n":"1"}`), "n"); err != ErrType {
		t.Errorf("Int of a string: err = %v, want ErrType", err)
	}
}

func TestStrings(t *testing.T) {
	for _, raw := range []string{
		`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u4e16"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`,
		`"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, "\"\xff\xfeok\"", "\"\xe4\xb8\x96\"", `"\u0000"`, `""`,
		"\"\xed\xa0\x80\"", // UTF-8-encoded surrogate: invalid
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", raw, err)
		}
		v, err := Get([]byte(raw), "")
		if err != nil {
			t.Fatalf("Get(%q): %v", raw, err)
		}
		got, err := v.String()
		if err != nil || got != want {
			t.Errorf("String(%q) = %q, %v; want %q", raw, got, err, want)
		}
		b, _ := v.AppendString([]byte("x"))
		if string(b) != "x"+want {
			t.Errorf("AppendString(%q) = %q", raw, b)
		}
		if !v.Equal(want) || v.Equal(want+"x") || (want != "" && v.Equal(want[:len(want)-1])) {
			t.Errorf("Equal(%q) inconsistent", raw)
		}
	}
}

func TestDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		doc := []byte(strings.Repeat(`[`, n) + strings.Repeat(`]`, n))
		if got, want := Valid(doc), json.Valid(doc); got != want {
			t.Errorf("depth %d: Valid = %v, json.Valid = %v", n, got, want)
		}
		obj := []byte(strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n))
		if got, want := Valid(obj), json.Valid(obj); got != want {
			t.Errorf("object depth %d: Valid = %v, json.Valid = %v", n, got, want)
		}
		_, err := Get(obj, "a.a.a")
		if (err == nil) != json.Valid(obj) {
			t.Errorf("object depth %d: Get err = %v", n, err)
		}
	}
}

func TestIter(t *testing.T) {
	doc := []byte(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{\"a\""}},{"index":1,"function":{"arguments":"1}"}}], "e\u0301":{}, "z":[]}`)
	root, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	it := root.Iter()
	for it.Next() {
		k, _ := it.Key().String()
		keys = append(keys, k+"="+it.Value().Kind().String())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(keys, ","), "tool_calls=array,e\u0301=object,z=array"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	calls, _ := root.Get("tool_calls")
	var args []byte
	it = calls.Iter()
	for it.Next() {
		a, err := it.Value().Get("function.arguments")
		if err != nil {
			t.Fatal(err)
		}
		if args, err = a.AppendString(args); err != nil {
			t.Fatal(err)
		}
		if it.Index() == 0 {
			if id, _ := it.Value().Get("id"); !id.Equal("call_1") {
				t.Errorf("id = %s", id.Raw())
			}
		}
	}
	if string(args) != `{"a"1}` {
		t.Errorf("arguments = %s", args)
	}
	for _, doc := range []string{`[]`, `{}`, ` [ ] `} {
		v, _ := Parse([]byte(doc))
		it := v.Iter()
		if it.Next() || it.Err() != nil {
			t.Errorf("Iter(%s) yielded", doc)
		}
	}
	if it := (Value{}).Iter(); it.Next() || it.Err() != ErrType {
		t.Errorf("Iter of zero Value: err = %v", it.Err())
	}
}

func TestNoAllocs(t *testing.T) {
	doc := []byte(openAIChunk)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		v, err := Get(doc, "choices[0].delta.content")
		if err != nil {
			t.Fatal(err)
		}
		buf, _ = v.AppendString(buf[:0])
		if c, _ := Get(doc, "choices[0].index"); c.Kind() != Number {
			t.Fatal("index")
		}
		if o, _ := Get(doc, "object"); !o.Equal("chat.completion.chunk") {
			t.Fatal("object")
		}
		var f [2]Value
		if err := Pick(doc, f[:], "choices", "usage"); err != nil || !f[1].IsNull() {
			t.Fatal("pick")
		}
	})
	if allocs != 0 {
		t.Errorf("allocs per event = %v, want 0", allocs)
	}
}

// BenchmarkOpenAIChunk is the per-event cost an OpenAI adapter pays: the
// text delta, the finish reason and the usage of a ~300 B chunk.
func BenchmarkOpenAIChunk(b *testing.B) {
	doc := []byte(openAIChunk)
	buf := make([]byte, 0, 64)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		choice, err := Get(doc, "choices[0]")
		if err != nil {
			b.Fatal(err)
		}
		c, _ := choice.Get("delta.content")
		buf, _ = c.AppendString(buf[:0])
		fr, _ := choice.Get("finish_reason")
		_ = fr.IsNull()
		u, _ := Get(doc, "usage")
		_ = u.IsNull()
	}
}

// BenchmarkOpenAIChunkEncodingJSON is the reflection-based baseline.
func BenchmarkOpenAIChunkEncodingJSON(b *testing.B) {
	doc := []byte(openAIChunk)
	type chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		var c chunk
		if err := json.Unmarshal(doc, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// checkAgainstJSON walks the encoding/json decoding of a valid document and
// checks that Get finds every value reachable by a path with the same kind
// and value.
func checkAgainstJSON(t *testing.T, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return
	}
	budget := 2000
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if budget--; budget < 0 {
			return
		}
		got, err := Get(data, path)
		if err != nil {
			t.Fatalf("Get(%q, %q): %v", data, path, err)
		}
		switch v := v.(type) {
		case nil:
			if got.Kind() != Null {
				t.Fatalf("Get(%q, %q) kind %v, want null", data, path, got.Kind())
			}
		case bool:
			if b, err := got.Bool(); err != nil || b != v {
				t.Fatalf("Get(%q, %q).Bool() = %v, %v; want %v", data, path, b, err, v)
			}
		case string:
			if s, err := got.String(); err != nil || s != v {
				t.Fatalf("Get(%q, %q).String() = %q, %v; want %q", data, path, s, err, v)
			}
			if !got.Equal(v) {
				t.Fatalf("Get(%q, %q).Equal(%q) = false", data, path, v)
			}
		case json.Number:
			if string(got.Raw()) != string(v) {
				t.Fatalf("Get(%q, %q) raw %s, want %s", data, path, got.Raw(), v)
			}
			wi, werr := strconv.ParseInt(string(v), 10, 64)
			gi, gerr := got.Int()
			if (werr == nil) != (gerr == nil) || werr == nil && wi != gi {
				t.Fatalf("Get(%q, %q).Int() = %d, %v; strconv %d, %v", data, path, gi, gerr, wi, werr)
			}
			wf, werr := v.Float64()
			gf, gerr := got.Float()
			if (werr == nil) != (gerr == nil) || werr == nil && wf != gf && !(math.IsNaN(wf) && math.IsNaN(gf)) {
				t.Fatalf("Get(%q, %q).Float() = %g, %v; want %g, %v", data, path, gf, gerr, wf, werr)
			}
		case []any:
			if got.Kind() != Array {
				t.Fatalf("Get(%q, %q) kind %v, want array", data, path, got.Kind())
			}
			n := 0
			for it := got.Iter(); it.Next(); {
				n++
			}
			if n != len(v) {
				t.Fatalf("Get(%q, %q) has %d elements, want %d", data, path, n, len(v))
			}
			for i, e := range v {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
			if _, err := Get(data, path+"["+strconv.Itoa(len(v))+"]"); err != ErrNotFound {
				t.Fatalf("Get(%q, %q[len]) err = %v, want ErrNotFound", data, path, err)
			}
		case map[string]any:
			if got.Kind() != Object {
				t.Fatalf("Get(%q, %q) kind %v, want object", data, path, got.Kind())
			}
			// Pick agrees with Get member by member (and finds no
			// absent key).
			keys := []string{"\x00absent"}
			for k := range v {
				if len(keys) < 4 {
					keys = append(keys, k)
				}
			}
			out := make([]Value, len(keys))
			if err := got.Pick(out, keys...); err != nil {
				t.Fatalf("Pick(%q at %q): %v", data, path, err)
			}
			if out[0].Exists() {
				t.Fatalf("Pick(%q at %q) found an absent key", data, path)
			}
			for i, k := range keys[1:] {
				if string(out[i+1].Raw()) != string(mustRaw(t, got, k)) {
					t.Fatalf("Pick(%q at %q) key %q = %s", data, path, k, out[i+1].Raw())
				}
			}
			for k, e := range v {
				if k == "" || strings.ContainsAny(k, ".[") {
					continue
				}
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, e)
			}
		}
	}
	walk("", doc)
}

func FuzzGet(f *testing.F) {
	for _, s := range []string{
		openAIChunk,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi \ud83d\ude00"}}`,
		`{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":{"promptTokenCount":3}}`,
		`[1,-0.5e10,true,false,null,"\u00e9",{"a":[]},{}]`,
		`{"a":1,"a":{"b":2}}`, `"\ud800\u0041"`, "\"\xff\"", `{"a":1}x`, `[[[[]]]]`, `1e400`,
	} {
		f.Add([]byte(s), "choices[0].delta.content")
	}
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		// Whatever the input: no panic, and validity agrees with encoding/json.
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
		v, err := Get(data, path)
		if err == nil {
			_, _ = v.String()
			_, _ = v.Int()
			_, _ = v.Float()
			for it := v.Iter(); it.Next(); {
				_, _ = it.Value().Get(path)
			}
		}
		if json.Valid(data) {
			checkAgainstJSON(t, data)
		}
	})
}

// mustRaw returns the raw member k of object v, found with Iter (which can
// name any key, unlike a path).
func mustRaw(t *testing.T, v Value, k string) []byte {
	var raw []byte
	for it := v.Iter(); it.Next(); {
		if it.Key().Equal(k) {
			raw = it.Value().Raw()
		}
	}
	return raw
}
