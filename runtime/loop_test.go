package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// toolCaller is a provider that asks for n lookup calls per step until
// step stop (0: never stops), then answers "done".
func toolCaller(n, stop int) *fakeProvider {
	return &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		if stop > 0 && in.Step >= stop {
			return &abi.CompleteOutput{Text: "done"}, nil
		}
		calls := make([]abi.ToolCall, n)
		for i := range calls {
			calls[i] = abi.ToolCall{ID: fmt.Sprintf("s%d-c%d", in.Step, i), Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}
		}
		return &abi.CompleteOutput{ToolCalls: calls}, nil
	}}
}

func TestStepLimit(t *testing.T) {
	t.Run("tools at maxSteps", func(t *testing.T) {
		env := newEnv(t, toolCaller(1, 0))
		evs := env.stream(t, req("x", withTools("conformance_lookup"), func(r *protocol.RunRequest) { r.MaxSteps = intp(3) }))
		if last := terminalOf(evs); codeOf(last) != "STEP_LIMIT" || last.typ() != EventRunFailed {
			t.Fatalf("terminal %v", last)
		}
		if n := env.tools.count("conformance_lookup"); n != 2 {
			t.Fatalf("tools ran %d times, want 2 (step 3's calls are not executed)", n)
		}
	})
	t.Run("answer at maxSteps", func(t *testing.T) {
		env := newEnv(t, toolCaller(1, 3))
		evs := env.stream(t, req("x", withTools("conformance_lookup"), func(r *protocol.RunRequest) { r.MaxSteps = intp(3) }))
		if res := terminalOf(evs).result(); res == nil || res["steps"] != json.Number("3") {
			t.Fatalf("terminal %v", terminalOf(evs))
		}
	})
	t.Run("default 8", func(t *testing.T) {
		env := newEnv(t, toolCaller(1, 0))
		res := must(env.start(t, req("x", withTools("conformance_lookup")), ModeJSON), nil)
		if _, err := res.Wait(t.Context()); protocol.CodeOf(err) != protocol.CodeStepLimit {
			t.Fatalf("err %v", err)
		}
		if n := env.prov.calls.Load(); n != 8 {
			t.Fatalf("%d steps, want 8", n)
		}
	})
	t.Run("host limit lowers", func(t *testing.T) {
		env := newEnv(t, toolCaller(1, 0), func(o *Options, _ *ProviderInstance) { o.Limits.MaxSteps = 2 })
		_, err := env.start(t, req("x", withTools("conformance_lookup"), func(r *protocol.RunRequest) { r.MaxSteps = intp(10) }), ModeJSON).Wait(t.Context())
		if protocol.CodeOf(err) != protocol.CodeStepLimit || env.prov.calls.Load() != 2 {
			t.Fatalf("err %v after %d steps", err, env.prov.calls.Load())
		}
	})
}

func TestToolLimit(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want protocol.Code
	}{{32, ""}, {33, protocol.CodeToolLimit}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			env := newEnv(t, toolCaller(tc.n, 2))
			_, err := env.start(t, req("x", withTools("conformance_lookup")), ModeJSON).Wait(t.Context())
			if protocol.CodeOf(err) != tc.want {
				t.Fatalf("err %v, want %s", err, tc.want)
			}
			want := tc.n
			if tc.want != "" {
				want = 0
			}
			if got := env.tools.count("conformance_lookup"); got != want {
				t.Fatalf("tool ran %d times, want %d", got, want)
			}
		})
	}
}

// bigOutput returns a JSON string value of exactly n bytes.
func bigOutput(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`)
}

func TestToolOutputLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  json.RawMessage
		err  error
		want protocol.Code
	}{
		{"exactly 1,000,000 bytes", bigOutput(1_000_000), nil, ""},
		{"1,000,001 bytes", bigOutput(1_000_001), nil, protocol.CodeToolOutcomeUncertain},
		{"whitespace does not count", json.RawMessage(` ` + string(bigOutput(1_000_000)) + "\n"), nil, ""},
		{"not JSON", json.RawMessage(`{nope`), nil, protocol.CodeToolOutcomeUncertain},
		{"empty", nil, nil, protocol.CodeToolOutcomeUncertain},
		{"null is JSON", json.RawMessage(`null`), nil, ""},
		{"tool error", nil, errors.New("tool exploded: secret"), protocol.CodeToolOutcomeUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, toolCaller(1, 2), withTool("big", `{"type":"object"}`, false,
				func(context.Context, json.RawMessage, func()) (json.RawMessage, error) { return tc.out, tc.err }))
			env.prov.complete = func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
				if in.Step == 2 {
					return &abi.CompleteOutput{Text: "done"}, nil
				}
				return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "big", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			evs := env.stream(t, req("x", withTools("big")))
			last := terminalOf(evs)
			if codeOf(last) != string(tc.want) {
				t.Fatalf("terminal code %q, want %q", codeOf(last), tc.want)
			}
			if tc.want != "" {
				e := last.errorInfo()
				if last.typ() != EventRunFailed || e["outcome"] != "uncertain" || e["retryable"] != false {
					t.Fatalf("terminal %v", last)
				}
				for _, ev := range evs {
					if ev.typ() == EventToolCompleted {
						t.Fatal("tool.completed for a failed call")
					}
				}
			}
		})
	}
}

func TestBatchValidation(t *testing.T) {
	valid := abi.ToolCall{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}
	for _, tc := range []struct {
		name  string
		batch []abi.ToolCall
		want  protocol.Code
	}{
		{"tool not selected", []abi.ToolCall{valid, {ID: "b", Name: "other", Arguments: json.RawMessage(`{}`)}}, protocol.CodeToolNotAllowed},
		{"empty id", []abi.ToolCall{valid, {ID: "", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}, protocol.CodeInvalidToolCall},
		{"repeated id in batch", []abi.ToolCall{valid, valid}, protocol.CodeInvalidToolCall},
		{"id too long", []abi.ToolCall{valid, {ID: strings.Repeat("x", 257), Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}, protocol.CodeInvalidToolCall},
		{"schema mismatch", []abi.ToolCall{valid, {ID: "b", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":"x"}`)}}, protocol.CodeInvalidToolArguments},
		{"malformed arguments", []abi.ToolCall{valid, {ID: "b", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":`)}}, protocol.CodeInvalidToolArguments},
		{"arguments not an object", []abi.ToolCall{valid, {ID: "b", Name: "conformance_lookup", Arguments: json.RawMessage(`[1]`)}}, protocol.CodeInvalidToolArguments},
		{"name checked before id", []abi.ToolCall{{ID: "", Name: "other"}}, protocol.CodeToolNotAllowed},
		{"id checked before arguments", []abi.ToolCall{{ID: "", Name: "conformance_lookup", Arguments: json.RawMessage(`1`)}}, protocol.CodeInvalidToolCall},
		{"id 256 chars ok", []abi.ToolCall{{ID: strings.Repeat("é", 256), Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
				if in.Step > 1 {
					return &abi.CompleteOutput{Text: "ok"}, nil
				}
				return &abi.CompleteOutput{ToolCalls: tc.batch}, nil
			}})
			evs := env.stream(t, req("x", withTools("conformance_lookup")))
			if got := codeOf(terminalOf(evs)); got != string(tc.want) {
				t.Fatalf("code %q, want %q", got, tc.want)
			}
			if tc.want == "" {
				return
			}
			if n := env.tools.count("conformance_lookup"); n != 0 {
				t.Fatalf("tool ran %d times; a bad batch must have zero effects", n)
			}
			for _, ev := range evs {
				if ev.typ() == EventToolCalled {
					t.Fatal("tool.called emitted for a rejected batch")
				}
			}
		})
	}
	t.Run("id reused in a later step", func(t *testing.T) {
		env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{valid}}, nil
		}})
		evs := env.stream(t, req("x", withTools("conformance_lookup")))
		if got := codeOf(terminalOf(evs)); got != "INVALID_TOOL_CALL" {
			t.Fatalf("code %q", got)
		}
		if n := env.tools.count("conformance_lookup"); n != 1 {
			t.Fatalf("tool ran %d times, want 1", n)
		}
	})
}

func TestToolMessages(t *testing.T) {
	var seen []abi.Message
	env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		if in.Step == 2 {
			seen = in.Messages
			return &abi.CompleteOutput{Text: "ok"}, nil
		}
		return &abi.CompleteOutput{Text: "calling", ToolCalls: []abi.ToolCall{
			{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value": 1}`)},
			{ID: "b", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value": 2}`)},
		}}, nil
	}})
	r := req("hi", withTools("conformance_lookup"), func(r *protocol.RunRequest) {
		r.History = []protocol.HistoryItem{{Role: "user", Content: "u0"}, {Role: "assistant", Content: "a0"}}
	})
	evs := env.stream(t, r)
	if got := terminalOf(evs).result()["text"]; got != "ok" {
		t.Fatalf("text %v", got)
	}
	want := []abi.Message{
		{Role: "user", Content: "u0"},
		{Role: "assistant", Content: "a0"},
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "calling", ToolCalls: []abi.ToolCall{
			{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)},
			{ID: "b", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":2}`)},
		}},
		{Role: "tool", Content: `{"receipt":1}`, ToolCallID: "a", Name: "conformance_lookup"},
		{Role: "tool", Content: `{"receipt":2}`, ToolCallID: "b", Name: "conformance_lookup"},
	}
	if g, w := string(must(json.Marshal(seen))), string(must(json.Marshal(want))); g != w {
		t.Fatalf("messages\n got %s\nwant %s", g, w)
	}
	// Intermediate step text is streamed too; result.text is the last step's.
	if got := textOf(evs); got != "callingok" {
		t.Fatalf("deltas %q", got)
	}
}

func TestApproval(t *testing.T) {
	gated := func(fn func(context.Context, json.RawMessage, func()) (json.RawMessage, error)) envOption {
		return withTool("gated", `{"type":"object"}`, true, fn)
	}
	provider := func() *fakeProvider {
		return &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
			if in.Step > 1 {
				return &abi.CompleteOutput{Text: "ok"}, nil
			}
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "gated", Arguments: json.RawMessage(`{}`)}}}, nil
		}}
	}
	for _, tc := range []struct {
		name string
		hook ApprovalHook
		want protocol.Code
	}{
		{"no hook fails closed", nil, protocol.CodeApprovalRequired},
		{"hook denies", ApprovalFunc(func(context.Context, *ApprovalRequest) (bool, error) { return false, nil }), protocol.CodeApprovalRequired},
		{"hook errors", ApprovalFunc(func(context.Context, *ApprovalRequest) (bool, error) { return true, errors.New("x") }), protocol.CodeApprovalRequired},
		{"hook approves", ApprovalFunc(func(_ context.Context, a *ApprovalRequest) (bool, error) {
			return a.Call.Name == "gated" && a.Subject == "alice" && a.Provider == "p", nil
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := 0
			env := newEnv(t, provider(), gated(func(context.Context, json.RawMessage, func()) (json.RawMessage, error) {
				ran++
				return json.RawMessage(`{}`), nil
			}), func(o *Options, _ *ProviderInstance) { o.ApprovalHook = tc.hook })
			evs := env.stream(t, req("x", withTools("gated")))
			last := terminalOf(evs)
			if codeOf(last) != string(tc.want) {
				t.Fatalf("code %q, want %q", codeOf(last), tc.want)
			}
			if tc.want != "" {
				if ran != 0 || last.errorInfo()["outcome"] != nil {
					t.Fatalf("ran %d, terminal %v", ran, last)
				}
				if evs[len(evs)-2].typ() != EventToolCalled {
					t.Fatalf("tool.called must precede the approval failure: %v", types(evs))
				}
			} else if ran != 1 {
				t.Fatalf("ran %d", ran)
			}
		})
	}
}

func TestStructuredOutput(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       protocol.Code
	}{
		{"valid", ` {"ok": true} `, ""},
		{"not JSON", `{"ok": tru`, protocol.CodeInvalidOutput},
		{"empty", ``, protocol.CodeInvalidOutput},
		{"schema mismatch", `{"ok": false}`, protocol.CodeInvalidOutput},
		{"extra property", `{"ok": true, "x": 1}`, protocol.CodeInvalidOutput},
		{"result too large for one event", `{"ok": true, "pad": "` + strings.Repeat("x", 1_000_000) + `"}`, protocol.CodeResponseTooLarge},
		{"largest result that fits", `{"ok": true, "pad": "` + strings.Repeat("x", 999_000) + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var instructions string
			env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
				instructions = in.Instructions
				sink.Text(tc.text)
				return &abi.CompleteOutput{Text: tc.text}, nil
			}})
			r := req("x", func(r *protocol.RunRequest) {
				r.OutputSchema = json.RawMessage(okSchema)
				if strings.Contains(tc.text, "pad") {
					r.OutputSchema = json.RawMessage(`{"type":"object","required":["ok"]}`)
				}
				r.Instructions = strp("Be brief.")
			})
			evs := env.stream(t, r)
			last := terminalOf(evs)
			if codeOf(last) != string(tc.want) {
				t.Fatalf("SSE code %q, want %q", codeOf(last), tc.want)
			}
			if !strings.HasPrefix(instructions, "Be brief.\n\n") || !strings.Contains(instructions, string(r.OutputSchema)) {
				t.Fatalf("instructions %q", instructions)
			}
			res, err := env.start(t, r, ModeJSON).Wait(t.Context())
			if protocol.CodeOf(err) != tc.want {
				t.Fatalf("JSON err %v, want %s", err, tc.want)
			}
			if tc.want != "" {
				if last.typ() != EventRunFailed || protocol.HTTPStatus(protocol.CodeOf(err)) != 502 {
					t.Fatalf("terminal %v / %v", last, err)
				}
				return
			}
			if !strings.HasPrefix(string(res.Output), `{"ok":true`) || res.Text != tc.text {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestProviderContract(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caps   map[string]bool
		turn   completeFunc
		want   protocol.Code
		deltas string
	}{
		{"streamed text differs", nil, func(_ context.Context, _ *abi.CompleteInput, s TurnSink) (*abi.CompleteOutput, error) {
			s.Text("Hello")
			return &abi.CompleteOutput{Text: "Hello fixture"}, nil
		}, protocol.CodeInvalidProviderResult, "Hello"},
		{"streamed text same length differs", nil, func(_ context.Context, _ *abi.CompleteInput, s TurnSink) (*abi.CompleteOutput, error) {
			s.Text("abc")
			return &abi.CompleteOutput{Text: "abd"}, nil
		}, protocol.CodeInvalidProviderResult, "abc"},
		{"streaming without capability", map[string]bool{"tools": true, "textStreaming": false}, func(_ context.Context, _ *abi.CompleteInput, s TurnSink) (*abi.CompleteOutput, error) {
			s.Text("Hello")
			return &abi.CompleteOutput{Text: "Hello"}, nil
		}, protocol.CodeInvalidProviderResult, ""},
		{"tool calls without capability", map[string]bool{"tools": false, "textStreaming": true}, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}}, nil
		}, protocol.CodeInvalidProviderResult, ""},
		{"result over 2,000,000 bytes", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return &abi.CompleteOutput{Text: strings.Repeat("a", 2_000_000)}, nil
		}, protocol.CodeInvalidProviderResult, ""},
		{"streamed over 2,000,000 bytes", nil, func(_ context.Context, _ *abi.CompleteInput, s TurnSink) (*abi.CompleteOutput, error) {
			s.Text(strings.Repeat("a", 1_000_000))
			s.Text(strings.Repeat("a", 1_000_001))
			return &abi.CompleteOutput{Text: strings.Repeat("a", 2_000_001)}, nil
		}, protocol.CodeInvalidProviderResult, strings.Repeat("a", 1_000_000)},
		{"bad finish reason", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return &abi.CompleteOutput{Text: "x", FinishReason: "tool_use"}, nil
		}, protocol.CodeInvalidProviderResult, ""},
		{"nil output", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return nil, nil
		}, protocol.CodeInvalidProviderResult, ""},
		{"length finish", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return &abi.CompleteOutput{Text: "trunc", FinishReason: "length"}, nil
		}, "", "trunc"},
		{"public provider error", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			return nil, protocol.New(protocol.CodeRateLimited)
		}, protocol.CodeRateLimited, ""},
		{"panic", nil, func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
			panic("boom")
		}, protocol.CodeInternalError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, &fakeProvider{complete: tc.turn}, func(_ *Options, p *ProviderInstance) {
				if tc.caps != nil {
					p.Capabilities = tc.caps
				}
			})
			evs := env.stream(t, req("x"))
			last := terminalOf(evs)
			if codeOf(last) != string(tc.want) {
				t.Fatalf("code %q, want %q", codeOf(last), tc.want)
			}
			if got := textOf(evs); got != tc.deltas {
				t.Fatalf("deltas of %d bytes, want %d", len(got), len(tc.deltas))
			}
			if tc.want == "" && last.result()["finishReason"] != "length" {
				t.Fatalf("finishReason %v", last.result()["finishReason"])
			}
		})
	}
}

func TestUsageTotalsExample(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
		if in.Step == 1 {
			sink.Usage(abi.Usage{InputTokens: i64(1)}) // superseded by the output's usage
			return &abi.CompleteOutput{
				ToolCalls: []abi.ToolCall{{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}},
				Usage:     &abi.Usage{InputTokens: i64(10), OutputTokens: i64(2)},
			}, nil
		}
		sink.Usage(abi.Usage{InputTokens: i64(20)}) // streamed usage only
		return &abi.CompleteOutput{Text: "ok"}, nil
	}})
	evs := env.stream(t, req("x", withTools("conformance_lookup")))
	var reported []string
	for _, ev := range evs {
		if ev.typ() == EventUsageReported {
			reported = append(reported, string(must(json.Marshal(ev["usage"]))))
		}
	}
	if want := []string{`{"inputTokens":10,"outputTokens":2}`, `{"inputTokens":20}`}; strings.Join(reported, " ") != strings.Join(want, " ") {
		t.Fatalf("usage.reported %v, want %v", reported, want)
	}
	if got := string(must(json.Marshal(terminalOf(evs).result()["usage"]))); got != `{"inputTokens":30}` {
		t.Fatalf("result usage %s", got)
	}
	if err := env.e.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := env.sink.records()
	if len(recs) != 1 {
		t.Fatalf("%d usage records", len(recs))
	}
	rec := recs[0]
	var m map[string]any
	if err := json.Unmarshal(must(json.Marshal(rec)), &m); err != nil {
		t.Fatal(err)
	}
	runID := evs[0]["runId"]
	for k, want := range map[string]any{
		"schema": "agenticdriver.usage.v2", "eventId": runID, "runId": runID, "hostId": "test-host", "accountId": "acct",
		"subject": "alice", "provider": "p", "vendor": "fake", "model": "m", "authMode": "none", "status": "completed",
		"source": "adapter-report",
	} {
		if m[k] != want {
			t.Errorf("record %s = %v, want %v", k, m[k], want)
		}
	}
	for k, want := range map[string]string{
		"usage":         `{"inputTokens":30}`,
		"observedUsage": `{"inputTokens":30,"outputTokens":2}`,
		"coverage":      `{"completedSteps":2,"reportedSteps":{"inputTokens":2,"outputTokens":1},"startedSteps":2}`,
	} {
		if got := string(must(json.Marshal(m[k]))); got != want {
			t.Errorf("record %s = %s, want %s", k, got, want)
		}
	}
	allowed := map[string]bool{"schema": true, "eventId": true, "runId": true, "hostId": true, "accountId": true, "subject": true,
		"provider": true, "vendor": true, "model": true, "authMode": true, "status": true, "source": true, "startedAt": true,
		"finishedAt": true, "durationMs": true, "usage": true, "observedUsage": true, "coverage": true}
	for k := range m {
		if !allowed[k] {
			t.Errorf("unexpected record field %q", k)
		}
	}
	if !timestampRE.MatchString(rec.StartedAt) || !timestampRE.MatchString(rec.FinishedAt) || rec.DurationMs < 0 || rec.FinishedAt < rec.StartedAt {
		t.Errorf("timing %s %s %d", rec.StartedAt, rec.FinishedAt, rec.DurationMs)
	}
}

func TestUsageNormalization(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	inf := 1.0
	for _, tc := range []struct {
		in   abi.Usage
		want string
	}{
		{abi.Usage{}, `{}`},
		{abi.Usage{InputTokens: i64(-1), OutputTokens: i64(0)}, `{"outputTokens":0}`},
		{abi.Usage{InputTokens: i64(1 << 53)}, `{}`},
		{abi.Usage{InputTokens: i64(1<<53 - 1)}, `{"inputTokens":9007199254740991}`},
		{abi.Usage{InputTokens: i64(5), CachedInputTokens: i64(6)}, `{"inputTokens":5}`},
		{abi.Usage{InputTokens: i64(5), CachedInputTokens: i64(5)}, `{"inputTokens":5,"cachedInputTokens":5}`},
		{abi.Usage{CachedInputTokens: i64(6)}, `{"cachedInputTokens":6}`},
		{abi.Usage{OutputTokens: i64(2), ReasoningTokens: i64(3)}, `{"outputTokens":2}`},
		{abi.Usage{CostUSD: f64(-0.5), APIEquivalentCostUSD: f64(0.25)}, `{"apiEquivalentCostUsd":0.25}`},
		{abi.Usage{CostUSD: f64(inf / 0)}, `{}`},
		{abi.Usage{CacheCreationInputTokens: i64(3)}, `{}`},
	} {
		got := normalizeUsage(&tc.in)
		if s := string(must(json.Marshal(got))); s != tc.want {
			t.Errorf("normalize(%s) = %s, want %s", must(json.Marshal(tc.in)), s, tc.want)
		}
	}
}

func TestUsageTotalsPartial(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	var a usageAccount
	a.started, a.completed = 2, 1
	a.add(&protocol.Usage{InputTokens: i64(3)})
	if got := string(must(json.Marshal(a.totals()))); got != `{}` {
		t.Fatalf("totals with an unfinished step = %s", got)
	}
	if got := string(must(json.Marshal(a.observed()))); got != `{"inputTokens":3}` {
		t.Fatalf("observed = %s", got)
	}
	var b usageAccount
	b.started, b.completed = 2, 2
	b.add(&protocol.Usage{InputTokens: i64(1<<53 - 1)})
	b.add(&protocol.Usage{InputTokens: i64(1)})
	if got := string(must(json.Marshal(b.totals()))); got != `{}` {
		t.Fatalf("overflowing totals = %s", got)
	}
}
