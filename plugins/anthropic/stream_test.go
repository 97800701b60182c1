package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/abi/sse"
	sdk "adhost/sdk-plugin"
)

// recorder is an emitter that records what a turn streamed.
type recorder struct {
	text              strings.Builder
	deltas, progress  int
	cancelAfterDeltas int // > 0: report cancellation at that many text deltas
	textDeltas        int
}

func (r *recorder) EmitTextBytes(b []byte) bool {
	r.text.Write(b)
	r.textDeltas++
	return r.cancelAfterDeltas > 0 && r.textDeltas >= r.cancelAfterDeltas
}
func (r *recorder) ToolCallDelta() bool { r.deltas++; return false }
func (r *recorder) Progress() bool      { r.progress++; return false }

// sseSource feeds an SSE body through the host's framing (abi/sse).
type sseSource struct{ r *sse.Reader }

func newSource(body string) *sseSource { return &sseSource{r: sse.NewReader(strings.NewReader(body))} }

func (s *sseSource) NextEvent() (name, data []byte, err error) {
	ev, err := s.r.Next()
	if err != nil {
		return nil, nil, err
	}
	return []byte(ev.Name), ev.Data, nil
}

func runStream(t *testing.T, body string) (*abi.CompleteOutput, *recorder, error) {
	t.Helper()
	rec := &recorder{}
	s := &turnStream{out: rec}
	out, err := s.run(newSource(body))
	return out, rec, err
}

func codeOf(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, sdk.ErrCancelled) {
		return "cancelled"
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func ev(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

const (
	start     = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	textStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	stop0     = `{"type":"content_block_stop","index":0}`
	msgStop   = `{"type":"message_stop"}`
)

func textDelta(i int, s string) string {
	b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]string{"type": "text_delta", "text": s}})
	return string(b)
}

func msgDelta(reason string, usage string) string {
	d := `{"type":"message_delta","delta":{"stop_reason":"` + reason + `","stop_sequence":null}`
	if usage != "" {
		d += `,"usage":` + usage
	}
	return d + "}"
}

func TestStreamText(t *testing.T) {
	body := ev("message_start", start) + ev("content_block_start", textStart) + ev("ping", `{"type":"ping"}`) +
		ev("content_block_delta", textDelta(0, "Hello")) + ev("content_block_delta", textDelta(0, " wörld \u2028\"")) +
		ev("content_block_stop", stop0) + ev("message_delta", msgDelta("end_turn", `{"output_tokens":15}`)) + ev("message_stop", msgStop)
	out, rec, err := runStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Hello wörld \u2028\""; out.Text != want || rec.text.String() != want {
		t.Errorf("text = %q, streamed %q, want %q", out.Text, rec.text.String(), want)
	}
	if out.FinishReason != "stop" || len(out.ToolCalls) != 0 {
		t.Errorf("finish %q calls %v", out.FinishReason, out.ToolCalls)
	}
	if rec.progress != 0 {
		t.Errorf("ping counted as progress")
	}
	u := out.Usage
	if u == nil || *u.InputTokens != 25 || *u.OutputTokens != 15 || u.CachedInputTokens != nil {
		t.Errorf("usage = %+v", u)
	}
}

func TestStreamUsageWithCache(t *testing.T) {
	st := `{"type":"message_start","message":{"usage":{"input_tokens":50,"cache_read_input_tokens":100000,"cache_creation_input_tokens":2000,"output_tokens":1}}}`
	body := ev("message_start", st) + ev("message_delta", msgDelta("end_turn", `{"output_tokens":500}`)) + ev("message_stop", msgStop)
	out, _, err := runStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	u := out.Usage
	if *u.InputTokens != 102050 || *u.CachedInputTokens != 100000 || *u.CacheCreationInputTokens != 2000 || *u.OutputTokens != 500 {
		t.Errorf("usage = in %d cached %d creation %d out %d", *u.InputTokens, *u.CachedInputTokens, *u.CacheCreationInputTokens, *u.OutputTokens)
	}
}

func TestStreamNoUsage(t *testing.T) {
	st := `{"type":"message_start","message":{"id":"m","content":[]}}`
	body := ev("message_start", st) + ev("content_block_start", textStart) + ev("content_block_delta", textDelta(0, "x")) +
		ev("content_block_stop", stop0) + ev("message_delta", msgDelta("end_turn", "")) + ev("message_stop", msgStop)
	out, _, err := runStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Usage != nil {
		t.Errorf("usage = %+v, want none", out.Usage)
	}
}

func TestStreamToolUse(t *testing.T) {
	frag := func(i int, s string) string {
		b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]string{"type": "input_json_delta", "partial_json": s}})
		return string(b)
	}
	body := ev("message_start", start) + ev("content_block_start", textStart) + ev("content_block_delta", textDelta(0, "Okay")) + ev("content_block_stop", stop0) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`) +
		ev("content_block_delta", frag(1, "")) + ev("content_block_delta", frag(1, `{"location":`)) + ev("content_block_delta", frag(1, ` "San Francisco, CA"}`)) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"now","input":{}}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		ev("message_delta", msgDelta("tool_use", `{"output_tokens":89}`)) + ev("message_stop", msgStop)
	out, rec, err := runStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "Okay" || out.FinishReason != "stop" || len(out.ToolCalls) != 2 {
		t.Fatalf("out = %+v", out)
	}
	c := out.ToolCalls[0]
	if c.ID != "toolu_01" || c.Name != "get_weather" || string(c.Arguments) != `{"location": "San Francisco, CA"}` {
		t.Errorf("call 0 = %+v (%s)", c, c.Arguments)
	}
	if c := out.ToolCalls[1]; c.ID != "toolu_02" || string(c.Arguments) != "{}" {
		t.Errorf("call 1 = %+v (%s)", c, c.Arguments)
	}
	if rec.deltas != 2 { // the empty opening fragment is not progress
		t.Errorf("tool deltas = %d, want 2", rec.deltas)
	}
}

func TestStreamOutcomes(t *testing.T) {
	toolStart := ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`)
	text := ev("message_start", start) + ev("content_block_start", textStart) + ev("content_block_delta", textDelta(0, "Hi")) + ev("content_block_stop", stop0)
	for _, tc := range []struct {
		name, body string
		code       string
		finish     string
	}{
		{"max tokens", text + ev("message_delta", msgDelta("max_tokens", "")) + ev("message_stop", msgStop), "", "length"},
		{"stop sequence", text + ev("message_delta", msgDelta("stop_sequence", "")) + ev("message_stop", msgStop), "", "stop"},
		{"context window", text + ev("message_delta", msgDelta("model_context_window_exceeded", "")) + ev("message_stop", msgStop), "", "length"},
		{"refusal", text + ev("message_delta", msgDelta("refusal", "")) + ev("message_stop", msgStop), "PROVIDER_REFUSAL", ""},
		{"pause turn", text + ev("message_delta", msgDelta("pause_turn", "")) + ev("message_stop", msgStop), "PROVIDER_FAILED", ""},
		{"truncated tool call", text + toolStart + ev("content_block_stop", `{"type":"content_block_stop","index":1}`) + ev("message_delta", msgDelta("max_tokens", "")) + ev("message_stop", msgStop), "TRUNCATED_TOOL_CALL", ""},
		{"tool call cut off without block stop", text + toolStart + ev("message_delta", msgDelta("max_tokens", "")) + ev("message_stop", msgStop), "TRUNCATED_TOOL_CALL", ""},
		{"malformed tool input", text + toolStart + ev("content_block_stop", `{"type":"content_block_stop","index":1}`) + ev("message_delta", msgDelta("tool_use", "")) + ev("message_stop", msgStop), "INVALID_PROVIDER_RESPONSE", ""},
		{"no message_stop", text + ev("message_delta", msgDelta("end_turn", "")), "INCOMPLETE_STREAM", ""},
		{"empty stream", "", "INCOMPLETE_STREAM", ""},
		{"overloaded", text + ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "PROVIDER_ERROR", ""},
		{"rate limit mid-stream", ev("message_start", start) + ev("error", `{"type":"error","error":{"type":"rate_limit_error","message":"x"}}`), "RATE_LIMITED", ""},
		{"api error", text + ev("error", `{"type":"error","error":{"type":"api_error","message":"conformance-secret-marker"}}`), "PROVIDER_FAILED", ""},
		{"not json", ev("message_start", "{"), "INVALID_PROVIDER_RESPONSE", ""},
		{"delta for unknown block", ev("message_start", start) + ev("content_block_delta", textDelta(3, "x")), "INVALID_PROVIDER_RESPONSE", ""},
		{"delta before start", ev("content_block_start", textStart), "INVALID_PROVIDER_RESPONSE", ""},
		{"unknown events ignored", text + ev("future_event", `{"type":"future_event"}`) + ev("message_delta", msgDelta("end_turn", "")) + ev("message_stop", msgStop), "", "stop"},
		{"no event names", strings.ReplaceAll(text+ev("message_delta", msgDelta("end_turn", ""))+ev("message_stop", msgStop), "event: ", "x-ignored: "), "", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runStream(t, tc.body)
			if got := codeOf(err); got != tc.code {
				t.Fatalf("code = %q, want %q", got, tc.code)
			}
			if err == nil && out.FinishReason != tc.finish {
				t.Errorf("finish = %q, want %q", out.FinishReason, tc.finish)
			}
			if err != nil && strings.Contains(err.Error(), "conformance-secret-marker") {
				t.Errorf("error carries the vendor's message: %v", err)
			}
		})
	}
}

func TestStreamOverloadedIsRetryable(t *testing.T) {
	_, _, err := runStream(t, ev("message_start", start)+ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	var e *sdk.Error
	if !errors.As(err, &e) || !e.Retryable || e.Status != 529 {
		t.Errorf("err = %#v, want retryable PROVIDER_ERROR status 529", err)
	}
}

func TestStreamStopsReadingAtMessageStop(t *testing.T) {
	body := ev("message_start", start) + ev("message_delta", msgDelta("end_turn", "")) + ev("message_stop", msgStop) + ev("content_block_start", "{broken")
	src := newSource(body)
	s := &turnStream{out: &recorder{}}
	if _, err := s.run(src); err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.NextEvent(); err == io.EOF {
		t.Error("the whole body was read; want the loop to stop at message_stop")
	}
}

func TestStreamCancelled(t *testing.T) {
	body := ev("message_start", start) + ev("content_block_start", textStart) + ev("content_block_delta", textDelta(0, "a")) + ev("content_block_delta", textDelta(0, "b"))
	rec := &recorder{cancelAfterDeltas: 1}
	s := &turnStream{out: rec}
	_, err := s.run(newSource(body))
	if !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if rec.textDeltas != 1 {
		t.Errorf("kept emitting after cancellation: %d deltas", rec.textDeltas)
	}
}

func TestStreamThinkingIsProgressNotText(t *testing.T) {
	body := ev("message_start", start) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"secret reasoning"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`) +
		ev("content_block_stop", stop0) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", textDelta(1, "42")) + ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("message_delta", msgDelta("end_turn", "")) + ev("message_stop", msgStop)
	out, rec, err := runStream(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "42" || rec.progress != 1 {
		t.Errorf("text %q progress %d", out.Text, rec.progress)
	}
}

// FuzzStream feeds arbitrary event sequences: the parser must never panic,
// and a successful result's text must equal what was streamed.
func FuzzStream(f *testing.F) {
	f.Add(ev("message_start", start) + ev("content_block_start", textStart) + ev("content_block_delta", textDelta(0, "Hi")) +
		ev("content_block_stop", stop0) + ev("message_delta", msgDelta("end_turn", `{"output_tokens":3}`)) + ev("message_stop", msgStop))
	f.Add(ev("message_start", start) + ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`) +
		ev("content_block_stop", stop0) + ev("message_delta", msgDelta("tool_use", "")) + ev("message_stop", msgStop))
	f.Add(ev("error", `{"type":"error","error":{"type":"overloaded_error"}}`))
	f.Add(ev("message_start", `{"message":{"usage":{"input_tokens":-1}}}`) + ev("content_block_start", `{"index":99999999999}`))
	f.Fuzz(func(t *testing.T, body string) {
		rec := &recorder{}
		s := &turnStream{out: rec}
		out, err := s.run(newSource(body))
		if err != nil {
			return
		}
		if out.Text != rec.text.String() {
			t.Fatalf("text %q != streamed %q", out.Text, rec.text.String())
		}
		for _, c := range out.ToolCalls {
			if !json.Valid(c.Arguments) || c.ID == "" || c.Name == "" {
				t.Fatalf("bad call %+v", c)
			}
		}
		if u := out.Usage; u != nil {
			for _, p := range []*int64{u.InputTokens, u.OutputTokens, u.CachedInputTokens} {
				if p != nil && *p < 0 {
					t.Fatalf("negative usage %+v", u)
				}
			}
		}
	})
}

type nopEmitter struct{}

func (nopEmitter) EmitTextBytes([]byte) bool { return false }
func (nopEmitter) ToolCallDelta() bool       { return false }
func (nopEmitter) Progress() bool            { return false }

// BenchmarkEvent is the adapter's per-event cost on the hot path: one
// ~200-byte content_block_delta (text_delta) scanned and emitted.
func BenchmarkEvent(b *testing.B) {
	s := &turnStream{out: nopEmitter{}}
	for _, e := range [][2]string{{"message_start", start}, {"content_block_start", textStart}} {
		if _, err := s.handle([]byte(e[0]), []byte(e[1])); err != nil {
			b.Fatal(err)
		}
	}
	name := []byte("content_block_delta")
	data := []byte(textDelta(0, "The quick brown fox jumps over the lazy dog, \"quoted\" and caf\u00e9."))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.handle(name, data); err != nil {
			b.Fatal(err)
		}
		s.text.Reset()
	}
}

// BenchmarkToolEvent is the per-event cost of an input_json_delta.
func BenchmarkToolEvent(b *testing.B) {
	s := &turnStream{out: nopEmitter{}}
	for _, e := range [][2]string{{"message_start", start},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`}} {
		if _, err := s.handle([]byte(e[0]), []byte(e[1])); err != nil {
			b.Fatal(err)
		}
	}
	name := []byte("content_block_delta")
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.handle(name, data); err != nil {
			b.Fatal(err)
		}
		s.blocks[0].args = s.blocks[0].args[:0]
	}
}
