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

// TestProgressFloodIdles: progress reports that are throttled away are not
// activity, so a provider that only reports progress, a hundred times a
// second, still meets an idle interval shorter than progressInterval.
func TestProgressFloodIdles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEnv(t, &fakeProvider{complete: func(ctx context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
			for range 1000 { // 10 s, past any idle timeout
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				sink.Progress()
				time.Sleep(10 * time.Millisecond)
			}
			return &abi.CompleteOutput{Text: "never idle"}, nil
		}})
		ms := int64(300)
		start := time.Now()
		run := env.start(t, req("x", func(r *protocol.RunRequest) { r.IdleTimeoutMs = &ms }), ModeStream)
		evs := checkStream(t, collect(t, run), "p", "m")
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("idle after %v, want 300ms", got)
		}
		if last := terminalOf(evs); last.typ() != EventRunCancelled || codeOf(last) != "IDLE_TIMEOUT" {
			t.Fatalf("terminal %v", last)
		}
		if got := strings.Join(types(evs), " "); got != "run.started step.started run.progress run.cancelled" {
			t.Errorf("events %s", got)
		}
	})
}

// TestQueuedTextBound: the queue's text bound counts the text of the
// queued deltas, not their JSON, so text up to exactly 2,000,000 bytes
// never overflows it, however late the reader comes; one byte more does.
func TestQueuedTextBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second int // bytes streamed by the second step, after 1,000,000
		want   string
	}{
		{"at the bound", 1_000_000, EventRunCompleted},
		{"one over", 1_000_001, EventRunCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, toolCaller(1, 2))
			env.prov.complete = func(_ context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
				n := 1_000_000
				if in.Step == 2 {
					n = tc.second
				}
				chunk := strings.Repeat("a", 1000)
				var b strings.Builder
				for b.Len()+len(chunk) <= n {
					sink.Text(chunk)
					b.WriteString(chunk)
				}
				if rest := n - b.Len(); rest > 0 {
					sink.Text(chunk[:rest])
					b.WriteString(chunk[:rest])
				}
				out := &abi.CompleteOutput{Text: b.String()}
				if in.Step == 1 {
					out.ToolCalls = []abi.ToolCall{{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}
				}
				return out, nil
			}
			run := env.start(t, req("x", withTools("conformance_lookup")), ModeStream)
			<-run.Done() // nobody reads until the run is over
			evs := checkStream(t, collect(t, run), "p", "m")
			last := terminalOf(evs)
			if last.typ() != tc.want || (tc.want == EventRunCancelled && codeOf(last) != "OUTPUT_BUFFER_LIMIT") {
				t.Fatalf("terminal %v", last)
			}
		})
	}
}
