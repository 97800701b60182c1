package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

func TestNativeStatePassesThrough(t *testing.T) {
	const marker = "private-state-marker"
	var got []string
	env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		got = append(got, string(in.Native))
		if in.Step == 1 {
			return &abi.CompleteOutput{
				ToolCalls: []abi.ToolCall{{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}},
				Native:    json.RawMessage(`{"state":"` + marker + `"}`),
			}, nil
		}
		return &abi.CompleteOutput{Text: "native state received"}, nil
	}})
	run := env.start(t, req("x", withTools("conformance_lookup")), ModeStream)
	raw := collect(t, run)
	evs := checkStream(t, raw, "p", "m")
	if terminalOf(evs).result()["text"] != "native state received" {
		t.Fatalf("terminal %v", terminalOf(evs))
	}
	if len(got) != 2 || got[0] != "" || got[1] != `{"state":"`+marker+`"}` {
		t.Fatalf("native inputs %q", got)
	}
	for _, ev := range raw {
		if strings.Contains(string(ev.Data), marker) {
			t.Fatalf("marker in %s", ev.Data)
		}
	}
}

func TestRetries(t *testing.T) {
	rateLimited := func(fails int, stream bool, retryAfter time.Duration) *fakeProvider {
		n := 0
		return &fakeProvider{complete: func(_ context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
			n++
			if n <= fails {
				if stream {
					sink.Text("partial")
				}
				e := protocol.New(protocol.CodeRateLimited)
				e.RetryAfter = retryAfter
				return nil, e
			}
			return &abi.CompleteOutput{Text: "ok"}, nil
		}}
	}
	safe := func(_ *Options, p *ProviderInstance) { p.Capabilities["safeRetries"] = true }
	retry := func(attempts int, base, max *int) func(*protocol.RunRequest) {
		return func(r *protocol.RunRequest) {
			r.Retry = &protocol.Retry{MaxAttempts: attempts, BaseDelayMs: base, MaxDelayMs: max}
		}
	}
	for _, tc := range []struct {
		name       string
		fails      int
		stream     bool
		retryAfter time.Duration
		mod        func(*protocol.RunRequest)
		want       protocol.Code
		calls      int32
		waited     time.Duration
	}{
		{"no retry by default", 1, false, 0, func(*protocol.RunRequest) {}, protocol.CodeRateLimited, 1, 0},
		{"retried with doubling delays", 2, false, 0, retry(3, nil, nil), "", 3, 1500 * time.Millisecond},
		{"attempts exhausted", 5, false, 0, retry(3, intp(100), nil), protocol.CodeRateLimited, 3, 300 * time.Millisecond},
		{"next wait over maxDelay", 5, false, 0, retry(5, intp(1000), intp(2000)), protocol.CodeRateLimited, 3, 3 * time.Second},
		{"partial stream never retried", 1, true, 0, retry(3, nil, nil), protocol.CodeRateLimited, 1, 0},
		{"retry-after is a minimum", 2, false, 2 * time.Second, retry(3, intp(100), nil), "", 3, 4 * time.Second},
		{"back-off longer than retry-after", 2, false, 50 * time.Millisecond, retry(3, nil, nil), "", 3, 1500 * time.Millisecond},
		{"retry-after past maxDelay", 5, false, 10 * time.Second, retry(3, nil, intp(2000)), protocol.CodeRateLimited, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := newEnv(t, rateLimited(tc.fails, tc.stream, tc.retryAfter), safe)
				start := time.Now()
				evs := env.stream(t, req("x", tc.mod))
				if got := codeOf(terminalOf(evs)); got != string(tc.want) {
					t.Fatalf("code %q, want %q", got, tc.want)
				}
				if n := env.prov.calls.Load(); n != tc.calls {
					t.Fatalf("%d attempts, want %d", n, tc.calls)
				}
				if got := time.Since(start); got != tc.waited {
					t.Fatalf("waited %v, want %v", got, tc.waited)
				}
				if n := strings.Count(strings.Join(types(evs), " "), EventStepStarted); n != 1 {
					t.Fatalf("%d step.started for one step", n)
				}
			})
		})
	}
}
