package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// recorder is an emitter for tests and benchmarks.
type recorder struct {
	text      []byte
	deltas    int
	progress  int
	cancelled bool
}

func (r *recorder) EmitTextBytes(b []byte) bool { r.text = append(r.text, b...); return r.cancelled }
func (r *recorder) ToolCallDelta() bool         { r.deltas++; return r.cancelled }
func (r *recorder) Progress() bool              { r.progress++; return r.cancelled }

const (
	textChunk = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" the quick brown"},"logprobs":null,"finish_reason":null}],"usage":null}`
	toolChunk = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"value\":"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`
)

func TestTurnStreamCancel(t *testing.T) {
	r := &recorder{cancelled: true}
	st := &turnStream{out: r}
	if err := st.handle([]byte("message"), []byte(textChunk)); !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("handle after cancel = %v, want ErrCancelled", err)
	}
}

func TestTurnStreamIgnoresAfterDone(t *testing.T) {
	st := &turnStream{out: &recorder{}}
	for _, d := range []string{textChunk, "[DONE]", "not json at all"} {
		if err := st.handle([]byte("message"), []byte(d)); err != nil {
			t.Fatalf("handle(%q) = %v", d, err)
		}
	}
	out, err := st.result()
	if err != nil || out.Text != " the quick brown" {
		t.Fatalf("result = %+v, %v", out, err)
	}
}

func TestTurnStreamToolIndexBound(t *testing.T) {
	st := &turnStream{out: &recorder{}}
	err := st.handle([]byte("message"), []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":100000000,"id":"x"}]}}]}`))
	var pe *sdk.Error
	if !errors.As(err, &pe) || pe.Code != sdk.CodeInvalidProviderResponse || len(st.calls) != 0 {
		t.Fatalf("huge index: err %v, %d calls allocated", err, len(st.calls))
	}
}

// FuzzTurnStream feeds arbitrary events to the stream parser: it must
// never panic, and a successful result's text must equal what it streamed.
func FuzzTurnStream(f *testing.F) {
	f.Add([]byte(textChunk), []byte(toolChunk), []byte("[DONE]"))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`), []byte(`{"choices":[],"usage":{"prompt_tokens":1}}`), []byte("[DONE]"))
	f.Add([]byte(`{"error":{"message":"x"}}`), []byte(``), []byte(`[DONE]`))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}`), []byte(`{"choices":null}`), []byte("[DONE]"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		r := &recorder{}
		st := &turnStream{out: r}
		for _, d := range [][]byte{a, b, c} {
			if err := st.handle([]byte("message"), d); err != nil {
				return
			}
		}
		out, err := st.result()
		if err != nil {
			return
		}
		if out.Text != string(r.text) {
			t.Fatalf("result text %q != streamed %q", out.Text, r.text)
		}
		for _, tc := range out.ToolCalls {
			if !json.Valid(tc.Arguments) || tc.ID == "" || tc.Name == "" {
				t.Fatalf("invalid tool call %+v", tc)
			}
		}
	})
}

// BenchmarkHandleTextChunk is the adapter's own cost per SSE event: one
// ~300-byte content chunk scanned and emitted (natively; in wasm with
// close-on-done it is several times more).
func BenchmarkHandleTextChunk(b *testing.B) {
	r := &recorder{}
	st := &turnStream{out: r}
	data := []byte(textChunk)
	name := []byte("message")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := st.handle(name, data); err != nil {
			b.Fatal(err)
		}
		if len(st.text) > 1<<20 {
			st.text, r.text = st.text[:0], r.text[:0]
		}
	}
}

// BenchmarkHandleToolChunk: one tool-argument fragment.
func BenchmarkHandleToolChunk(b *testing.B) {
	st := &turnStream{out: &recorder{}}
	st.handle([]byte("message"), []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`))
	data := []byte(toolChunk)
	name := []byte("message")
	b.ReportAllocs()
	for b.Loop() {
		if err := st.handle(name, data); err != nil {
			b.Fatal(err)
		}
		if c := st.calls[0]; len(c.args) > 1<<20 {
			c.args = c.args[:0]
		}
	}
}

// frameHost is an sdk.Host serving a prepared SSE stream from memory, so
// BenchmarkCompleteEvents measures the whole guest side of an event (SDK
// NextEvent, scan, emit) without HTTP.
type frameHost struct {
	frame  []byte
	events int // events left before [DONE]
	done   bool
	config []byte
	head   []byte
	input  []byte
}

func (h *frameHost) Input(buf []byte) int32  { return sizeOr(buf, h.input) }
func (h *frameHost) Output(p []byte)         {}
func (h *frameHost) Config(buf []byte) int32 { return sizeOr(buf, h.config) }
func (h *frameHost) Emit(abi.EmitKind, []byte) bool {
	return false
}
func (h *frameHost) HTTPStart(meta, body []byte) int32  { return 1 }
func (h *frameHost) HTTPHead(_ int32, buf []byte) int32 { return sizeOr(buf, h.head) }
func (h *frameHost) HTTPRead(int32, []byte) int64       { return abi.PackEOF(0, true) }
func (h *frameHost) HTTPNextEvent(_ int32, buf []byte) int64 {
	f := h.frame
	if h.events == 0 {
		if h.done {
			return abi.PackEOF(0, true)
		}
		f = abi.AppendEvent(nil, "message", []byte("[DONE]"))
	}
	if len(f) > len(buf) {
		return abi.PackEOF(uint32(len(f)), false)
	}
	copy(buf, f)
	if h.events == 0 {
		h.done = true
	} else {
		h.events--
	}
	return abi.PackEOF(uint32(len(f)), false)
}
func (h *frameHost) HTTPClose(int32)              {}
func (h *frameHost) Cancelled() bool              { return false }
func (h *frameHost) Log(abi.LogLevel, []byte)     {}
func (h *frameHost) LogEnabled(abi.LogLevel) bool { return false }

// sizeOr copies data into buf when it fits and returns its full length
// (the ABI buffer rule).
func sizeOr(buf, data []byte) int32 {
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

// BenchmarkCompleteEvents runs Complete over a 1000-event stream and reports
// the guest-side cost per event (ns/event), SDK included.
func BenchmarkCompleteEvents(b *testing.B) {
	const events = 1000
	in := &abi.CompleteInput{Model: "m", Messages: []abi.Message{{Role: "user", Content: "hi"}}, MaxOutputTokens: 100, Step: 1}
	cfg := []byte(`{"endpoint":"https://api.openai.com/v1/"}`)
	head := []byte(`{"status":200,"headers":{"content-type":"text/event-stream"}}`)
	frame := abi.AppendEvent(nil, "message", []byte(textChunk))
	b.ReportAllocs()
	for b.Loop() {
		h := &frameHost{frame: frame, events: events, config: cfg, head: head}
		out, err := provider{}.Complete(sdk.NewCall(h), in)
		if err != nil || len(out.Text) != events*len(" the quick brown") {
			b.Fatalf("complete: %v", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// FuzzStreamParity checks the fast parser against the jsonscan reference
// (stream_ref_test.go): whenever the reference accepts a stream, the fast
// parser must accept it with the same output, text and progress. It may
// accept more — malformed bytes it skips (control characters, scalars and
// escapes of top-level members), and the error members quickChunk does not
// look for — but nothing else.
func FuzzStreamParity(f *testing.F) {
	f.Add([]byte(textChunk), []byte(toolChunk), []byte("[DONE]"))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`), []byte(`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}`), []byte("[DONE]"))
	f.Add([]byte(`{"choices":[{"delta":{"content":"a\u00e9\ud83d\ude00\n"},"index":1}]}`), []byte(`{"choices":[{"delta":{"content":"\u00e9x"}}]}`), []byte(" [DONE] "))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"n","arguments":{"a":[1,2.5e3,true,null]}}}]}}]}`), []byte(`{"choices":[{"delta":{"tool_calls":[{"id":"y","function":{"arguments":"{}"}}]}}]}`), []byte("[DONE]"))
	f.Add([]byte(`{"error":null,"choices":null,"usage":null}`), []byte(`{"choices":[{"finish_reason":"length","delta":{"refusal":null,"reasoning":"r"}}]}`), []byte("[DONE]"))
	f.Add([]byte(`{"choices":[{"delta":{"content":"x"}}]} x`), []byte(`{"a":-0.5e+7,"b":[{}],"c":{"d":[]}}`), []byte("[DONE]"))
	// Keys in sorted order (Go servers marshalling maps): the members after
	// choices are read by tailMembers.
	f.Add([]byte(`{"choices":[{"delta":{"content":"hi"},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-sim1","model":"m","object":"chat.completion.chunk","usage":null}`),
		[]byte(`{"choices":[],"created":-1.5e3,"error":null,"id":"x","usage":{"completion_tokens":2}}`), []byte("[DONE]"))
	f.Add([]byte(`{"choices":[{"delta":{"content":"a"}}],"error":"boom"}`), []byte(`{"choices":[{"delta":{"content":"b"}}],"x":tru}`), []byte("[DONE]"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		fast, ref := &recorder{}, &recorder{}
		fs, rs := &turnStream{out: fast}, &refTurnStream{out: ref}
		var ferr, rerr error
		for _, d := range [][]byte{a, b, c} {
			if ferr == nil {
				ferr = fs.handle([]byte("message"), d)
			}
			if rerr == nil {
				rerr = rs.handle([]byte("message"), d)
			}
		}
		var fout, rout *abi.CompleteOutput
		if ferr == nil {
			fout, ferr = fs.result()
		}
		if rerr == nil {
			rout, rerr = rs.result()
		}
		switch {
		case rerr == nil && ferr != nil:
			t.Fatalf("reference accepted (%+v), fast parser failed: %v", rout, ferr)
		case rerr == nil:
			fj, _ := json.Marshal(fout)
			rj, _ := json.Marshal(rout)
			if string(fj) != string(rj) || string(fast.text) != string(ref.text) || fast.deltas != ref.deltas || fast.progress != ref.progress {
				t.Fatalf("outputs differ:\nfast %s (text %q, %d deltas, %d progress)\n ref %s (text %q, %d deltas, %d progress)",
					fj, fast.text, fast.deltas, fast.progress, rj, ref.text, ref.deltas, ref.progress)
			}
		case ferr == nil:
			var pe *sdk.Error
			if !errors.As(rerr, &pe) || pe.Code == sdk.CodeInvalidProviderResponse {
				return
			}
			// The one other leniency: quickChunk does not look for a scalar
			// "error" member or "object":"error" before choices.
			for _, d := range [][]byte{a, b, c} {
				if _, _, _, ok := quickChunk(bytes.TrimSpace(d)); ok && pe.Code == sdk.CodeProviderFailed {
					return
				}
			}
			t.Fatalf("reference failed with %v, fast parser succeeded", rerr)
		}
	})
}

// FuzzModelsPage: the models-list parser never panics and never returns an
// empty id.
func FuzzModelsPage(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"id":"a","object":"model"}],"has_more":true,"last_id":"a"}`))
	f.Add([]byte(`{"data":[{"id":""}]}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pg, ok := parseModelsPage(b)
		if !ok {
			return
		}
		for _, id := range pg.ids {
			if id == "" {
				t.Fatal("empty id accepted")
			}
		}
		if pg.hasMore && pg.cursor == "" && len(pg.ids) > 0 {
			t.Fatal("no cursor for a page with ids")
		}
	})
}

// FuzzParseSettings: settings either fail or yield an endpoint that is
// https (or loopback http), ends in "/" and passes its own check again.
func FuzzParseSettings(f *testing.F) {
	f.Add([]byte(`{"endpoint":"https://api.openai.com/v1"}`))
	f.Add([]byte(`{"endpoint":"http://127.0.0.1:8080/v1/","maxTokensField":"max_tokens"}`))
	f.Add([]byte(`{"endpoint":"http://[::1]/"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := parseSettings(b)
		if err != nil {
			return
		}
		if !strings.HasSuffix(cfg.endpoint, "/") {
			t.Fatalf("endpoint %q lacks the trailing slash", cfg.endpoint)
		}
		again, err := sdk.CheckEndpoint(cfg.endpoint)
		if err != nil || again != cfg.endpoint {
			t.Fatalf("endpoint %q does not pass its own check: %q, %v", cfg.endpoint, again, err)
		}
	})
}

// FuzzTailMembers checks tailMembers against skimTail, which it stands in
// for: whenever it does not leave the tail to skimTail, it answers the
// same.
func FuzzTailMembers(f *testing.F) {
	for _, s := range []string{
		`,"created":1767225600,"id":"chatcmpl-sim1","model":"sim-large","object":"chat.completion.chunk","system_fingerprint":"fp_vendorsim","usage":null}`,
		`,"usage":{"prompt_tokens":1}}`, `,"usage":null,"error":null} `, `}`, ` , "a" : -0.5e+3 , "b":true,"c":false}`,
		`,"choices":[]}`, `,"us\u0061ge":1}`, `,"a":"x\"y"}`, `,"a":01}`, `,"a":1.}`, `,"a":tru}`, `,"a":1}x`,
		`,"a":"b"`, `,"a" 1}`, `,"a":}`, `,}`, `"a":1}`, `,"error":"boom","usage":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tail []byte) {
		usage, errv, ok, slow := tailMembers(tail)
		if slow {
			return
		}
		wu, we, wok := skimTail(tail)
		if ok != wok || string(usage) != string(wu) || string(errv) != string(we) ||
			(usage == nil) != (wu == nil) || (errv == nil) != (we == nil) {
			t.Fatalf("tailMembers(%q) = %q, %q, %v; skimTail %q, %q, %v", tail, usage, errv, ok, wu, we, wok)
		}
	})
}
