package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"log/slog"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// fakeProvider answers by input: "block" waits until cancelled, "tool"
// calls the count tool once and then answers, anything else is echoed as
// one text delta.
type fakeProvider struct{ started chan string }

func (f *fakeProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	input := in.Messages[0].Content
	if f.started != nil {
		select {
		case f.started <- input:
		default:
		}
	}
	switch {
	case input == "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case input == "tool" && in.Step == 1:
		return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c1", Name: "count", Arguments: json.RawMessage(`{}`)}}}, nil
	case input == "big":
		sink.Text(strings.Repeat("x", 40_000))
		return &abi.CompleteOutput{Text: strings.Repeat("x", 40_000), FinishReason: "stop"}, nil
	}
	sink.Text("echo:" + input)
	return &abi.CompleteOutput{Text: "echo:" + input, FinishReason: "stop"}, nil
}

func (f *fakeProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "DISCOVERY_UNSUPPORTED"}, nil
}

// countTools counts executions: the side effect a crash must never repeat.
type countTools struct{ n atomic.Int64 }

func (c *countTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }
func (c *countTools) Invoke(ctx context.Context, call abi.ToolCall, progress func()) (json.RawMessage, error) {
	c.n.Add(1)
	return json.RawMessage(`{"ok":true}`), nil
}

type harness struct {
	t      *testing.T
	store  *durable.Memory
	engine *runtime.Engine
	prov   *fakeProvider
	tools  *countTools
	users  map[string]*runtime.Principal // by credential digest
	mu     sync.Mutex
	now    atomic.Int64 // unix ms; 0: real clock
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, store: durable.NewMemory(), prov: &fakeProvider{started: make(chan string, 16)}, tools: &countTools{}, users: map[string]*runtime.Principal{}}
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{ID: "p", AccountID: "acct", Models: []string{"m"},
			Capabilities: map[string]bool{"tools": true, "textStreaming": true}, Provider: h.prov}},
		Tools: []*runtime.Tool{{Def: abi.ToolDef{Name: "count", InputSchema: json.RawMessage(`{"type":"object"}`)}, Set: h.tools}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.engine = e
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return h
}

// user registers a credential of subject with the given job ops.
func (h *harness) user(digest, subject string, ops ...string) *runtime.Principal {
	p := &runtime.Principal{TokenID: digest, Subject: subject, CredentialDigest: digest,
		Providers: map[string]bool{"p": true}, Tools: map[string]bool{"count": true}, Ops: map[string]bool{}}
	for _, op := range ops {
		p.Ops["jobs."+op] = true
	}
	h.mu.Lock()
	h.users[digest] = p
	h.mu.Unlock()
	return p
}

func (h *harness) revoke(digest string) {
	h.mu.Lock()
	delete(h.users, digest)
	h.mu.Unlock()
}

func (h *harness) options() Options {
	return Options{
		Store: h.store, Engine: h.engine, HostID: "host-1",
		Resolve: func(d string) *runtime.Principal {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.users[d]
		},
		Account:      func(p string) string { return map[string]string{"p": "acct"}[p] },
		Retention:    time.Hour,
		Logger:       slog.New(slog.NewTextHandler(testWriter{h.t}, nil)),
		PollInterval: 10 * time.Millisecond,
		Lease:        3 * time.Second,
		Now: func() time.Time {
			if ms := h.now.Load(); ms != 0 {
				return time.UnixMilli(ms)
			}
			return time.Now()
		},
	}
}

func (h *harness) open(o Options) *Service {
	h.t.Helper()
	s, err := Open(context.Background(), o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// runToEnd submits r under key, waits until the job is terminal and
// returns its JobInfo and every event.
func runToEnd(t *testing.T, s *Service, p *runtime.Principal, key string, r *protocol.RunRequest) (Info, []map[string]any) {
	t.Helper()
	j, err := s.Submit(context.Background(), p, key, r)
	if err != nil {
		t.Fatal(err)
	}
	return wait(t, s, p, j.ID, terminal), allEvents(t, s, p, j.ID)
}

// maintainAt sets the harness clock to ms (Unix milliseconds) and runs
// s's retention pass at once, as its next maintenance tick would.
func (h *harness) maintainAt(s *Service, ms int64) {
	h.now.Store(ms)
	s.mu.Lock()
	s.nextMaint = time.Time{}
	s.mu.Unlock()
	s.maintain()
}

func req(input string, tools ...string) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: "p", Model: "m", Input: input, Tools: tools}
}

// wait polls until the job is in a state accepted by ok.
func wait(t *testing.T, s *Service, p *runtime.Principal, id string, ok func(Info) bool) Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := s.Read(context.Background(), p, id)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s stuck in %s", id, info.State)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func terminal(i Info) bool { return terminalState(i.State) }

func allEvents(t *testing.T, s *Service, p *runtime.Principal, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	after := uint64(0)
	for {
		page, err := s.Events(context.Background(), p, id, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Events {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		after = page.NextCursor
		if !page.HasMore {
			return out
		}
	}
}

func types(evs []map[string]any) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e["type"].(string))
	}
	return strings.Join(ts, ",")
}

func TestSubmitRunsToCompletion(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	s := h.open(h.options())
	s.Start()
	info, err := s.Submit(context.Background(), alice, "k1", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateQueued || info.Cursor != 0 || !info.ExpiresAt.IsZero() || info.RunID == "" {
		t.Fatalf("submitted: %+v", info)
	}
	done := wait(t, s, alice, info.ID, terminal)
	if done.State != StateCompleted || done.Cursor < 2 || !done.ExpiresAt.After(done.UpdatedAt) || done.UpdatedAt.Before(done.CreatedAt) {
		t.Fatalf("completed: %+v", done)
	}
	evs := allEvents(t, s, alice, info.ID)
	if got := types(evs); got != "run.started,step.started,text.delta,run.completed" {
		t.Fatalf("events %s", got)
	}
	for i, e := range evs {
		if e["runId"] != info.RunID || e["sequence"].(float64) != float64(i+1) {
			t.Fatalf("event %d: %v (runId %s)", i, e, info.RunID)
		}
	}
	b, _ := json.Marshal(done)
	if !strings.Contains(string(b), `"expiresAt":"`) || !strings.Contains(string(b), `"state":"completed"`) {
		t.Fatalf("JobInfo JSON %s", b)
	}

	// Same key and request: the original job. Another request: conflict.
	again, err := s.Submit(context.Background(), alice, "k1", req("hello"))
	if err != nil || again.ID != info.ID {
		t.Fatalf("resubmit: %+v %v", again, err)
	}
	if _, err := s.Submit(context.Background(), alice, "k1", req("other")); protocol.CodeOf(err) != protocol.CodeIdempotencyConflict {
		t.Fatalf("changed request: %v", err)
	}
	// Keys are per subject: bob's k1 is a new job, and alice's is not his.
	bob := h.user("b1", "bob", "submit", "read", "cancel")
	bj, err := s.Submit(context.Background(), bob, "k1", req("other"))
	if err != nil || bj.ID == info.ID {
		t.Fatalf("bob submit: %+v %v", bj, err)
	}
	for name, call := range map[string]func() error{
		"read":   func() error { _, err := s.Read(context.Background(), bob, info.ID); return err },
		"cancel": func() error { _, err := s.Cancel(context.Background(), bob, info.ID); return err },
		"events": func() error { _, err := s.Events(context.Background(), bob, info.ID, 0, 0); return err },
	} {
		if err := call(); protocol.CodeOf(err) != protocol.CodeJobNotFound {
			t.Errorf("bob %s of alice's job: %v", name, err)
		}
	}
}

func TestSubmitRules(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	reader := h.user("a2", "alice", "read")
	s := h.open(h.options())
	key := "k"
	idem := "x"
	for _, tc := range []struct {
		name string
		p    *runtime.Principal
		req  *protocol.RunRequest
		want protocol.Code
	}{
		{"no submit grant", reader, req("hi"), protocol.CodeForbidden},
		{"session", alice, &protocol.RunRequest{Provider: "p", Model: "m", Input: "hi", Session: json.RawMessage(`{}`)}, protocol.CodeJobRequestUnsupported},
		{"approvals", alice, &protocol.RunRequest{Provider: "p", Model: "m", Input: "hi", Approvals: json.RawMessage(`{}`)}, protocol.CodeJobRequestUnsupported},
		{"application tools", alice, &protocol.RunRequest{Provider: "p", Model: "m", Input: "hi", ApplicationTools: json.RawMessage(`[]`)}, protocol.CodeJobRequestUnsupported},
		{"idempotency key", alice, &protocol.RunRequest{Provider: "p", Model: "m", Input: "hi", IdempotencyKey: &idem}, protocol.CodeJobRequestUnsupported},
		{"unknown provider", alice, &protocol.RunRequest{Provider: "q", Model: "m", Input: "hi"}, protocol.CodeUnknownProvider},
		{"unsupported model", alice, &protocol.RunRequest{Provider: "p", Model: "z", Input: "hi"}, protocol.CodeUnsupportedModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Submit(context.Background(), tc.p, key, tc.req); protocol.CodeOf(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
	// Read and cancel need their grants, events need read.
	info, err := s.Submit(context.Background(), alice, "ok", req("hi"))
	if err != nil {
		t.Fatal(err)
	}
	submitter := h.user("a3", "alice", "submit")
	if _, err := s.Read(context.Background(), submitter, info.ID); protocol.CodeOf(err) != protocol.CodeForbidden {
		t.Errorf("read without grant: %v", err)
	}
	if _, err := s.Cancel(context.Background(), reader, info.ID); protocol.CodeOf(err) != protocol.CodeForbidden {
		t.Errorf("cancel without grant: %v", err)
	}
	// A token of the same subject without the provider grant.
	narrow := h.user("a4", "alice", "read")
	narrow.Providers = map[string]bool{}
	if _, err := s.Read(context.Background(), narrow, info.ID); protocol.CodeOf(err) != protocol.CodeForbidden {
		t.Errorf("read without provider grant: %v", err)
	}
	if _, err := s.Read(context.Background(), reader, info.ID); err != nil {
		t.Errorf("read by another token of the subject: %v", err)
	}
	if _, err := s.Read(context.Background(), reader, "00000000-0000-4000-8000-000000000000"); protocol.CodeOf(err) != protocol.CodeJobNotFound {
		t.Errorf("unknown id: %v", err)
	}

	// No explicit account binding.
	o := h.options()
	o.HostID = ""
	h2 := newHarness(t)
	o.Store, o.Engine = h2.store, h2.engine
	s2 := h2.open(o)
	if _, err := s2.Submit(context.Background(), alice, "k", req("hi")); protocol.CodeOf(err) != protocol.CodeJobAccountRequired {
		t.Errorf("no host id: %v", err)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	s := h.open(h.options())
	// Queued (the worker is not started): cancelled at once.
	q, err := s.Submit(context.Background(), alice, "q", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Cancel(context.Background(), alice, q.ID)
	if err != nil || c.State != StateCancelled || c.Cursor != 2 {
		t.Fatalf("cancel queued: %+v %v", c, err)
	}
	evs := allEvents(t, s, alice, q.ID)
	if types(evs) != "run.started,run.cancelled" || evs[1]["error"].(map[string]any)["code"] != "CANCELLED" || evs[0]["runId"] != q.RunID {
		t.Fatalf("cancelled queued events: %v", evs)
	}
	// Terminal: unchanged.
	if again, err := s.Cancel(context.Background(), alice, q.ID); err != nil || again != c {
		t.Fatalf("cancel terminal: %+v %v", again, err)
	}
	// Running: cancelRequested, then run.cancelled.
	s.Start()
	r, err := s.Submit(context.Background(), alice, "r", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s, alice, r.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	rc, err := s.Cancel(context.Background(), alice, r.ID)
	if err != nil || !rc.CancelRequested {
		t.Fatalf("cancel running: %+v %v", rc, err)
	}
	done := wait(t, s, alice, r.ID, terminal)
	if done.State != StateCancelled || !done.CancelRequested {
		t.Fatalf("cancelled running: %+v", done)
	}
	if got := types(allEvents(t, s, alice, r.ID)); !strings.HasSuffix(got, ",run.cancelled") {
		t.Fatalf("events %s", got)
	}
}

// crash abandons a service as kill -9 would: no Stop, no release. Its
// goroutines go on, but every write it tries after the takeover is fenced.
func TestTakeoverInterruptsRunningAndKeepsQueued(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	o := h.options()
	o.Workers = 1
	s1, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s1.Stop(context.Background()) })
	s1.Start()
	running, err := s1.Submit(context.Background(), alice, "run", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s1, alice, running.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	queued, err := s1.Submit(context.Background(), alice, "queued", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	// A second host on the same store opens beside it and leaves the
	// running job alone: its lease is held.
	other := o
	other.LeaseOwner = "host-1-other-worker"
	h.open(other)
	if info, err := s1.Read(context.Background(), alice, running.ID); err != nil || info.State != StateRunning {
		t.Fatalf("beside a second host: %+v %v", info, err)
	}
	// The same host, restarted: it takes over at once.
	s2 := h.open(o)
	info, err := s2.Read(context.Background(), alice, running.ID)
	if err != nil || info.State != StateInterrupted {
		t.Fatalf("after takeover: %+v %v", info, err)
	}
	evs := allEvents(t, s2, alice, running.ID)
	last := evs[len(evs)-1]
	e := last["error"].(map[string]any)
	if last["type"] != "run.failed" || e["code"] != "JOB_INTERRUPTED" || e["outcome"] != "uncertain" || e["retryable"] != false {
		t.Fatalf("interrupt event %v", last)
	}
	if q, _ := s2.Read(context.Background(), alice, queued.ID); q.State != StateQueued {
		t.Fatalf("queued job after takeover: %+v", q)
	}
	// The old owner's run, cancelled now, cannot append after the takeover.
	s1.mu.Lock()
	runs := s1.activeRunsLocked()
	s1.mu.Unlock()
	for _, r := range runs {
		r.Cancel(nil)
		<-r.Done()
	}
	if got := types(allEvents(t, s2, alice, running.ID)); got != types(evs) {
		t.Fatalf("old owner appended after takeover: %s, was %s", got, types(evs))
	}
	s2.Start()
	if q := wait(t, s2, alice, queued.ID, terminal); q.State != StateCompleted {
		t.Fatalf("queued job: %+v", q)
	}
	// Interrupted jobs never run again.
	time.Sleep(50 * time.Millisecond)
	if info, _ := s2.Read(context.Background(), alice, running.ID); info.State != StateInterrupted {
		t.Fatalf("interrupted job changed: %+v", info)
	}
}

func TestTakeoverToolNeverRepeated(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	o := h.options()
	s1, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s1.Stop(context.Background()) })
	s1.Start()
	j, err := s1.Submit(context.Background(), alice, "tool", req("tool", "count"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s1, alice, j.ID, terminal)
	if n := h.tools.n.Load(); n != 1 {
		t.Fatalf("tool ran %d times", n)
	}
	s2 := h.open(o)
	s2.Start()
	info, _ := s2.Read(context.Background(), alice, j.ID)
	if info.State != StateCompleted {
		t.Fatalf("after takeover: %+v", info)
	}
	got := types(allEvents(t, s2, alice, j.ID))
	if !strings.Contains(got, "tool.called,tool.completed") {
		t.Fatalf("events %s", got)
	}
	if n := h.tools.n.Load(); n != 1 {
		t.Fatalf("tool ran %d times after takeover", n)
	}
}

// A crash between the terminal append and the record update: the log's
// terminal event wins.
func TestTakeoverAdoptsCommittedTerminal(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	o := h.options()
	s1 := h.open(o)
	j, err := s1.Submit(context.Background(), alice, "k", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	// Hand-made state: record running, log ending in run.completed.
	e, _ := h.store.Get(context.Background(), recordKey(j.ID))
	var rec record
	_ = json.Unmarshal(e.Value, &rec)
	rec.State = StateRunning
	b, _ := json.Marshal(rec)
	if _, err := h.store.Update(context.Background(), recordKey(j.ID), b, e.Revision); err != nil {
		t.Fatal(err)
	}
	ev1 := syntheticStarted(&rec, 1, time.Now())
	ev2 := []byte(`{"type":"run.completed","runId":"` + rec.RunID + `","sequence":2,"timestamp":"2026-01-01T00:00:00.000Z","result":{}}`)
	if _, err := h.store.Append(context.Background(), eventLog(j.ID), 0, ev1, ev2); err != nil {
		t.Fatal(err)
	}
	s2 := h.open(o)
	info, _ := s2.Read(context.Background(), alice, j.ID)
	if info.State != StateCompleted || info.Cursor != 2 {
		t.Fatalf("adopted: %+v", info)
	}
}

func TestCleanStopInterrupts(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	o := h.options()
	s1, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s1.Start()
	j, err := s1.Submit(context.Background(), alice, "k", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s1, alice, j.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	if err := s1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Read(context.Background(), alice, j.ID); protocol.CodeOf(err) != protocol.CodeJobsUnavailable {
		t.Fatalf("read after stop: %v", err)
	}
	// The lease is free: another identity may open now.
	other := o
	other.HostID = "host-2"
	s2 := h.open(other)
	info, _ := s2.Read(context.Background(), alice, j.ID)
	if info.State != StateInterrupted {
		t.Fatalf("after clean stop: %+v", info)
	}
	evs := allEvents(t, s2, alice, j.ID)
	if e := evs[len(evs)-1]; e["type"] != "run.failed" || e["error"].(map[string]any)["code"] != "JOB_INTERRUPTED" {
		t.Fatalf("last event %v", e)
	}
}

func TestDispatchChecks(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	reader := h.user("a2", "alice", "read")
	o := h.options()
	s := h.open(o)
	revoked, err := s.Submit(context.Background(), alice, "revoked", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	h.revoke("a1")
	s.Start()
	info := wait(t, s, reader, revoked.ID, terminal)
	evs := allEvents(t, s, reader, revoked.ID)
	if info.State != StateFailed || types(evs) != "run.started,run.failed" || evs[1]["error"].(map[string]any)["code"] != "FORBIDDEN" {
		t.Fatalf("revoked: %+v %v", info, evs)
	}
	_ = s.Stop(context.Background())

	// The provider's account changed since submission.
	h.user("a1", "alice", "submit", "read")
	o2 := o
	s2 := h.open(o2)
	moved, err := s2.Submit(context.Background(), alice, "moved", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.Stop(context.Background())
	o3 := o
	o3.Account = func(string) string { return "elsewhere" }
	s3 := h.open(o3)
	s3.Start()
	info = wait(t, s3, reader, moved.ID, terminal)
	evs = allEvents(t, s3, reader, moved.ID)
	if info.State != StateFailed || evs[1]["error"].(map[string]any)["code"] != "JOB_ACCOUNT_CHANGED" {
		t.Fatalf("account changed: %+v %v", info, evs)
	}
}

func TestCapacity(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	bob := h.user("b1", "bob", "submit", "read")
	o := h.options()
	o.MaxJobs, o.MaxJobsPerSubject = 3, 2
	s := h.open(o)
	for i, k := range []string{"1", "2"} {
		if _, err := s.Submit(context.Background(), alice, k, req("hello")); err != nil {
			t.Fatalf("alice %d: %v", i, err)
		}
	}
	if _, err := s.Submit(context.Background(), alice, "3", req("hello")); protocol.CodeOf(err) != protocol.CodeJobStoreFull {
		t.Fatalf("per subject edge: %v", err)
	}
	// A resubmission is not a new job.
	if _, err := s.Submit(context.Background(), alice, "1", req("hello")); err != nil {
		t.Fatalf("resubmit at capacity: %v", err)
	}
	if _, err := s.Submit(context.Background(), bob, "1", req("hello")); err != nil {
		t.Fatalf("bob: %v", err)
	}
	if _, err := s.Submit(context.Background(), bob, "2", req("hello")); protocol.CodeOf(err) != protocol.CodeJobStoreFull {
		t.Fatalf("total edge: %v", err)
	}

	// maxJobBytes: one record.
	o = h.options()
	h2 := newHarness(t)
	o.Store, o.Engine = h2.store, h2.engine
	o.MaxJobBytes = 16384
	s2 := h2.open(o)
	h2.user("a1", "alice", "submit", "read")
	if _, err := s2.Submit(context.Background(), alice, "big", req(strings.Repeat("y", 20000))); protocol.CodeOf(err) != protocol.CodeJobRecordLimit {
		t.Fatalf("record over maxJobBytes: %v", err)
	}
	// An event log past maxJobBytes interrupts the job.
	s2.Start()
	info, evs := runToEnd(t, s2, alice, "bigout", req("big"))
	if info.State != StateInterrupted || evs[len(evs)-1]["error"].(map[string]any)["code"] != "JOB_INTERRUPTED" {
		t.Fatalf("over maxJobBytes: %+v %s", info, types(evs))
	}
}

// retentionService is a started service keeping ended jobs a minute, and
// a user allowed to submit and read.
func retentionService(t *testing.T) (*harness, *Service, *runtime.Principal) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	o := h.options()
	o.Retention = time.Minute
	s := h.open(o)
	s.Start()
	return h, s, alice
}

func TestRetentionTombstones(t *testing.T) {
	h, s, alice := retentionService(t)
	j, err := s.Submit(context.Background(), alice, "k", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	done := wait(t, s, alice, j.ID, terminal)
	settled(t, h.store)
	h.maintainAt(s, done.ExpiresAt.UnixMilli()+1)
	if _, err := s.Read(context.Background(), alice, j.ID); protocol.CodeOf(err) != protocol.CodeJobExpired {
		t.Fatalf("read expired: %v", err)
	}
	if _, err := s.Submit(context.Background(), alice, "k", req("hello")); protocol.CodeOf(err) != protocol.CodeJobExpired {
		t.Fatalf("resubmit expired: %v", err)
	}
	if _, err := s.Submit(context.Background(), alice, "k", req("changed")); protocol.CodeOf(err) != protocol.CodeIdempotencyConflict {
		t.Fatalf("reuse expired key: %v", err)
	}
	if last, _ := h.store.Last(context.Background(), eventLog(j.ID)); last != 0 {
		t.Fatalf("log kept after retention: %d", last)
	}
	e, _ := h.store.Get(context.Background(), recordKey(j.ID))
	if strings.Contains(string(e.Value), "hello") || len(e.Value) > 400 {
		t.Fatalf("tombstone keeps payload: %s", e.Value)
	}
}

// Jobs that end together share one expiry key (a synced write per batch,
// not per job), and retention still tombstones every one of them and
// removes the key.
func TestRetentionBatchesExpiries(t *testing.T) {
	h, s, alice := retentionService(t)
	var ids []string
	for i := range 20 {
		j, err := s.Submit(context.Background(), alice, fmt.Sprintf("k%d", i), req("hello"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	var latest int64
	for _, id := range ids {
		latest = max(latest, wait(t, s, alice, id, terminal).ExpiresAt.UnixMilli())
	}
	settled(t, h.store)
	keys, _ := h.store.List(context.Background(), prefixExpiry, "", 0)
	if len(keys) == 0 || len(keys) >= len(ids) {
		t.Fatalf("%d expiry keys for %d jobs that ended together", len(keys), len(ids))
	}
	h.maintainAt(s, latest+1)
	for _, id := range ids {
		if _, err := s.Read(context.Background(), alice, id); protocol.CodeOf(err) != protocol.CodeJobExpired {
			t.Fatalf("read expired %s: %v", id, err)
		}
	}
	if keys, _ := h.store.List(context.Background(), prefixExpiry, "", 0); len(keys) != 0 {
		t.Fatalf("%d expiry keys left after retention", len(keys))
	}
}

func TestEventPages(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	s := h.open(h.options())
	s.Start()
	j, err := s.Submit(context.Background(), alice, "k", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	info := wait(t, s, alice, j.ID, terminal)
	p, err := s.Events(context.Background(), alice, j.ID, 1, 2)
	if err != nil || len(p.Events) != 2 || p.NextCursor != 3 || !p.HasMore {
		t.Fatalf("middle page: %+v %v", p, err)
	}
	p, err = s.Events(context.Background(), alice, j.ID, info.Cursor, 0)
	if err != nil || len(p.Events) != 0 || p.NextCursor != info.Cursor || p.HasMore {
		t.Fatalf("empty page at cursor: %+v %v", p, err)
	}
	if _, err := s.Events(context.Background(), alice, j.ID, info.Cursor+1, 0); protocol.CodeOf(err) != protocol.CodeInvalidJobCursor {
		t.Fatalf("after > cursor: %v", err)
	}
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"events":[]`) {
		t.Fatalf("empty page JSON %s", b)
	}
}

// Fair dispatch: one job per subject per round, the oldest of each, the
// subjects in byte order with the start rotating past the subject served
// last.
func TestPickRoundRobin(t *testing.T) {
	s := &Service{o: Options{Workers: 3}, queue: map[string]known{}, local: map[string]*job{},
		held: map[string]time.Time{}, blocked: map[string]bool{}, started: true}
	for i, id := range []string{"a1", "a2", "a3", "a4", "b1", "c1", "c2"} {
		s.queue[id] = known{queued: queued{Subject: id[:1], Created: int64(100 + i)}}
	}
	s.queue["a0"] = known{queued: queued{Subject: "a", Created: 50}}
	s.held["a0"] = time.Now().Add(time.Hour) // another host holds it
	round := func() string {
		var out []string
		for _, c := range s.pick() {
			out = append(out, c.j.id)
			delete(s.queue, c.j.id)
			delete(s.local, c.j.id)
		}
		s.active = 0
		return strings.Join(out, ",")
	}
	if got := round(); got != "a1,b1,c1" {
		t.Fatalf("round 1: %s", got)
	}
	s.blocked["a"] = true // a answered BUSY: it sits out
	if got := round(); got != "c2" {
		t.Fatalf("round 2: %s", got)
	}
	clear(s.blocked)
	if got := round(); got != "a2,a3,a4" {
		t.Fatalf("round 3: %s", got)
	}
	s.wg.Add(-7)
}

func TestConcurrentSubmitters(t *testing.T) {
	h := newHarness(t)
	o := h.options()
	o.MaxJobs, o.MaxJobsPerSubject = 1000, 1000
	s := h.open(o)
	s.Start()
	var wg sync.WaitGroup
	ids := make([][]string, 4)
	for c := range 4 {
		p := h.user(string(rune('a'+c)), "subject-"+string(rune('a'+c)), "submit", "read")
		wg.Go(func() {
			for i := range 25 {
				key := "k" + string(rune('a'+i%26)) + string(rune('0'+i/26))
				info, err := s.Submit(context.Background(), p, key, req("hello"))
				if err != nil {
					t.Error(err)
					return
				}
				ids[c] = append(ids[c], info.ID)
			}
			for _, id := range ids[c] {
				if info := wait(t, s, p, id, terminal); info.State != StateCompleted {
					t.Errorf("%s: %s", id, info.State)
				}
			}
		})
	}
	wg.Wait()
	if errors.Is(context.Background().Err(), context.Canceled) {
		t.Fatal("unreachable")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// maxBytes at its edge: a store sized for exactly one job's record and
// reserve takes one and refuses the next.
func TestMaxBytesEdge(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	probe := h.open(h.options())
	j, err := probe.Submit(context.Background(), alice, "k0", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := h.store.Get(context.Background(), recordKey(j.ID))
	size := int64(len(e.Value))

	h2 := newHarness(t)
	h2.user("a1", "alice", "submit", "read")
	o := h2.options()
	o.MaxBytes = size + liveReserve
	s := h2.open(o)
	if _, err := s.Submit(context.Background(), alice, "k1", req("hello")); err != nil {
		t.Fatalf("the job that fits: %v", err)
	}
	if _, err := s.Submit(context.Background(), alice, "k2", req("hello")); protocol.CodeOf(err) != protocol.CodeJobStoreFull {
		t.Fatalf("one byte over: %v", err)
	}
}

// A running job whose credential loses its grants is aborted at the next
// poll: run.cancelled carrying FORBIDDEN.
func TestRevokedWhileRunning(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	reader := h.user("a2", "alice", "read")
	s := h.open(h.options())
	s.Start()
	j, err := s.Submit(context.Background(), alice, "k", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s, reader, j.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	h.user("a1", "alice", "read") // submit is no longer granted
	info := wait(t, s, reader, j.ID, terminal)
	evs := allEvents(t, s, reader, j.ID)
	last := evs[len(evs)-1]
	if info.State != StateCancelled || last["type"] != "run.cancelled" || last["error"].(map[string]any)["code"] != "FORBIDDEN" {
		t.Fatalf("revoked: %+v %v", info, last)
	}
}

// partitioned is a store whose lease renewals stop reaching it.
type partitioned struct {
	*durable.Memory
	cut atomic.Bool
}

func (p *partitioned) Renew(ctx context.Context, name string, token uint64, ttl time.Duration) (durable.Lease, error) {
	if p.cut.Load() {
		return durable.Lease{}, errors.New("partitioned")
	}
	return p.Memory.Renew(ctx, name, token, ttl)
}

// A worker that cannot renew a job's lease for a whole lease aborts the
// run (JOB_LEASE_LOST) without writing, and the worker that took the job
// over after expiry interrupts it.
func TestLeaseLost(t *testing.T) {
	h := newHarness(t)
	var skew atomic.Int64
	h.store.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	alice := h.user("a1", "alice", "submit", "read")
	ps := &partitioned{Memory: h.store}
	o := h.options()
	o.Store, o.Lease = ps, 300*time.Millisecond
	s1 := h.open(o)
	s1.Start()
	j, err := s1.Submit(context.Background(), alice, "k", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s1, alice, j.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	ps.cut.Store(true)
	skew.Store(int64(time.Second)) // the lease has expired for the store
	o2 := h.options()
	o2.HostID = "host-2"
	s2 := h.open(o2)
	if info, _ := s2.Read(context.Background(), alice, j.ID); info.State != StateInterrupted {
		t.Fatalf("after takeover: %+v", info)
	}
	// The old owner's run stops once its renewals have failed for a whole
	// lease; reads on it come from the store, so it shows the takeover.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s1.mu.Lock()
		n := len(s1.runs)
		s1.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("old owner still running the job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info, err := s1.Read(context.Background(), alice, j.ID); err != nil || info.State != StateInterrupted {
		t.Fatalf("read on the old owner: %+v %v", info, err)
	}
	before := types(allEvents(t, s2, alice, j.ID))
	_ = s1.Stop(context.Background()) // its run ends; nothing reaches the log
	if after := types(allEvents(t, s2, alice, j.ID)); after != before {
		t.Fatalf("old owner wrote after losing the lease: %s, was %s", after, before)
	}
}

// two opens two workers (two hosts) on the harness's store with o, named
// worker-1 and worker-2.
func (h *harness) two(o Options) (*Service, *Service) {
	o1, o2 := o, o
	o1.LeaseOwner, o2.LeaseOwner = "worker-1", "worker-2"
	return h.open(o1), h.open(o2)
}

// Two workers on one store (two hosts): every job runs exactly once, on
// one of them, both take part, and each reads the other's jobs.
func TestTwoWorkersShareTheQueue(t *testing.T) {
	h := newHarness(t)
	o := h.options()
	o.MaxJobs, o.MaxJobsPerSubject = 1000, 1000
	s1, s2 := h.two(o)
	s1.Start()
	s2.Start()
	users := []*runtime.Principal{h.user("a", "subject-a", "submit", "read"), h.user("b", "subject-b", "submit", "read"), h.user("c", "subject-c", "submit", "read")}
	var ids []string
	for i := range 60 {
		s := []*Service{s1, s2}[i%2]
		info, err := s.Submit(context.Background(), users[i%3], fmt.Sprintf("k%d", i), req("tool", "count"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	owners := map[string]int{}
	for i, id := range ids {
		info := wait(t, []*Service{s2, s1}[i%2], users[i%3], id, terminal)
		if info.State != StateCompleted {
			t.Fatalf("job %d: %+v", i, info)
		}
		e, _ := h.store.Get(context.Background(), recordKey(id))
		var r record
		_ = json.Unmarshal(e.Value, &r)
		owners[r.Owner]++
		if got := types(allEvents(t, s1, users[i%3], id)); strings.Count(got, "run.started") != 1 || strings.Count(got, "tool.called") != 1 {
			t.Fatalf("job %d events: %s", i, got)
		}
	}
	if n := h.tools.n.Load(); n != int64(len(ids)) {
		t.Fatalf("the tool ran %d times for %d jobs", n, len(ids))
	}
	if owners["worker-1"] == 0 || owners["worker-2"] == 0 {
		t.Errorf("one worker took every job: %v", owners)
	}
	// Nothing is left behind once the jobs are settled (a worker settles
	// a job after its record is terminal, in batches): no queue entries,
	// no cancel signals.
	settled(t, h.store)
	for _, p := range []string{prefixQueue, prefixCancel} {
		if es, _ := h.store.List(context.Background(), p, "", 0); len(es) != 0 {
			t.Errorf("%s: %d keys left", p, len(es))
		}
	}
}

// settled waits until no queue entry is left: every terminal job has been
// settled (its expiry written, its entry and lease gone).
func settled(t *testing.T, st durable.Store) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		es, err := st.List(context.Background(), prefixQueue, "", 0)
		if err == nil && len(es) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queue entries left after their jobs ended", len(es))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A job running on one worker is cancelled from the other: the request is
// persisted at once, and the running worker stops the run.
func TestCancelAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	s1, s2 := h.two(h.options())
	s1.Start() // only s1 dispatches
	j, err := s2.Submit(context.Background(), alice, "k", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s2, alice, j.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	c, err := s2.Cancel(context.Background(), alice, j.ID)
	if err != nil || !c.CancelRequested || c.State != StateRunning {
		t.Fatalf("cancel from the other worker: %+v %v", c, err)
	}
	done := wait(t, s2, alice, j.ID, terminal)
	if done.State != StateCancelled || !done.CancelRequested {
		t.Fatalf("after cancel: %+v", done)
	}
	if got := types(allEvents(t, s2, alice, j.ID)); !strings.HasSuffix(got, ",run.cancelled") {
		t.Fatalf("events %s", got)
	}
	// A queued job is cancelled at once by the worker asked, even while
	// the other dispatches.
	q, err := s2.Submit(context.Background(), alice, "q", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	qc, err := s2.Cancel(context.Background(), alice, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if qc.State == StateRunning {
		wait(t, s2, alice, q.ID, terminal)
	} else if qc.State != StateCancelled {
		t.Fatalf("cancel queued: %+v", qc)
	}
}

// A worker that dies (no Stop) holding a running job: the other worker
// interrupts it once the job's lease has lapsed, and runs the dead
// worker's queued jobs.
func TestSurvivorInterruptsAfterLease(t *testing.T) {
	h := newHarness(t)
	var skew atomic.Int64
	h.store.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	alice := h.user("a1", "alice", "submit", "read")
	o1, o2 := h.options(), h.options()
	o1.LeaseOwner, o2.LeaseOwner = "worker-1", "worker-2"
	o1.Workers = 1
	o1.Lease, o2.Lease = 600*time.Millisecond, 600*time.Millisecond
	ps := &partitioned{Memory: h.store}
	o1.Store = ps
	s1 := h.open(o1)
	s1.Start()
	running, err := s1.Submit(context.Background(), alice, "run", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s1, alice, running.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	queued, err := s1.Submit(context.Background(), alice, "queued", req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	s2 := h.open(o2)
	s2.Start()
	// While worker-1's lease holds, the job stays running.
	time.Sleep(100 * time.Millisecond)
	if info, _ := s2.Read(context.Background(), alice, running.ID); info.State != StateRunning {
		t.Fatalf("interrupted while its lease held: %+v", info)
	}
	if q := wait(t, s2, alice, queued.ID, terminal); q.State != StateCompleted {
		t.Fatalf("the queued job: %+v", q)
	}
	ps.cut.Store(true)                 // worker-1 stops renewing
	skew.Store(int64(4 * time.Second)) // and its lease (3 s) lapses
	info := wait(t, s2, alice, running.ID, terminal)
	evs := allEvents(t, s2, alice, running.ID)
	last := evs[len(evs)-1]
	if info.State != StateInterrupted || last["type"] != "run.failed" || last["error"].(map[string]any)["code"] != "JOB_INTERRUPTED" {
		t.Fatalf("after the lease lapsed: %+v %v", info, last)
	}
}

// Fair dispatch holds across workers: a subject that floods the queue
// does not hold back another's job — with one slot on each of two
// workers, the other subject's job is among the first round of starts
// (one per subject per worker), however many the flood has queued.
func TestFairAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	h.prov.started = make(chan string, 64)
	flood := h.user("f", "flood", "submit", "read")
	lone := h.user("l", "lone", "submit", "read")
	o := h.options()
	o.Workers = 1
	s1, s2 := h.two(o)
	for i := range 30 {
		if _, err := s1.Submit(context.Background(), flood, fmt.Sprintf("f%d", i), req(fmt.Sprintf("flood-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	j, err := s2.Submit(context.Background(), lone, "l", req("lone"))
	if err != nil {
		t.Fatal(err)
	}
	s1.Start()
	s2.Start()
	wait(t, s1, lone, j.ID, terminal)
	var order []string
	for len(h.prov.started) > 0 {
		order = append(order, <-h.prov.started)
	}
	at := slices.Index(order, "lone")
	if at < 0 || at >= 4 {
		t.Fatalf("the lone subject's job started at %d: %v", at, order)
	}
}

// Capacity holds across workers at its edges: submissions alternating
// between two workers fill max_jobs_per_subject and max_jobs exactly, and
// the next one on either is JOB_STORE_FULL.
func TestCapacityAcrossWorkers(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	bob := h.user("b1", "bob", "submit", "read")
	o := h.options()
	o.MaxJobs, o.MaxJobsPerSubject = 5, 3
	s1, s2 := h.two(o)
	ws := []*Service{s1, s2}
	for i := range 3 {
		if _, err := ws[i%2].Submit(context.Background(), alice, fmt.Sprintf("a%d", i), req("hello")); err != nil {
			t.Fatalf("alice %d: %v", i, err)
		}
	}
	for _, s := range ws {
		if _, err := s.Submit(context.Background(), alice, "a-over", req("hello")); protocol.CodeOf(err) != protocol.CodeJobStoreFull {
			t.Fatalf("alice past max_jobs_per_subject: %v", err)
		}
	}
	for i := range 2 {
		if _, err := ws[(i+1)%2].Submit(context.Background(), bob, fmt.Sprintf("b%d", i), req("hello")); err != nil {
			t.Fatalf("bob %d: %v", i, err)
		}
	}
	for _, s := range ws {
		if _, err := s.Submit(context.Background(), bob, "b-over", req("hello")); protocol.CodeOf(err) != protocol.CodeJobStoreFull {
			t.Fatalf("bob past max_jobs: %v", err)
		}
	}
	// A resubmission on the other worker is the same job, not a new one.
	if _, err := s2.Submit(context.Background(), alice, "a0", req("hello")); err != nil {
		t.Fatalf("resubmission at capacity: %v", err)
	}
}

// A running job's updatedAt is when it started running (its run.started),
// on the worker that runs it and on any other: the record is not rewritten
// at the transition, so both read it from the log's first event.
func TestRunningUpdatedAt(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read", "cancel")
	s1, s2 := h.two(h.options())
	// Submitted "ten seconds ago" by the services' clock; the engine
	// stamps run.started with the real time.
	h.now.Store(time.Now().Add(-10 * time.Second).UnixMilli())
	j, err := s2.Submit(context.Background(), alice, "k", req("block"))
	if err != nil {
		t.Fatal(err)
	}
	h.now.Store(0)
	if q, err := s1.Read(context.Background(), alice, j.ID); err != nil || q.State != StateQueued || !q.UpdatedAt.Equal(q.CreatedAt) {
		t.Fatalf("queued: %+v %v", q, err)
	}
	s1.Start() // only s1 dispatches
	wait(t, s2, alice, j.ID, func(i Info) bool { return i.State == StateRunning && i.Cursor >= 2 })
	page, err := s2.Events(context.Background(), alice, j.ID, 0, 1)
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("first event: %+v %v", page, err)
	}
	started := time.UnixMilli(eventTime(page.Events[0]))
	if started.Sub(j.CreatedAt) < 9*time.Second {
		t.Fatalf("run.started at %v, submitted at %v", started, j.CreatedAt)
	}
	for name, s := range map[string]*Service{"worker": s1, "other host": s2} {
		i, err := s.Read(context.Background(), alice, j.ID)
		if err != nil || i.State != StateRunning || !i.UpdatedAt.Equal(started) {
			t.Errorf("%s: %+v %v, want updatedAt %v", name, i, err, started)
		}
	}
	if !page.Job.UpdatedAt.Equal(started) {
		t.Errorf("page job: updatedAt %v, want %v", page.Job.UpdatedAt, started)
	}
	if _, err := s2.Cancel(context.Background(), alice, j.ID); err != nil {
		t.Fatal(err)
	}
	if done := wait(t, s2, alice, j.ID, terminal); done.UpdatedAt.Before(started) {
		t.Errorf("cancelled: updatedAt %v before run.started %v", done.UpdatedAt, started)
	}
}

// failFirstEvent is a store that refuses the first append to any job's
// event log (a store error: the disk is full for a moment).
type failFirstEvent struct {
	*durable.Memory
	failed atomic.Bool
}

func (f *failFirstEvent) Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (uint64, error) {
	if strings.HasPrefix(log, prefixEvents) && f.failed.CompareAndSwap(false, true) {
		return 0, errors.New("no space left on device")
	}
	return f.Memory.Append(ctx, log, expectLast, recs...)
}

// A job whose run.started cannot be committed never began (that append
// is its queued → running transition), so it is not interrupted with an
// uncertain outcome: it fails as a dispatch check does (§2.3), with a
// synthetic run.started and run.failed carrying the store's retryable
// JOB_STORE_ERROR, cursor 2 (a terminal job's cursor is at least 2), and
// its provider is never called.
func TestRunStartedAppendFails(t *testing.T) {
	h := newHarness(t)
	alice := h.user("a1", "alice", "submit", "read")
	o := h.options()
	o.Store = &failFirstEvent{Memory: h.store}
	s := h.open(o)
	s.Start()
	info, evs := runToEnd(t, s, alice, "k", req("hello"))
	if info.State != StateFailed || info.Cursor != 2 || types(evs) != "run.started,run.failed" {
		t.Fatalf("run.started refused: %+v %s", info, types(evs))
	}
	if e := evs[1]["error"].(map[string]any); e["code"] != "JOB_STORE_ERROR" || e["retryable"] != true {
		t.Fatalf("terminal event: %v", evs[1])
	}
	if n := len(h.prov.started); n != 0 {
		t.Fatalf("the provider was called %d times for a job that never started", n)
	}
}
