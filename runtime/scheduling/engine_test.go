package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/attachments"
	"adhost/runtime/protocol"
)

// capProvider is a provider on an extension capped by cap: "hold" turns
// wait until their run is cancelled, others answer at once.
type capProvider struct {
	*fakeCap
	started chan string // the input of every turn that begins
}

func (p *capProvider) NotifyFree(f func()) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

func (p *capProvider) Complete(ctx context.Context, in *abi.CompleteInput, _ runtime.TurnSink) (*abi.CompleteOutput, error) {
	input := ""
	if len(in.Messages) > 0 {
		input = in.Messages[len(in.Messages)-1].Content
	}
	p.started <- input
	if input == "hold" {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return &abi.CompleteOutput{Text: "ok", FinishReason: "stop"}, nil
}

func (p *capProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{}, nil
}

var (
	_ runtime.Capacity         = (*capProvider)(nil)
	_ runtime.CapacityNotifier = (*capProvider)(nil)
)

// TestEngineQueuesOnCapacity: through the engine, a streamed run whose
// provider extension is at its cap is accepted (run.started) and waits in
// the queue with no step; when the holding run ends it
// is admitted with the unit and completes — never BUSY after run.started.
// Without a queue the same run is BUSY at Start, before any event.
func TestEngineQueuesOnCapacity(t *testing.T) {
	prov := &capProvider{fakeCap: &fakeCap{n: 1}, started: make(chan string, 8)}
	inst := &runtime.ProviderInstance{
		ID: "p", Name: "P", Vendor: "fake", AuthMode: "none", AccountID: "acct",
		Capabilities: map[string]bool{"tools": true, "textStreaming": true},
		UsageSource:  "adapter-report", Provider: prov,
	}
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{inst}, Scheduler: New(),
		MaxConcurrent: 4, MaxPerSubject: 4, QueueTotal: 4, QueueSubject: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	p := &runtime.Principal{Subject: "a", Providers: map[string]bool{"p": true}}
	req := func(input string) *protocol.RunRequest {
		return &protocol.RunRequest{Provider: "p", Model: "m", Input: input}
	}
	first, err := e.StartWith(t.Context(), p, req("hold"), runtime.ModeStream, runtime.StartOptions{Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-prov.started; got != "hold" || prov.inUse() != 1 {
		t.Fatalf("first turn %q, units in use %d", got, prov.inUse())
	}
	if _, err := e.StartWith(t.Context(), p, req("x"), runtime.ModeStream, runtime.StartOptions{}); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("non-queuing run on the full extension: %v, want BUSY", err)
	}
	waiting, err := e.StartWith(t.Context(), p, req("next"), runtime.ModeStream, runtime.StartOptions{Queue: true})
	if err != nil {
		t.Fatalf("queuing run on the full extension: %v", err)
	}
	if ev, err := waiting.Next(t.Context()); err != nil || ev.Type != runtime.EventRunStarted {
		t.Fatalf("waiting run's first event: %v %v", ev.Type, err)
	}
	if st := e.Admission(); st.Queued != 1 || st.Running != 1 {
		t.Fatalf("admission %+v, want 1 running and 1 waiting", st)
	}
	select {
	case in := <-prov.started:
		_, ferr := first.Wait(t.Context())
		t.Fatalf("a turn %q began while the extension was full (first: %v)", in, ferr)
	case <-waiting.Done():
		var types []string
		for {
			ev, err := waiting.Next(t.Context())
			if err != nil {
				break
			}
			types = append(types, ev.Type+":"+string(ev.Data))
		}
		_, ferr := first.Wait(t.Context())
		t.Fatalf("the waiting run ended: %v (first: %v)", types, ferr)
	default:
	}
	first.Cancel(nil)
	<-first.Done()
	if got := <-prov.started; got != "next" {
		t.Fatalf("turn %q, want the waiting run's", got)
	}
	var types []string
	for {
		ev, err := waiting.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if len(types) == 0 || types[len(types)-1] != runtime.EventRunCompleted {
		t.Fatalf("the admitted run's events %v, want run.completed last", types)
	}
	<-waiting.Done()
	if prov.inUse() != 0 || e.Running() != 0 {
		t.Fatalf("after both runs: units %d, running %d", prov.inUse(), e.Running())
	}
}

// stageLog records, in order, the event types and the stages
// (runtime.StageLog) a run's log is told of.
type stageLog struct {
	mu  sync.Mutex
	got []string
}

func (l *stageLog) Append(_ context.Context, ev runtime.Event) error {
	l.mu.Lock()
	l.got = append(l.got, ev.Type)
	l.mu.Unlock()
	return nil
}

func (l *stageLog) Stage(s runtime.Stage, start, end time.Time, ok bool) {
	name := map[runtime.Stage]string{runtime.StageQueue: "queue", runtime.StageContext: "context"}[s]
	if end.Before(start) {
		name += " (ends before it starts)"
	}
	l.mu.Lock()
	l.got = append(l.got, fmt.Sprintf("%s ok=%v", name, ok))
	l.mu.Unlock()
}

func (l *stageLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, " ")
}

// TestEngineStages: the engine tells a StageLog of a run's queue and
// context stages, each once, when over, between run.started and the first
// step.started: a run admitted at once has no queue stage and a run
// without context no context stage; a run cancelled in the queue has an
// unsuccessful one. The stages reach the log through the join with the
// run's other logs.
func TestEngineStages(t *testing.T) {
	prov := &capProvider{fakeCap: &fakeCap{n: 1}, started: make(chan string, 8)}
	inst := &runtime.ProviderInstance{
		ID: "p", Name: "P", Vendor: "fake", AuthMode: "none", AccountID: "acct",
		Capabilities: map[string]bool{"textStreaming": true},
		UsageSource:  "adapter-report", Provider: prov,
	}
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{inst}, Scheduler: New(), Context: attachments.New(attachments.Options{}),
		MaxConcurrent: 4, MaxPerSubject: 4, QueueTotal: 4, QueueSubject: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	p := &runtime.Principal{Subject: "a", Providers: map[string]bool{"p": true}}
	start := func(input string, withContext bool) (*runtime.Run, *stageLog) {
		t.Helper()
		req := &protocol.RunRequest{Provider: "p", Model: "m", Input: input}
		if withContext {
			req.Attachments = json.RawMessage(`[{"type":"text","source":{"id":"note","revision":"1"},"mediaType":"text/plain","text":"hello"}]`)
		}
		l := &stageLog{}
		// Joined with another log, as telemetry's is with a job's.
		r, err := e.StartWith(t.Context(), p, req, runtime.ModeJSON, runtime.StartOptions{Queue: true, Log: runtime.JoinLogs(&stageLog{}, l)})
		if err != nil {
			t.Fatal(err)
		}
		return r, l
	}
	holder, holderLog := start("hold", false)
	if got := <-prov.started; got != "hold" {
		t.Fatalf("first turn %q", got)
	}
	left, leftLog := start("left", false)
	left.Cancel(nil)
	<-left.Done()
	waited, waitedLog := start("next", true)
	if st := e.Admission(); st.Queued != 1 {
		t.Fatalf("admission %+v, want 1 waiting", st)
	}
	holder.Cancel(nil)
	<-holder.Done()
	if _, err := waited.Wait(t.Context()); err != nil {
		t.Fatalf("the queued run: %v", err)
	}
	immediate, immediateLog := start("now", true)
	if _, err := immediate.Wait(t.Context()); err != nil {
		t.Fatalf("the run admitted at once: %v", err)
	}
	for _, c := range []struct {
		what string
		l    *stageLog
		want string
	}{
		{"admitted at once, no context", holderLog, "run.started step.started run.cancelled"},
		{"cancelled in the queue", leftLog, "run.started queue ok=false run.cancelled"},
		{"queued, with context", waitedLog, "run.started queue ok=true context ok=true step.started text.delta run.completed"},
		{"admitted at once, with context", immediateLog, "run.started context ok=true step.started text.delta run.completed"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.what, got, c.want)
		}
	}
}
