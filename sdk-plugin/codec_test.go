package sdk

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"adhost/abi"
)

// decodeStrict decodes as the host does: unknown fields and trailing data
// are errors.
func decodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("host decode of %q: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("trailing data in %q", b)
	}
}

// randString mixes ASCII, escapes, control characters, multi-byte UTF-8,
// invalid bytes and long plain runs.
func randString(r *rand.Rand) string {
	pieces := []string{"a", "hello ", `"`, `\`, "\n", "\t", "\x00", "\x1f", "\x7f", "é", "世界", "😀",
		"\xff", "\xe4\xb8", "<&>", "\u2028", strings.Repeat("x", 17), "\\u0041", "/"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randRaw(r *rand.Rand) json.RawMessage {
	vals := []string{`{}`, `{"value":7}`, ` { "a" : [1, 2.5e3, "x y"] , "b":null } `, `[]`, `"s"`, `null`, `true`,
		"{\"k\":\"tab\\there\",\n\"n\":-0.5}", `{"u":"\u00e9<>"}`}
	return json.RawMessage(vals[r.IntN(len(vals))])
}

func randInt64(r *rand.Rand) *int64 {
	if r.IntN(3) == 0 {
		return nil
	}
	v := r.Int64N(1<<40) - 5
	return &v
}

func randCompleteInput(r *rand.Rand) *abi.CompleteInput {
	in := &abi.CompleteInput{Model: randString(r), Instructions: randString(r),
		MaxOutputTokens: r.IntN(100000), Step: r.IntN(10)}
	for range r.IntN(5) {
		m := abi.Message{Role: randString(r), Content: randString(r)}
		if r.IntN(2) == 0 {
			m.ToolCallID, m.Name = randString(r), randString(r)
		}
		for range r.IntN(3) {
			m.ToolCalls = append(m.ToolCalls, abi.ToolCall{ID: randString(r), Name: randString(r), Arguments: randRaw(r)})
		}
		for range r.IntN(3) {
			m.Parts = append(m.Parts, abi.Part{Type: randString(r), Text: randString(r), MediaType: randString(r), Data: randString(r), Name: randString(r)})
		}
		in.Messages = append(in.Messages, m)
	}
	for range r.IntN(3) {
		in.Tools = append(in.Tools, abi.ToolDef{Name: randString(r), Description: randString(r), InputSchema: randRaw(r)})
	}
	if r.IntN(2) == 0 {
		in.OutputSchema = randRaw(r)
	}
	if r.IntN(2) == 0 {
		in.Native = randRaw(r)
	}
	return in
}

func TestDecodeInputMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b, err := json.Marshal(randCompleteInput(r))
		if err != nil {
			t.Fatal(err)
		}
		var want, got abi.CompleteInput
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeCompleteInput(b, &got); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decode %s:\n got %+v\nwant %+v", b, got, want)
		}
		ti := abi.ToolInvokeInput{CallID: randString(r), Name: randString(r), Arguments: randRaw(r)}
		b, _ = json.Marshal(ti)
		var wantT, gotT abi.ToolInvokeInput
		if err := json.Unmarshal(b, &wantT); err != nil {
			t.Fatal(err)
		}
		if err := decodeToolInvokeInput(b, &gotT); err != nil || !reflect.DeepEqual(gotT, wantT) {
			t.Fatalf("decode %s: %+v, %v; want %+v", b, gotT, err, wantT)
		}
	}
}

func TestDecodeInputEdgeCases(t *testing.T) {
	for _, doc := range []string{
		`{"model":"m","messages":null,"native":null,"outputSchema":{"type" : "object"}}`,
		`{"model":"a","model":"b","unknown":{"x":[1,2]},"step":3}`,
		`{"model":null,"step":null,"messages":[{"role":"user","toolCalls":[{"id":"1","arguments":null}]}]}`,
		` {"model":"\u00e9\ud83d\ude00\n"} `,
		`{}`, `null`, ` null `,
	} {
		var want, got abi.CompleteInput
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if err := decodeCompleteInput([]byte(doc), &got); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", doc, got, want)
		}
	}
	for _, doc := range []string{
		``, `[]`, `{"model":1}`, `{"messages":{}}`, `{"messages":[1]}`, `{"step":1.5}`, `{"step":"1"}`,
		`{"maxOutputTokens":1e3}`, `{"step":99999999999999999999}`, `{"model":"m"`, `{"model":"m"} x`,
		`{"messages":[{"toolCalls":[{"id":2}]}]}`, `{"tools":[{"name":true}]}`,
	} {
		var want, got abi.CompleteInput
		if json.Unmarshal([]byte(doc), &want) == nil {
			t.Fatalf("encoding/json accepts %s", doc)
		}
		if err := decodeCompleteInput([]byte(doc), &got); err == nil {
			t.Errorf("decode %s: no error", doc)
		}
	}
}

func TestDecodeInputExactNames(t *testing.T) {
	// abi's names are exact and case-sensitive: another case is an unknown
	// member (encoding/json would accept it).
	var got abi.CompleteInput
	doc := `{"MODEL":"m","Messages":[{"ROLE":"user","content":"c"}],"maxoutputtokens":5,"model":"x"}`
	if err := decodeCompleteInput([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "x" || got.Messages != nil || got.MaxOutputTokens != 0 {
		t.Errorf("decoded %+v", got)
	}
}

// hasFoldedName reports a member name that differs from one of abi's names
// only in case, where encoding/json and the SDK's decoder differ on
// purpose.
func hasFoldedName(data []byte) bool {
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return false
	}
	names := strings.Fields("model instructions messages tools maxOutputTokens outputSchema native step " +
		"role content toolCalls toolCallId name id arguments description inputSchema callId")
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				for _, n := range names {
					if k != n && strings.EqualFold(k, n) {
						return true
					}
				}
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}

func randCompleteOutput(r *rand.Rand) *abi.CompleteOutput {
	o := &abi.CompleteOutput{Text: randString(r), FinishReason: randString(r)}
	for range r.IntN(3) {
		o.ToolCalls = append(o.ToolCalls, abi.ToolCall{ID: randString(r), Name: randString(r), Arguments: randRaw(r)})
	}
	if r.IntN(2) == 0 {
		cost := r.Float64() * math.Pow(10, float64(r.IntN(40)-20))
		o.Usage = &abi.Usage{InputTokens: randInt64(r), OutputTokens: randInt64(r), CachedInputTokens: randInt64(r),
			ReasoningTokens: randInt64(r), CacheCreationInputTokens: randInt64(r), CostUSD: &cost}
	}
	if r.IntN(2) == 0 {
		o.Native = randRaw(r)
	}
	return o
}

// checkSameDecoded checks that two encodings decode (strictly, as the host
// decodes) to equal values of T, raw members compared after json.Marshal's
// normalisation.
func checkSameDecoded[T any](t *testing.T, got, want []byte) {
	t.Helper()
	var g, w T
	decodeStrict(t, got, &g)
	decodeStrict(t, want, &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("encoded %s\n  want %s", got, want)
	}
}

func TestEncodeOutputMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		o := randCompleteOutput(r)
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendCompleteOutput(nil, o)
		if err != nil {
			t.Fatal(err)
		}
		checkSameDecoded[abi.CompleteOutput](t, got, want)
		if !utf8.Valid(got) {
			t.Fatalf("invalid UTF-8 in %q", got)
		}
		// Raw members are compacted exactly as json.Compact does.
		for _, tc := range o.ToolCalls {
			var c bytes.Buffer
			_ = json.Compact(&c, tc.Arguments)
			if !bytes.Contains(got, c.Bytes()) {
				t.Fatalf("arguments %s not compacted in %s", tc.Arguments, got)
			}
		}

		e := abi.ErrorOutput{Code: randString(r), Message: randString(r), Retryable: r.IntN(2) == 0,
			Status: r.IntN(3) * 250, RetryAfterMs: r.Int64N(3) * 1000}
		want, _ = json.Marshal(e)
		checkSameDecoded[abi.ErrorOutput](t, appendErrorOutput(nil, &e), want)

		raw := randRaw(r)
		want, _ = json.Marshal(abi.ToolInvokeOutput{Output: raw})
		got, err = appendToolInvokeOutput(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		checkSameDecoded[abi.ToolInvokeOutput](t, got, want)

		info := abi.Info{ID: randString(r), Version: randString(r), Kind: abi.Kind(randString(r))}
		want, _ = json.Marshal(info)
		checkSameDecoded[abi.Info](t, appendInfo(nil, &info), want)

		insp := abi.InspectOutput{Code: randString(r), Complete: r.IntN(2) == 0}
		for range r.IntN(3) {
			insp.Models = append(insp.Models, randString(r))
		}
		want, _ = json.Marshal(insp)
		checkSameDecoded[abi.InspectOutput](t, appendInspectOutput(nil, &insp), want)
	}
}

func TestEncodeOutputErrors(t *testing.T) {
	for _, o := range []*abi.CompleteOutput{
		{Native: json.RawMessage(`{"a":`)},
		{ToolCalls: []abi.ToolCall{{ID: "1", Arguments: json.RawMessage(`{} {}`)}}},
		{ToolCalls: []abi.ToolCall{{ID: "1", Arguments: json.RawMessage{}}}},
	} {
		if _, err := json.Marshal(o); err == nil {
			t.Fatalf("json.Marshal accepts %+v", o)
		}
		if _, err := appendCompleteOutput(nil, o); err == nil {
			t.Errorf("appendCompleteOutput(%+v): no error", o)
		}
	}
	// A nil argument is null, as json.Marshal writes it.
	b, err := appendCompleteOutput(nil, &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "1"}}})
	if err != nil || !bytes.Contains(b, []byte(`"arguments":null`)) {
		t.Errorf("nil arguments: %s, %v", b, err)
	}
}

func FuzzCodec(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"hi"}],"maxOutputTokens":5,"step":1}`, "text\x00é\xff")
	f.Add(`{"messages":[{"role":"tool","toolCalls":[{"id":"1","arguments":{"a":1}}]}],"native":{"s":1}}`, `"\`)
	f.Add(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}],"outputSchema":null}`, "\u2028<>&")
	f.Fuzz(func(t *testing.T, input, text string) {
		// Decoding agrees with encoding/json on whether the input is a
		// CompleteInput, and on its value.
		var want, got abi.CompleteInput
		werr := json.Unmarshal([]byte(input), &want)
		gerr := decodeCompleteInput([]byte(input), &got)
		if hasFoldedName([]byte(input)) {
			// Names in another case: encoding/json takes them, the
			// SDK (exact, as abi says) ignores them.
		} else if (werr == nil) != (gerr == nil) {
			t.Fatalf("decode %q: err %v, encoding/json %v", input, gerr, werr)
		}
		if werr == nil && gerr == nil && !hasFoldedName([]byte(input)) && !reflect.DeepEqual(got, want) {
			t.Fatalf("decode %q:\n got %+v\nwant %+v", input, got, want)
		}
		// Encoding any text yields output the host decodes to the same
		// value as json.Marshal's.
		o := &abi.CompleteOutput{Text: text, FinishReason: text}
		if json.Valid([]byte(input)) {
			o.Native = json.RawMessage(input)
		}
		wantB, werr := json.Marshal(o)
		gotB, gerr := appendCompleteOutput(nil, o)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("encode %+v: err %v, json.Marshal %v", o, gerr, werr)
		}
		if werr == nil {
			checkSameDecoded[abi.CompleteOutput](t, gotB, wantB)
		}
	})
}

// inputHost serves one input and discards the output: the least a host
// does, so that allocations counted are the SDK's.
type inputHost struct {
	Host
	in  []byte
	out int
}

func (h *inputHost) Input(buf []byte) int32 {
	if len(buf) >= len(h.in) {
		copy(buf, h.in)
	}
	return int32(len(h.in))
}
func (h *inputHost) Output(p []byte)                { h.out = len(p) }
func (h *inputHost) Emit(abi.EmitKind, []byte) bool { return false }

type fixedProvider struct{ out abi.CompleteOutput }

func (p *fixedProvider) Complete(c *Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	if c.EmitText(p.out.Text) {
		return nil, ErrCancelled
	}
	return &p.out, nil
}

// TestDispatchAllocs bounds what one turn allocates in the SDK: in the
// sandbox an allocation costs about a microsecond. Expected: the input
// buffer, the input struct, the messages slice.
func TestDispatchAllocs(t *testing.T) {
	h := &inputHost{in: []byte(`{"model":"fixture-model","messages":[{"role":"user","content":"conformance:text"}],"maxOutputTokens":4096,"step":1}`)}
	p := &Plugin{Info: Info{ID: "x", Version: "1"}, Provider: &fixedProvider{out: abi.CompleteOutput{Text: "Hello fixture", FinishReason: "stop"}}}
	allocs := testing.AllocsPerRun(100, func() {
		if st := Dispatch(h, abi.OpComplete, p); st != abi.StatusOK {
			t.Fatalf("status %d", st)
		}
	})
	if allocs > 3 {
		t.Errorf("allocs per turn = %v, want ≤ 3", allocs)
	}
	if h.out == 0 {
		t.Error("no output")
	}
}

// TestHTTPMetaCodec checks the hand-written http_start meta and http_head
// codecs against encoding/json, which the host uses on the other side.
func TestHTTPMetaCodec(t *testing.T) {
	for _, req := range []abi.HTTPRequest{
		{Method: "GET", URL: "https://api.example.com/v1/models?after=a%26b"},
		{Method: "POST", URL: "http://127.0.0.1:8080/v1/chat/completions", Stream: true,
			Headers: map[string]string{"content-type": "application/json", "x-note": "quote \" slash \\ <tag> é \x01"}},
		{Method: "POST", URL: "https://h/\u2028", Headers: map[string]string{}},
	} {
		var got abi.HTTPRequest
		dec := json.NewDecoder(bytes.NewReader(appendHTTPRequest(nil, &req)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("host cannot decode meta of %+v: %v", req, err)
		}
		if len(req.Headers) == 0 {
			req.Headers = nil
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("meta round trip: got %+v, want %+v", got, req)
		}
	}

	for _, head := range []abi.HTTPResponse{
		{Status: 200},
		{Status: 429, Headers: map[string]string{"retry-after": "2", "content-type": "text/event-stream; charset=utf-8"}},
		{Status: 500, Headers: map[string]string{"x-odd": "a\"b\\c\u00e9"}},
	} {
		b, _ := json.Marshal(head)
		header := map[string]string{}
		status, err := decodeHTTPResponse(b, header)
		if err != nil {
			t.Fatalf("decodeHTTPResponse(%s): %v", b, err)
		}
		want := head.Headers
		if want == nil {
			want = map[string]string{}
		}
		if status != head.Status || !reflect.DeepEqual(header, want) {
			t.Errorf("decodeHTTPResponse(%s) = %d %v", b, status, header)
		}
	}
	for _, bad := range []string{``, `[]`, `{"status":"200"}`, `{"status":1.5}`, `{"status":200,"headers":[]}`, `{"status":200,"headers":{"a":1}}`, `{"status":200`} {
		if _, err := decodeHTTPResponse([]byte(bad), map[string]string{}); err == nil {
			t.Errorf("decodeHTTPResponse(%q) accepted", bad)
		}
	}
	for _, head := range httpHeadCases {
		checkHTTPStatus(t, []byte(head))
	}
}

var httpHeadCases = []string{
	`{"status":200}`,
	`{"status":200,"headers":null}`,
	`{"status":200,"headers":{"content-length":"313","content-type":"application/json","date":"Mon, 30 Nov 2026 11:00:00 GMT"}}`,
	`{"headers":{"a":"1","a":"2","b\u0041":"x\"y"},"status":429,"headers":{"retry-after":"2"},"x":[1,{"y":null}]}`,
	`{"status":500,"headers":{"x-odd":"a\"b\\c\u00e9"}}`,
	``, `[]`, `null`, `{"status":"200"}`, `{"status":1.5}`, `{"status":200,"headers":[]}`, `{"status":200`,
	`{"status":200,"headers":{"a":"1"}} x`, `{"status":200,"headers":{"a":}}`,
}

// checkHTTPStatus checks decodeHTTPStatus and lookupHeader against
// decodeHTTPResponse on head: both accept it (with the same status and
// every header found) or both refuse it, except that decodeHTTPStatus
// does not check the type of header values.
func checkHTTPStatus(t *testing.T, head []byte) {
	t.Helper()
	header := map[string]string{}
	wantStatus, wantErr := decodeHTTPResponse(head, header)
	status, headers, err := decodeHTTPStatus(head)
	if err != nil {
		if wantErr == nil {
			t.Fatalf("decodeHTTPStatus(%q): %v; decodeHTTPResponse accepts it", head, err)
		}
		return
	}
	if wantErr != nil {
		if !strings.HasPrefix(wantErr.Error(), "headers: ") {
			t.Fatalf("decodeHTTPStatus(%q) accepts it; decodeHTTPResponse: %v", head, wantErr)
		}
		return // a header value of another type: Get reads it as ""
	}
	if status != wantStatus {
		t.Fatalf("decodeHTTPStatus(%q) status %d, want %d", head, status, wantStatus)
	}
	for k, v := range header {
		if got := lookupHeader(headers, k); got != v {
			t.Fatalf("lookupHeader(%q, %q) = %q, want %q", head, k, got, v)
		}
	}
	if got := lookupHeader(headers, "x-never-sent"); got != "" {
		t.Fatalf("lookupHeader(%q, absent) = %q", head, got)
	}
}

// FuzzHTTPHead: whatever the head, the lazy decoding of Send agrees with
// the map decoding of HTTP (see checkHTTPStatus).
func FuzzHTTPHead(f *testing.F) {
	for _, c := range httpHeadCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, head []byte) { checkHTTPStatus(t, head) })
}
