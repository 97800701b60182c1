package sessions

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echo answers "echo:" + the last user message, and returns the number of
// messages it saw as native state.
type echo struct{}

func (echo) Complete(_ context.Context, in *abi.CompleteInput, _ runtime.TurnSink) (*abi.CompleteOutput, error) {
	last := in.Messages[len(in.Messages)-1].Content
	return &abi.CompleteOutput{Text: "echo:" + last, Native: json.RawMessage(`{"seen":` + itoa(len(in.Messages)) + `}`)}, nil
}

func (echo) Inspect(context.Context) (*abi.InspectOutput, error) { return &abi.InspectOutput{}, nil }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	kv    *durable.Memory
	eng   *runtime.Engine
	p     *runtime.Principal
	clk   *clock
	cfg   Config
	insts []*runtime.ProviderInstance
}

func newEnv(t *testing.T, mut func(*Config)) *env {
	t.Helper()
	insts := []*runtime.ProviderInstance{{
		ID: "p", AccountID: "acct", Models: []string{"m"}, Provider: echo{},
		Capabilities: map[string]bool{"tools": false, "textStreaming": false, "nativeContinuation": true, "historyContinuation": true},
	}}
	eng, err := runtime.New(runtime.Options{Providers: insts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	e := &env{
		kv: durable.NewMemory(), eng: eng, insts: insts,
		clk: &clock{t: time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC)},
		p: &runtime.Principal{Subject: "alice", Providers: map[string]bool{"p": true},
			Ops: map[string]bool{"sessions.create": true, "sessions.read": true, "sessions.continue": true, "sessions.delete": true}},
	}
	e.cfg = Config{Retention: time.Hour, HostID: "h", Providers: insts, Now: e.clk.now}
	if mut != nil {
		mut(&e.cfg)
	}
	return e
}

func (e *env) open(t *testing.T) *Manager {
	t.Helper()
	m, err := New(context.Background(), e.kv, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func create(t *testing.T, m *Manager, p *runtime.Principal, body string) Snapshot {
	t.Helper()
	out, err := m.Create(context.Background(), p, []byte(body))
	if err != nil {
		t.Fatalf("create %s: %v", body, err)
	}
	var s Snapshot
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// turn runs one JSON turn through Begin and the engine.
func (e *env) turn(t *testing.T, m *Manager, id string, rev int64, input string) (*protocol.RunResult, error) {
	t.Helper()
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: input, Session: json.RawMessage(`{"id":"` + id + `","revision":` + itoa(int(rev)) + `}`)}
	run, opts, started, err := m.Begin(context.Background(), e.p, req)
	if err != nil {
		return nil, err
	}
	r, err := e.eng.StartWith(context.Background(), e.p, run, runtime.ModeJSON, opts)
	started(r)
	if err != nil {
		return nil, err
	}
	return r.Wait(context.Background())
}

func read(t *testing.T, m *Manager, id string) (Snapshot, error) {
	t.Helper()
	out, err := m.Read(context.Background(), &runtime.Principal{Subject: "alice", Providers: map[string]bool{"p": true}, Ops: map[string]bool{"sessions.read": true}}, []byte(`{"id":"`+id+`"}`))
	var s Snapshot
	if err == nil {
		err = json.Unmarshal(out, &s)
	}
	return s, err
}

// TestTurnsCommitAndNativeState: each committed turn appends the visible
// exchange, moves the revision on, and hands the next turn the native
// state of the last one — which no snapshot shows.
func TestTurnsCommitAndNativeState(t *testing.T) {
	e := newEnv(t, nil)
	m := e.open(t)
	s := create(t, m, e.p, `{"provider":"p","model":"m","mode":"native","history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`)
	res, err := e.turn(t, m, s.Session.ID, 0, "one")
	if err != nil || res.Text != "echo:one" {
		t.Fatalf("turn 1: %v %v", res, err)
	}
	var info Info
	if err := json.Unmarshal(res.Session, &info); err != nil || info.Revision != 1 || info.State != StateReady || info.ExpiresAt == "" {
		t.Fatalf("result session %s: %v", res.Session, err)
	}
	got, err := read(t, m, s.Session.ID)
	if err != nil || len(got.History) != 4 || got.History[3].Content != "echo:one" || got.Session.Revision != 1 {
		t.Fatalf("after turn 1: %+v %v", got, err)
	}
	e2, _ := e.kv.Get(context.Background(), key(s.Session.ID))
	if !strings.Contains(string(e2.Value), `"native":{"seen":3}`) {
		t.Fatalf("native state not stored: %s", e2.Value)
	}
	out, _ := m.Read(context.Background(), e.p, []byte(`{"id":"`+s.Session.ID+`"}`))
	if strings.Contains(string(out), "seen") {
		t.Fatalf("the native state is in the snapshot: %s", out)
	}
	if _, err := e.turn(t, m, s.Session.ID, 0, "stale"); protocol.CodeOf(err) != protocol.CodeSessionRevisionConflict {
		t.Fatalf("stale revision: %v", err)
	}
}

// TestRestartInterruptsRunningTurn: a record left running by a process
// that died is interrupted by the next New, at the same revision; ready
// sessions are untouched.
func TestRestartInterruptsRunningTurn(t *testing.T) {
	e := newEnv(t, nil)
	m := e.open(t)
	busy := create(t, m, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	idle := create(t, m, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", Session: json.RawMessage(`{"id":"` + busy.Session.ID + `","revision":0}`)}
	if _, _, _, err := m.Begin(context.Background(), e.p, req); err != nil {
		t.Fatal(err)
	}
	// The process dies here: its turn never ends.
	m.Close()
	m2 := e.open(t)
	got, err := read(t, m2, busy.Session.ID)
	if err != nil || got.Session.State != StateInterrupted || got.Session.Revision != 0 || got.Session.ExpiresAt == "" {
		t.Fatalf("after restart: %+v %v", got.Session, err)
	}
	if _, err := e.turn(t, m2, busy.Session.ID, 0, "y"); protocol.CodeOf(err) != protocol.CodeSessionInterrupted {
		t.Fatalf("turn on the interrupted session: %v", err)
	}
	if got, err := read(t, m2, idle.Session.ID); err != nil || got.Session.State != StateReady {
		t.Fatalf("idle session after restart: %+v %v", got.Session, err)
	}
}

// TestRetention: idle retention runs from create and from the end of a
// turn, read does not extend it, an expired session is gone on access.
func TestRetention(t *testing.T) {
	e := newEnv(t, nil)
	m := e.open(t)
	s := create(t, m, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	e.clk.add(59 * time.Minute)
	if _, err := read(t, m, s.Session.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.add(59 * time.Second)
	if _, err := e.turn(t, m, s.Session.ID, 0, "keep"); err != nil {
		t.Fatal(err) // the turn's end starts retention again
	}
	e.clk.add(59 * time.Minute)
	if _, err := read(t, m, s.Session.ID); err != nil {
		t.Fatalf("read within retention of the last turn: %v", err)
	}
	e.clk.add(time.Minute)
	if _, err := read(t, m, s.Session.ID); protocol.CodeOf(err) != protocol.CodeSessionNotFound {
		t.Fatalf("read after retention: %v", err)
	}
	if _, err := e.kv.Get(context.Background(), key(s.Session.ID)); err != durable.ErrNotFound {
		t.Fatalf("expired record still stored: %v", err)
	}
}

// TestRetentionTimer: with the real clock, the timer removes an idle
// session without anyone touching it.
func TestRetentionTimer(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Now = nil; c.Retention = 20 * time.Millisecond })
	m := e.open(t)
	s := create(t, m, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.kv.Get(context.Background(), key(s.Session.ID)); err == durable.ErrNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expiry timer never removed the session")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCapacity: max_entries stored sessions, then SESSION_CAPACITY;
// deleting or expiring one makes room again.
func TestCapacity(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxEntries = 2 })
	m := e.open(t)
	body := `{"provider":"p","model":"m","mode":"history"}`
	a := create(t, m, e.p, body)
	create(t, m, e.p, body)
	if _, err := m.Create(context.Background(), e.p, []byte(body)); protocol.CodeOf(err) != protocol.CodeSessionCapacity {
		t.Fatalf("third create: %v", err)
	}
	if _, err := m.Delete(context.Background(), e.p, []byte(`{"id":"`+a.Session.ID+`"}`)); err != nil {
		t.Fatal(err)
	}
	create(t, m, e.p, body)
	if _, err := m.Create(context.Background(), e.p, []byte(body)); protocol.CodeOf(err) != protocol.CodeSessionCapacity {
		t.Fatalf("full again: %v", err)
	}
	e.clk.add(time.Hour)
	create(t, m, e.p, body) // the expired two are removed to make room
	// A restart counts what is stored.
	m.Close()
	m2 := e.open(t)
	create(t, m2, e.p, body)
	if _, err := m2.Create(context.Background(), e.p, []byte(body)); protocol.CodeOf(err) != protocol.CodeSessionCapacity {
		t.Fatalf("after restart: %v", err)
	}
}

// TestRecordBytesEdge: the byte bound admits a session whose history,
// instructions and native state encode to exactly max_record_bytes and
// refuses one byte more.
func TestRecordBytesEdge(t *testing.T) {
	hist := `[{"role":"user","content":"abcd"}]`
	size := len(hist) + len(`"ins"`)
	for _, tc := range []struct {
		max  int
		want protocol.Code
	}{{size, ""}, {size - 1, protocol.CodeSessionContextLimit}} {
		e := newEnv(t, func(c *Config) { c.MaxRecordBytes = tc.max })
		m := e.open(t)
		_, err := m.Create(context.Background(), e.p, []byte(`{"provider":"p","model":"m","mode":"history","instructions":"ins","history":`+hist+`}`))
		if protocol.CodeOf(err) != tc.want {
			t.Errorf("max %d: %v, want %q", tc.max, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	good := []string{
		`{"provider":"p","model":"m","mode":"history"}`,
		`{"provider":"p","model":"m[1m]","mode":"native","history":[],"instructions":""}`,
	}
	for _, b := range good {
		if _, err := ParseCreate([]byte(b)); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	bad := []string{
		``, `[]`, `null`, `{"provider":"p","model":"m"}`,
		`{"provider":"p","model":"m","mode":"History"}`,
		`{"Provider":"p","provider":"p","model":"m","mode":"history"}`,
		`{"provider":"p","model":"m","mode":"history","history":null}`,
		`{"provider":"p","model":"m","mode":"history","instructions":null}`,
		`{"provider":"p","model":"m","mode":"history","history":[{"role":"tool","content":"x"}]}`,
		`{"provider":"p","model":"m","mode":"history","history":[{"role":"user","content":"x","native":1}]}`,
		`{"provider":"p","model":"m","mode":"history","history":[{"role":"user"}]}`,
		`{"provider":"-p","model":"m","mode":"history"}`,
		`{"provider":"p","model":"m","mode":"history","instructions":"` + strings.Repeat("€", MaxMessageUnits+1) + `"}`,
		`{"provider":"p","model":"m","mode":"history","history":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":""},`, 101), ",") + `]}`,
		"{\"provider\":\"p\xff\",\"model\":\"m\",\"mode\":\"history\"}",
	}
	for _, b := range bad {
		if _, err := ParseCreate([]byte(b)); protocol.CodeOf(err) != protocol.CodeInvalidSession {
			t.Errorf("%s: %v, want INVALID_SESSION", b, err)
		}
	}
	// 100,000 UTF-16 units exactly: a non-BMP character counts two.
	edge := `{"provider":"p","model":"m","mode":"history","instructions":"` + strings.Repeat("😀", MaxMessageUnits/2) + `"}`
	if _, err := ParseCreate([]byte(edge)); err != nil {
		t.Errorf("instructions of exactly 100,000 units: %v", err)
	}
	id := "7e1d4b90-3c2a-4f6e-8b57-2a9c0d1e6f38"
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`{"id":"` + id + `","revision":0}`, true},
		{`{"id":"` + id + `","revision":9007199254740991}`, true},
		{`{"id":"` + id + `","revision":3.0}`, true},
		{`{"id":"` + id + `","revision":9007199254740992}`, false},
		{`{"id":"` + id + `","revision":-1}`, false},
		{`{"id":"` + id + `","revision":1.5}`, false},
		{`{"id":"` + id + `","revision":"1"}`, false},
		{`{"id":"` + id + `"}`, false},
		{`{"id":"` + strings.ToUpper(id) + `","revision":0}`, false},
		{`{"id":"` + id + `","revision":0,"x":1}`, false},
		{`{"id":"` + id + `","Revision":0}`, false},
	} {
		_, err := ParseRef(json.RawMessage(tc.raw))
		if (err == nil) != tc.ok || (err != nil && protocol.CodeOf(err) != protocol.CodeInvalidRequest) {
			t.Errorf("ParseRef(%s) = %v, want ok %v", tc.raw, err, tc.ok)
		}
	}
}

// FuzzParse: the strict decoders never panic, and what they accept obeys
// the bounds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"provider":"p","model":"m","mode":"history","history":[{"role":"user","content":"x"}],"instructions":"i"}`))
	f.Add([]byte(`{"id":"7e1d4b90-3c2a-4f6e-8b57-2a9c0d1e6f38","revision":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := ParseCreate(b); err == nil {
			if len(c.History) > MaxCreateHistory || (c.Mode != ModeHistory && c.Mode != ModeNative) || !protocol.IsInstanceID(c.Provider) {
				t.Fatalf("accepted %q as %+v", b, c)
			}
		}
		if r, err := ParseRef(b); err == nil && (!IsSessionID(r.ID) || r.Revision < 0 || r.Revision > MaxRevision) {
			t.Fatalf("accepted ref %q as %+v", b, r)
		}
		if id, err := ParseIdentity(b); err == nil && !IsSessionID(id) {
			t.Fatalf("accepted identity %q", b)
		}
	})
}

// TestBeginContextUnsupported: check 1 of §3.2 for context inputs, which
// this host's decoder otherwise refuses before a session is looked at.
func TestBeginContextUnsupported(t *testing.T) {
	e := newEnv(t, nil)
	m := e.open(t)
	s := create(t, m, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	ref := json.RawMessage(`{"id":"` + s.Session.ID + `","revision":0}`)
	for _, req := range []*protocol.RunRequest{
		{Provider: "p", Model: "m", Input: "x", Session: ref, Attachments: json.RawMessage(`[{"x":1}]`)},
		{Provider: "p", Model: "m", Input: "x", Session: ref, Retrieval: json.RawMessage(`{}`)},
	} {
		if _, _, _, err := m.Begin(context.Background(), e.p, req); protocol.CodeOf(err) != protocol.CodeSessionContextUnsupported {
			t.Errorf("%+v: %v", req, err)
		}
	}
	// An empty attachment list is no context.
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", Session: ref, Attachments: json.RawMessage(`[ ]`)}
	_, _, started, err := m.Begin(context.Background(), e.p, req)
	if err != nil {
		t.Fatal(err)
	}
	started(nil) // not started: the turn is given back
	if got, err := read(t, m, s.Session.ID); err != nil || got.Session.State != StateReady {
		t.Fatalf("after giving the turn back: %+v %v", got.Session, err)
	}
}

// source is a provider list that can change, as a reload changes the
// engine's.
type source struct {
	mu    sync.Mutex
	insts []*runtime.ProviderInstance
}

func (s *source) Providers() []*runtime.ProviderInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insts
}

func (s *source) set(insts ...*runtime.ProviderInstance) {
	s.mu.Lock()
	s.insts = insts
	s.mu.Unlock()
}

// TestProviderChangesWhileServing: with a Source, a changed account
// binding or a withdrawn capability is seen by the next turn without a
// restart.
func TestProviderChangesWhileServing(t *testing.T) {
	src := &source{}
	e := newEnv(t, func(c *Config) { c.Source = src })
	src.set(e.insts...)
	m := e.open(t)
	s := create(t, m, e.p, `{"provider":"p","model":"m","mode":"native"}`)
	changed := *e.insts[0]
	changed.AccountID = "other"
	src.set(&changed)
	if _, err := e.turn(t, m, s.Session.ID, 0, "x"); protocol.CodeOf(err) != protocol.CodeSessionAccountChanged {
		t.Fatalf("account changed: %v", err)
	}
	noNative := *e.insts[0]
	noNative.Capabilities = map[string]bool{"historyContinuation": true}
	src.set(&noNative)
	if _, err := e.turn(t, m, s.Session.ID, 0, "x"); protocol.CodeOf(err) != protocol.CodeUnsupportedContinuation {
		t.Fatalf("capability withdrawn: %v", err)
	}
	src.set()
	if _, err := e.turn(t, m, s.Session.ID, 0, "x"); protocol.CodeOf(err) != protocol.CodeSessionAccountChanged {
		t.Fatalf("provider removed: %v", err)
	}
	src.set(e.insts...)
	if _, err := e.turn(t, m, s.Session.ID, 0, "x"); err != nil {
		t.Fatalf("binding back: %v", err)
	}
}
