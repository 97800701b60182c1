package runtime

import (
	"bytes"
	"context"
	"log/slog"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// queuedSink is an AsyncUsageSink over fn.
type queuedSink struct {
	fn     func(context.Context, *UsageRecord) error
	queues bool
}

func (s *queuedSink) RecordUsage(ctx context.Context, rec *UsageRecord) error { return s.fn(ctx, rec) }
func (s *queuedSink) QueuesUsage() bool                                       { return s.queues }

// A sink that only queues is called on the run's goroutine, after the
// run ended; any other sink (or one that says it does not queue) on a
// goroutine of its own, so that the 2 s bound holds whatever it does.
func TestUsageSinkGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		async  bool
		queues bool
		onRun  bool
	}{
		{name: "UsageSink", onRun: false},
		{name: "AsyncUsageSink", async: true, queues: true, onRun: true},
		{name: "AsyncUsageSink not queueing", async: true, queues: false, onRun: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				stacks []string
			)
			fn := func(_ context.Context, rec *UsageRecord) error {
				buf := make([]byte, 64<<10)
				mu.Lock()
				stacks = append(stacks, string(buf[:goruntime.Stack(buf, false)]))
				mu.Unlock()
				return nil
			}
			var sink UsageSink = usageFunc(fn)
			if tc.async {
				sink = &queuedSink{fn: fn, queues: tc.queues}
			}
			env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.UsageSink = sink })
			if _, err := env.start(t, req("conformance:text"), ModeJSON).Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := env.e.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(stacks) != 1 {
				t.Fatalf("sink called %d times, want once", len(stacks))
			}
			// The run goroutine ends the run in (*Run).end, which delivers
			// the record.
			if got := strings.Contains(stacks[0], "runtime.(*Run).end("); got != tc.onRun {
				t.Errorf("called on the run's goroutine: %v, want %v\n%s", got, tc.onRun, stacks[0])
			}
		})
	}
}

// A sink that blocks — a plain one, or a queueing one that is behind (its
// queue full) — holds delivery for at most 2 s, never the run's outcome,
// and the failure is logged.
func TestUsageSinkBound(t *testing.T) {
	wait := func(ctx context.Context, _ *UsageRecord) error {
		<-ctx.Done()
		return ctx.Err()
	}
	for _, tc := range []struct {
		name string
		sink UsageSink
	}{
		{"plain", usageFunc(wait)},
		{"queueing", &queuedSink{queues: true, fn: wait}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) {
					o.UsageSink = tc.sink
					o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				})
				start := time.Now()
				res, err := env.start(t, req("conformance:text"), ModeJSON).Wait(t.Context())
				if err != nil || res.Text != "Hello fixture" {
					t.Fatalf("%+v %v", res, err)
				}
				if time.Since(start) != 0 {
					t.Fatal("the outcome waited for the usage sink")
				}
				if err := env.e.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != usageSinkTimeout {
					t.Fatalf("usage delivery bounded at %v, want 2s", got)
				}
				if !strings.Contains(logs.String(), "usage record not delivered") {
					t.Errorf("no warning logged:\n%s", logs.String())
				}
			})
		})
	}
}

// A panicking sink is a logged delivery failure, not the host's end.
func TestAsyncUsageSinkPanic(t *testing.T) {
	var logs bytes.Buffer
	sink := &queuedSink{queues: true, fn: func(context.Context, *UsageRecord) error { panic("sink") }}
	env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) {
		o.UsageSink = sink
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if _, err := env.start(t, req("conformance:text"), ModeJSON).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := env.e.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "usage record not delivered") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}

// BenchmarkRunUsage is BenchmarkRunJSON with a usage sink that keeps
// nothing: "none" has no sink, "UsageSink" is called on a goroutine per
// run (the 2 s guard for a sink that may block), "AsyncUsageSink" on the
// run's goroutine. The difference to "none" is what the engine spends per
// record (building it, and the guard).
func BenchmarkRunUsage(b *testing.B) {
	discard := func(context.Context, *UsageRecord) error { return nil }
	for _, bc := range []struct {
		name string
		sink UsageSink
	}{
		{"none", nil},
		{"UsageSink", usageFunc(discard)},
		{"AsyncUsageSink", &queuedSink{fn: discard, queues: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := newEnv(b, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.UsageSink = bc.sink })
			r := req("conformance:text")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := env.start(b, r, ModeJSON).Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
