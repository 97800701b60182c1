package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/abi/sse"
	sdk "adhost/sdk-plugin"
)

type recorder struct {
	text              strings.Builder
	deltas, progress  int
	textDeltas        int
	cancelAfterDeltas int
}

func (r *recorder) EmitTextBytes(b []byte) bool {
	r.text.Write(b)
	r.textDeltas++
	return r.cancelAfterDeltas > 0 && r.textDeltas >= r.cancelAfterDeltas
}
func (r *recorder) ToolCallDelta() bool { r.deltas++; return false }
func (r *recorder) Progress() bool      { r.progress++; return false }

type sseSource struct{ r *sse.Reader }

func newSource(body string) *sseSource { return &sseSource{r: sse.NewReader(strings.NewReader(body))} }

func (s *sseSource) NextEvent() (name, data []byte, err error) {
	ev, err := s.r.Next()
	if err != nil {
		return nil, nil, err
	}
	return []byte(ev.Name), ev.Data, nil
}

func runStream(t *testing.T, step int, body string) (*abi.CompleteOutput, *recorder, error) {
	t.Helper()
	rec := &recorder{}
	s := &turnStream{out: rec, step: step}
	if err := s.run(newSource(body)); err != nil {
		return nil, rec, err
	}
	out, err := s.result()
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

func data(s string) string { return "data: " + s + "\r\n\r\n" }

func textChunk(s string) string {
	b, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]string{"text": s}}}, "index": 0}}})
	return string(b)
}

func finalChunk(reason, usage string) string {
	s := `{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"` + reason + `","index":0}]`
	if usage != "" {
		s += `,"usageMetadata":` + usage
	}
	return s + `,"modelVersion":"gemini-2.5-flash"}`
}

func TestStreamText(t *testing.T) {
	body := data(textChunk("Hello")) + data(textChunk(" wörld \"x\"")) + data(finalChunk("STOP", `{"promptTokenCount":8,"candidatesTokenCount":4,"totalTokenCount":12}`))
	out, rec, err := runStream(t, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != `Hello wörld "x"` || rec.text.String() != out.Text || out.FinishReason != "stop" {
		t.Errorf("out = %+v streamed %q", out, rec.text.String())
	}
	u := out.Usage
	if u == nil || *u.InputTokens != 8 || *u.OutputTokens != 4 || u.ReasoningTokens != nil || u.CachedInputTokens != nil {
		t.Errorf("usage = %+v", u)
	}
}

func TestStreamUsageThoughtsAndCache(t *testing.T) {
	body := data(textChunk("a")) + data(`{"usageMetadata":{"promptTokenCount":1}}`) +
		data(finalChunk("STOP", `{"promptTokenCount":1000,"cachedContentTokenCount":600,"candidatesTokenCount":40,"thoughtsTokenCount":200,"toolUsePromptTokenCount":10,"totalTokenCount":1250}`))
	out, _, err := runStream(t, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	u := out.Usage
	if *u.InputTokens != 1010 || *u.CachedInputTokens != 600 || *u.OutputTokens != 240 || *u.ReasoningTokens != 200 {
		t.Errorf("usage = in %d cached %d out %d reasoning %d", *u.InputTokens, *u.CachedInputTokens, *u.OutputTokens, *u.ReasoningTokens)
	}
}

func TestStreamFunctionCalls(t *testing.T) {
	calls := `{"candidates":[{"content":{"role":"model","parts":[` +
		`{"functionCall":{"name":"get_weather","args":{"location":"Paris"}},"thoughtSignature":"c2ln"},` +
		`{"functionCall":{"name":"get_time"}}]},"finishReason":"STOP","index":0}]}`
	out, rec, err := runStream(t, 3, data(calls))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.ToolCalls) != 2 || rec.deltas != 2 {
		t.Fatalf("calls = %+v deltas %d", out.ToolCalls, rec.deltas)
	}
	if c := out.ToolCalls[0]; c.ID != "call_3_0" || c.Name != "get_weather" || string(c.Arguments) != `{"location":"Paris"}` {
		t.Errorf("call 0 = %+v", c)
	}
	if c := out.ToolCalls[1]; c.ID != "call_3_1" || string(c.Arguments) != `{}` {
		t.Errorf("call 1 = %+v", c)
	}
	if got := readNative(out.Native); got["call_3_0"] != "c2ln" || len(got) != 1 {
		t.Errorf("native = %s", out.Native)
	}
}

func TestStreamOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       string
		finish     string
	}{
		{"max tokens", data(textChunk("a")) + data(finalChunk("MAX_TOKENS", "")), "", "length"},
		{"safety", data(textChunk("a")) + data(`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH"}]}]}`), "PROVIDER_REFUSAL", ""},
		{"recitation", data(finalChunk("RECITATION", "")), "PROVIDER_REFUSAL", ""},
		{"prohibited", data(finalChunk("PROHIBITED_CONTENT", "")), "PROVIDER_REFUSAL", ""},
		{"blocked prompt", data(`{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":5}}`), "PROVIDER_REFUSAL", ""},
		{"malformed call", data(finalChunk("MALFORMED_FUNCTION_CALL", "")), "PROVIDER_FAILED", ""},
		{"other", data(finalChunk("OTHER", "")), "PROVIDER_FAILED", ""},
		{"future reason", data(finalChunk("SOMETHING_NEW", "")), "PROVIDER_FAILED", ""},
		{"no finish reason", data(textChunk("a")) + data(textChunk("b")), "INCOMPLETE_STREAM", ""},
		{"unspecified is no finish", data(finalChunk("FINISH_REASON_UNSPECIFIED", "")), "INCOMPLETE_STREAM", ""},
		{"empty stream", "", "INCOMPLETE_STREAM", ""},
		{"stream error", data(textChunk("a")) + data(`{"error":{"code":500,"message":"conformance-secret-marker","status":"INTERNAL"}}`), "PROVIDER_FAILED", ""},
		{"stream overloaded", data(`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`), "PROVIDER_ERROR", ""},
		{"stream quota", data(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`), "RATE_LIMITED", ""},
		{"not json", data(`{"candidates":`), "INVALID_PROVIDER_RESPONSE", ""},
		{"args not object", data(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1]}}]},"finishReason":"STOP"}]}`), "INVALID_PROVIDER_RESPONSE", ""},
		{"call without name", data(`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]},"finishReason":"STOP"}]}`), "INVALID_PROVIDER_RESPONSE", ""},
		{"no candidates then finish", data(`{"candidates":[]}`) + data(finalChunk("STOP", "")), "", "stop"},
		{"usage after finish", data(finalChunk("STOP", "")) + data(`{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`), "", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runStream(t, 1, tc.body)
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

func TestStreamThoughtsAreProgress(t *testing.T) {
	body := data(`{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking about it","thought":true}]},"index":0}]}`) +
		data(textChunk("42")) + data(finalChunk("STOP", ""))
	out, rec, err := runStream(t, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "42" || rec.progress != 1 {
		t.Errorf("text %q progress %d", out.Text, rec.progress)
	}
}

func TestStreamCancelled(t *testing.T) {
	rec := &recorder{cancelAfterDeltas: 1}
	s := &turnStream{out: rec}
	err := s.run(newSource(data(textChunk("a")) + data(textChunk("b"))))
	if !errors.Is(err, sdk.ErrCancelled) || rec.textDeltas != 1 {
		t.Fatalf("err = %v after %d deltas", err, rec.textDeltas)
	}
}

func FuzzStream(f *testing.F) {
	f.Add(data(textChunk("Hi")) + data(finalChunk("STOP", `{"promptTokenCount":1,"candidatesTokenCount":1}`)))
	f.Add(data(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"x"}]},"finishReason":"STOP"}]}`))
	f.Add(data(`{"error":{"code":503,"status":"UNAVAILABLE"}}`))
	f.Add(data(`{"promptFeedback":{"blockReason":"OTHER"}}`))
	f.Add(data(`{"usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":9223372036854775807}}`) + data(finalChunk("STOP", "")))
	f.Fuzz(func(t *testing.T, body string) {
		rec := &recorder{}
		s := &turnStream{out: rec, step: 1}
		if err := s.run(newSource(body)); err != nil {
			return
		}
		out, err := s.result()
		if err != nil {
			return
		}
		if out.Text != rec.text.String() {
			t.Fatalf("text %q != streamed %q", out.Text, rec.text.String())
		}
		ids := map[string]bool{}
		for _, c := range out.ToolCalls {
			if !json.Valid(c.Arguments) || c.ID == "" || c.Name == "" || ids[c.ID] {
				t.Fatalf("bad call %+v", c)
			}
			ids[c.ID] = true
		}
		if u := out.Usage; u != nil {
			for _, p := range []*int64{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens} {
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
// streamed GenerateContentResponse chunk with a text part, scanned and
// emitted.
func BenchmarkEvent(b *testing.B) {
	s := &turnStream{out: nopEmitter{}, step: 1}
	chunk := []byte(`{"candidates": [{"content": {"parts": [{"text": "The quick brown fox jumps over the lazy dog, \"quoted\" and caf\u00e9."}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash","responseId": "mdJoaN6kLqGBz7IPvLjD0Qo"}`)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.handle(chunk); err != nil {
			b.Fatal(err)
		}
		s.text.Reset()
	}
}
