package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// blocking is a cooperative provider that waits for cancellation.
func blocking() *fakeProvider {
	return &fakeProvider{complete: func(ctx context.Context, _ *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
}

func TestAdmission(t *testing.T) {
	env := newEnv(t, blocking())
	var runs []*Run
	principal := func(i int) *Principal {
		return &Principal{Subject: fmt.Sprintf("s%d", i), Providers: map[string]bool{"p": true}}
	}
	for i := range 32 {
		run, err := env.e.Start(context.Background(), principal(i/4), req("x"), ModeJSON)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		runs = append(runs, run)
	}
	if _, err := env.e.Start(context.Background(), principal(100), req("x"), ModeJSON); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("33rd run: %v, want BUSY", err)
	}
	if env.e.Running() != 32 {
		t.Fatalf("running %d", env.e.Running())
	}
	// A cancelled run frees its slot as soon as it has ended.
	runs[0].Cancel(nil)
	if _, err := runs[0].Wait(t.Context()); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("cancelled run: %v", err)
	}
	run, err := env.e.Start(context.Background(), principal(100), req("x"), ModeJSON)
	if err != nil {
		t.Fatalf("after cancel: %v", err)
	}
	runs = append(runs, run)
	// Subject s1 holds 4 slots; s0 now holds 3.
	for _, tc := range []struct {
		subject int
		want    protocol.Code
	}{{1, protocol.CodeBusy}} {
		if _, err := env.e.Start(context.Background(), principal(tc.subject), req("x"), ModeJSON); protocol.CodeOf(err) != tc.want {
			t.Fatalf("subject %d: %v", tc.subject, err)
		}
	}
	for _, r := range runs {
		r.Cancel(nil)
		_, _ = r.Wait(t.Context())
	}
	if env.e.Running() != 0 {
		t.Fatalf("running %d after all ended", env.e.Running())
	}
}

func TestAdmissionPerSubject(t *testing.T) {
	env := newEnv(t, blocking(), func(o *Options, _ *ProviderInstance) { o.MaxPerSubject = 2; o.MaxConcurrent = 100 })
	if env.e.maxRunning != 100 {
		t.Fatalf("MaxConcurrent 100 not honoured: %d", env.e.maxRunning)
	}
	var runs []*Run
	for range 2 {
		runs = append(runs, env.start(t, req("x"), ModeStream))
	}
	if _, err := env.e.Start(context.Background(), env.p, req("x"), ModeStream); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("3rd run of subject: %v", err)
	}
	other := &Principal{Subject: "bob", Providers: map[string]bool{"p": true}}
	runs = append(runs, must(env.e.Start(context.Background(), other, req("x"), ModeStream)))
	for _, r := range runs {
		r.Cancel(nil)
		evs := checkStream(t, collect(t, r), "p", "m")
		if last := terminalOf(evs); last.typ() != EventRunCancelled || codeOf(last) != "CANCELLED" {
			t.Fatalf("terminal %v", last)
		}
	}
}

func TestCancelNonCooperativeProvider(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	env := newEnv(t, &fakeProvider{complete: func(_ context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
		sink.Text("early")
		close(entered)
		<-release // ignores ctx
		sink.Text("late")
		sink.Progress()
		return &abi.CompleteOutput{Text: "earlylate"}, nil
	}})
	run := env.start(t, req("x"), ModeStream)
	<-entered
	run.Cancel(fmt.Errorf("client gone"))
	<-run.Done() // the engine stopped waiting although the provider has not returned
	evs := checkStream(t, collect(t, run), "p", "m")
	close(release)
	if err := env.e.Shutdown(t.Context()); err != nil { // waits for the provider goroutine
		t.Fatal(err)
	}
	last := terminalOf(evs)
	if last.typ() != EventRunCancelled || codeOf(last) != "CANCELLED" || last.errorInfo()["retryable"] != false {
		t.Fatalf("terminal %v", last)
	}
	if strings.Contains(textOf(evs), "late") {
		t.Fatal("late callback delivered")
	}
	if _, err := run.Next(t.Context()); err == nil {
		t.Fatal("event after EOF")
	}
}

func TestCancelWhileToolPending(t *testing.T) {
	entered := make(chan struct{})
	env := newEnv(t, toolCaller(1, 2), withTool("slow", `{"type":"object"}`, false,
		func(ctx context.Context, _ json.RawMessage, _ func()) (json.RawMessage, error) {
			close(entered)
			<-ctx.Done()
			return nil, ctx.Err()
		}))
	env.prov.complete = func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
		return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "slow", Arguments: json.RawMessage(`{}`)}}}, nil
	}
	run := env.start(t, req("x", withTools("slow")), ModeJSON)
	<-entered
	run.Cancel(nil)
	_, err := run.Wait(t.Context())
	pe, ok := err.(*protocol.Error)
	if !ok || pe.Code != protocol.CodeCancelled || !pe.Uncertain || pe.Retryable {
		t.Fatalf("err %#v", err)
	}
	if info := pe.Info(); info.Outcome != "uncertain" {
		t.Fatalf("info %+v", info)
	}
}

func TestCancelWithProtocolCause(t *testing.T) {
	env := newEnv(t, blocking())
	run := env.start(t, req("x"), ModeStream)
	run.Cancel(protocol.New("SESSION_DELETED"))
	evs := checkStream(t, collect(t, run), "p", "m")
	if last := terminalOf(evs); last.typ() != EventRunCancelled || codeOf(last) != "SESSION_DELETED" {
		t.Fatalf("terminal %v", last)
	}
}

func TestShutdown(t *testing.T) {
	env := newEnv(t, blocking())
	sr := env.start(t, req("x"), ModeStream)
	jr := env.start(t, req("x"), ModeJSON)
	if err := env.e.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs := checkStream(t, collect(t, sr), "p", "m")
	if last := terminalOf(evs); last.typ() != EventRunCancelled || codeOf(last) != "CANCELLED" {
		t.Fatalf("stream terminal %v", last)
	}
	if _, err := jr.Wait(t.Context()); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("JSON run: %v", err)
	}
	if _, err := env.e.Start(context.Background(), env.p, req("x"), ModeJSON); protocol.CodeOf(err) != protocol.CodeHostShuttingDown {
		t.Fatalf("Start after shutdown: %v", err)
	}
	// Validation still comes first.
	if _, err := env.e.Start(context.Background(), env.p, req("x", func(r *protocol.RunRequest) { r.Provider = "zz" }), ModeJSON); protocol.CodeOf(err) != protocol.CodeUnknownProvider {
		t.Fatalf("invalid request after shutdown: %v", err)
	}
	recs := env.sink.records()
	if len(recs) != 2 || recs[0].Status != UsageCancelled || recs[1].Status != UsageCancelled {
		t.Fatalf("usage records %+v", recs)
	}
	if recs[0].Coverage.CompletedSteps != 0 || string(must(json.Marshal(recs[0].Usage))) != "{}" {
		t.Fatalf("coverage %+v", recs[0].Coverage)
	}
}

func TestOutputBufferLimit(t *testing.T) {
	t.Run("events", func(t *testing.T) {
		env := newEnv(t, toolCaller(32, 0))
		run := env.start(t, req("x", withTools("conformance_lookup"), func(r *protocol.RunRequest) { r.MaxSteps = intp(64) }), ModeStream)
		<-run.Done() // nobody reads
		raw := collect(t, run)
		evs := checkStream(t, raw, "p", "m")
		last := terminalOf(evs)
		if last.typ() != EventRunCancelled || codeOf(last) != "OUTPUT_BUFFER_LIMIT" {
			t.Fatalf("terminal %v", last)
		}
		if len(raw) != maxQueuedEvents+1 {
			t.Fatalf("%d events queued, want %d plus the terminal event", len(raw), maxQueuedEvents)
		}
	})
	t.Run("text", func(t *testing.T) {
		env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
			text := strings.Repeat("a", 1_000)
			n := 1500
			if in.Step == 2 {
				n = 600
			}
			for range n {
				sink.Text(text)
			}
			out := &abi.CompleteOutput{Text: strings.Repeat(text, n)}
			if in.Step == 1 {
				out.ToolCalls = []abi.ToolCall{{ID: "a", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}}
			}
			return out, nil
		}})
		run := env.start(t, req("x", withTools("conformance_lookup")), ModeStream)
		<-run.Done()
		raw := collect(t, run)
		evs := checkStream(t, raw, "p", "m")
		if last := terminalOf(evs); last.typ() != EventRunCancelled || codeOf(last) != "OUTPUT_BUFFER_LIMIT" {
			t.Fatalf("terminal %v", last)
		}
		for _, ev := range raw {
			if len(ev.Data) > 2_000_000 {
				t.Fatalf("event of %d bytes", len(ev.Data))
			}
		}
		if n := len(textOf(evs)); n > maxQueuedBytes {
			t.Fatalf("%d bytes of text queued", n)
		}
	})
	t.Run("bytes of any event", func(t *testing.T) {
		env := newEnv(t, toolCaller(3, 2), withTool("big", `{"type":"object"}`, false,
			func(context.Context, json.RawMessage, func()) (json.RawMessage, error) {
				return bigOutput(900_000), nil
			}))
		env.prov.complete = func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
			if in.Step == 2 {
				return &abi.CompleteOutput{Text: "done"}, nil
			}
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{
				{ID: "a", Name: "big", Arguments: json.RawMessage(`{}`)},
				{ID: "b", Name: "big", Arguments: json.RawMessage(`{}`)},
				{ID: "c", Name: "big", Arguments: json.RawMessage(`{}`)},
			}}, nil
		}
		run := env.start(t, req("x", withTools("big")), ModeStream)
		<-run.Done()
		evs := checkStream(t, collect(t, run), "p", "m")
		if last := terminalOf(evs); codeOf(last) != "OUTPUT_BUFFER_LIMIT" {
			t.Fatalf("events %v terminal %v", types(evs), last)
		}
	})
	t.Run("json mode has no queue", func(t *testing.T) {
		env := newEnv(t, toolCaller(32, 40))
		res, err := env.start(t, req("x", withTools("conformance_lookup"), func(r *protocol.RunRequest) { r.MaxSteps = intp(64) }), ModeJSON).Wait(t.Context())
		if err != nil || res.Steps != 40 {
			t.Fatalf("%+v %v", res, err)
		}
	})
	t.Run("the bound is on queued events, not total", func(t *testing.T) {
		// Each tool call waits until the reader has seen its tool.called,
		// so at most a few events are ever queued while 40 steps of 32
		// calls produce well over 1,024 events in total.
		seen := make(chan struct{})
		env := newEnv(t, toolCaller(1, 2), withTool("sync", `{"type":"object"}`, false,
			func(ctx context.Context, _ json.RawMessage, _ func()) (json.RawMessage, error) {
				select {
				case <-seen:
					return json.RawMessage(`{}`), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}))
		env.prov.complete = func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
			if in.Step == 40 {
				return &abi.CompleteOutput{Text: "done"}, nil
			}
			calls := make([]abi.ToolCall, 32)
			for i := range calls {
				calls[i] = abi.ToolCall{ID: fmt.Sprintf("s%d-%d", in.Step, i), Name: "sync", Arguments: json.RawMessage(`{}`)}
			}
			return &abi.CompleteOutput{ToolCalls: calls}, nil
		}
		run := env.start(t, req("x", withTools("sync"), func(r *protocol.RunRequest) { r.MaxSteps = intp(64) }), ModeStream)
		var raw []Event
		for {
			ev, err := run.Next(t.Context())
			if err != nil {
				break
			}
			raw = append(raw, ev)
			if ev.Type == EventToolCalled {
				seen <- struct{}{}
			}
		}
		evs := checkStream(t, raw, "p", "m")
		if terminalOf(evs).typ() != EventRunCompleted || len(evs) < 2*maxQueuedEvents {
			t.Fatalf("%d events, terminal %v", len(evs), terminalOf(evs))
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	idleReq := func(ms int64) func(*protocol.RunRequest) {
		return func(r *protocol.RunRequest) { r.IdleTimeoutMs = &ms }
	}
	t.Run("progress re-arms", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, &fakeProvider{complete: func(_ context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
				for range 5 {
					time.Sleep(600 * time.Millisecond)
					sink.Text("x")
				}
				time.Sleep(600 * time.Millisecond)
				sink.Progress()
				time.Sleep(900 * time.Millisecond)
				return &abi.CompleteOutput{Text: "xxxxx"}, nil
			}})
			res, err := env.start(t, req("x", idleReq(1000)), ModeJSON).Wait(t.Context())
			if err != nil || res.Text != "xxxxx" {
				t.Fatalf("%+v %v", res, err)
			}
		})
	})
	t.Run("expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, &fakeProvider{complete: func(ctx context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
				time.Sleep(600 * time.Millisecond)
				sink.Text("x")
				for range 10 {
					time.Sleep(100 * time.Millisecond)
					sink.Text("") // empty deltas are not progress
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}})
			start := time.Now()
			run := env.start(t, req("x", idleReq(1000)), ModeStream)
			evs := checkStream(t, collect(t, run), "p", "m")
			if got := time.Since(start); got != 1600*time.Millisecond {
				t.Fatalf("timed out after %v, want 1.6s", got)
			}
			last := terminalOf(evs)
			e := last.errorInfo()
			if last.typ() != EventRunCancelled || e["code"] != "IDLE_TIMEOUT" || e["retryable"] != true || e["outcome"] != nil {
				t.Fatalf("terminal %v", last)
			}
			_, err := env.start(t, req("x", idleReq(1000)), ModeJSON).Wait(t.Context())
			if protocol.CodeOf(err) != protocol.CodeIdleTimeout || protocol.HTTPStatus(protocol.CodeOf(err)) != 504 {
				t.Fatalf("JSON: %v", err)
			}
		})
	})
	t.Run("host policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, blocking(), func(o *Options, _ *ProviderInstance) { o.Limits.IdleTimeout = 2 * time.Second })
			start := time.Now()
			_, err := env.start(t, req("x", idleReq(0)), ModeJSON).Wait(t.Context())
			if protocol.CodeOf(err) != protocol.CodeIdleTimeout || time.Since(start) != 2*time.Second {
				t.Fatalf("%v after %v", err, time.Since(start))
			}
		})
	})
	t.Run("no timeout by default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, &fakeProvider{complete: func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
				time.Sleep(10 * time.Hour)
				return &abi.CompleteOutput{Text: "late"}, nil
			}})
			res, err := env.start(t, req("x"), ModeJSON).Wait(t.Context())
			if err != nil || res.Text != "late" {
				t.Fatalf("%+v %v", res, err)
			}
		})
	})
	t.Run("tool pending", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			env := newEnv(t, toolCaller(1, 2), withTool("slow", `{"type":"object"}`, false,
				func(ctx context.Context, _ json.RawMessage, progress func()) (json.RawMessage, error) {
					time.Sleep(800 * time.Millisecond)
					progress()
					<-ctx.Done()
					return nil, ctx.Err()
				}))
			env.prov.complete = func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
				return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "slow", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			start := time.Now()
			evs := env.stream(t, req("x", withTools("slow"), idleReq(1000)))
			if time.Since(start) != 1800*time.Millisecond {
				t.Fatalf("timed out after %v", time.Since(start))
			}
			last := terminalOf(evs)
			e := last.errorInfo()
			if last.typ() != EventRunCancelled || e["code"] != "IDLE_TIMEOUT" || e["retryable"] != false || e["outcome"] != "uncertain" {
				t.Fatalf("terminal %v", last)
			}
			want := []string{"run.started", "step.started", "tool.called", "run.progress", "run.cancelled"}
			if got := types(evs); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("types %v", got)
			}
		})
	})
}

func TestProgressThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
			if in.Step == 2 {
				sink.Progress() // a new operation is not throttled by the last one
				return &abi.CompleteOutput{Text: "ok"}, nil
			}
			for i := range 11 { // at 0, 0.1, …, 1.0 s
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				sink.Progress()
			}
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "prog", Arguments: json.RawMessage(`{}`)}}}, nil
		}}, withTool("prog", `{"type":"object"}`, false, func(_ context.Context, _ json.RawMessage, progress func()) (json.RawMessage, error) {
			for range 5 {
				progress()
				time.Sleep(300 * time.Millisecond) // at 0, 0.3, 0.6, 0.9, 1.2 s
			}
			return json.RawMessage(`{}`), nil
		}))
		evs := env.stream(t, req("x", withTools("prog")))
		var phases []string
		for _, ev := range evs {
			if ev.typ() == EventRunProgress {
				phases = append(phases, ev["phase"].(string))
			}
		}
		if got := strings.Join(phases, " "); got != "model model tool tool model" {
			t.Fatalf("progress events %q", got)
		}
	})
}

type usageFunc func(context.Context, *UsageRecord) error

func (f usageFunc) RecordUsage(ctx context.Context, rec *UsageRecord) error { return f(ctx, rec) }

// memLog is an EventLog that records events and fails on one sequence.
type memLog struct {
	mu     sync.Mutex
	events []Event
	failAt int64
}

func (l *memLog) Append(_ context.Context, ev Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Sequence == l.failAt && !ev.Terminal() {
		pe := protocol.New("OPERATION_STORE_ERROR")
		pe.Uncertain = true
		return pe
	}
	l.events = append(l.events, ev)
	return nil
}

type memStore struct {
	log *memLog
	err error
}

func (s *memStore) OpenRun(context.Context, RunInfo) (EventLog, error) { return s.log, s.err }

func TestEventLogSeam(t *testing.T) {
	t.Run("every event before delivery", func(t *testing.T) {
		store := &memStore{log: &memLog{}}
		env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.RunStore = store })
		run := env.start(t, req("conformance:tools", withTools("conformance_lookup")), ModeStream)
		raw := collect(t, run)
		checkStream(t, raw, "p", "m")
		if len(store.log.events) != len(raw) {
			t.Fatalf("logged %d events, delivered %d", len(store.log.events), len(raw))
		}
		for i := range raw {
			if string(store.log.events[i].Data) != string(raw[i].Data) {
				t.Fatalf("event %d differs", i+1)
			}
		}
	})
	t.Run("append failure fails the run", func(t *testing.T) {
		store := &memStore{log: &memLog{failAt: 3}}
		env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.RunStore = store })
		run := env.start(t, req("conformance:tools", withTools("conformance_lookup")), ModeStream)
		evs := checkStream(t, collect(t, run), "p", "m")
		last := terminalOf(evs)
		if last.typ() != EventRunFailed || codeOf(last) != "OPERATION_STORE_ERROR" || last.errorInfo()["outcome"] != "uncertain" || len(evs) != 3 {
			t.Fatalf("events %v, terminal %v", types(evs), last)
		}
		if n := env.tools.count("conformance_lookup"); n != 0 {
			t.Fatalf("tool ran %d times although tool.called was not committed", n)
		}
	})
	t.Run("run.started refused is an HTTP error", func(t *testing.T) {
		store := &memStore{log: &memLog{failAt: 1}}
		env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.RunStore = store })
		if _, err := env.e.Start(context.Background(), env.p, req("conformance:text"), ModeStream); protocol.CodeOf(err) != "OPERATION_STORE_ERROR" {
			t.Fatalf("err %v", err)
		}
		if env.e.Running() != 0 || env.prov.calls.Load() != 0 {
			t.Fatal("slot leaked or provider called")
		}
	})
	t.Run("open failure refuses the run", func(t *testing.T) {
		store := &memStore{err: protocol.New("OPERATION_STORE_FULL")}
		env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.RunStore = store })
		if _, err := env.e.Start(context.Background(), env.p, req("conformance:text"), ModeStream); protocol.CodeOf(err) != "OPERATION_STORE_FULL" {
			t.Fatalf("err %v", err)
		}
		if env.e.Running() != 0 {
			t.Fatal("slot leaked")
		}
	})
}

func TestFeaturesAndProviders(t *testing.T) {
	env := newEnv(t, conformanceProvider(true))
	want := "json-results event-stream cancel-on-disconnect optional-idle-timeout required-capabilities optional-events provider-discovery"
	if got := strings.Join(env.e.Features(), " "); got != want {
		t.Fatalf("features %q", got)
	}
	env.e.Features()[0] = "mutated"
	if env.e.Features()[0] != "json-results" {
		t.Fatal("Features exposes internal state")
	}
	if ps := env.e.Providers(); len(ps) != 1 || ps[0].ID != "p" {
		t.Fatalf("providers %v", ps)
	}
}

func TestNewRejects(t *testing.T) {
	prov := conformanceProvider(true)
	set := &fakeTools{}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"provider without id", Options{Providers: []*ProviderInstance{{Provider: prov}}}},
		{"provider without Provider", Options{Providers: []*ProviderInstance{{ID: "a"}}}},
		{"duplicate provider", Options{Providers: []*ProviderInstance{{ID: "a", Provider: prov}, {ID: "a", Provider: prov}}}},
		{"duplicate tool", Options{Tools: []*Tool{{Def: abi.ToolDef{Name: "t"}, Set: set}, {Def: abi.ToolDef{Name: "t"}, Set: set}}}},
		{"tool schema", Options{Tools: []*Tool{{Def: abi.ToolDef{Name: "t", InputSchema: json.RawMessage(`{"type":1}`)}, Set: set}}}},
		{"tool without set", Options{Tools: []*Tool{{Def: abi.ToolDef{Name: "t"}}}}},
		{"negative limit", Options{Limits: Limits{MaxSteps: -1}}},
	} {
		if _, err := New(tc.opts); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
}

func TestStartInvalidMode(t *testing.T) {
	env := newEnv(t, conformanceProvider(true))
	if _, err := env.e.Start(context.Background(), env.p, req("x"), Mode(0)); err == nil {
		t.Fatal("mode 0 accepted")
	}
	run := env.start(t, req("conformance:text"), ModeJSON)
	if _, err := run.Next(t.Context()); err == nil {
		t.Fatal("Next on a JSON run")
	}
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledBeforeBegin: a run admitted just as the host shuts down
// (base context already cancelled) still starts and ends with run.cancelled.
func TestCancelledBeforeBegin(t *testing.T) {
	env := newEnv(t, conformanceProvider(true))
	env.e.cancelBase(shutdownCause) // shutdown racing with Start, before the flag is seen
	run := env.start(t, req("conformance:text"), ModeStream)
	evs := checkStream(t, collect(t, run), "p", "m")
	if got := strings.Join(types(evs), " "); got != "run.started run.cancelled" || codeOf(terminalOf(evs)) != "CANCELLED" {
		t.Fatalf("events %s", got)
	}
	if env.prov.calls.Load() != 0 {
		t.Fatal("provider called")
	}
}
