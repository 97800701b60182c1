package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/client"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/idempotency"
	"adhost/runtime/protocol"
	"adhost/runtime/sessions"
	"adhost/store"
	"adhost/store/jetstream"
	"adhost/store/jetstream/natstest"
)

// The tests of conversation-sessions over real HTTP (wire-extensions §3):
// a Server with a sessions.Manager on a durable.Memory store, fake
// providers with each continuation capability, and tokens of several
// subjects.

const (
	sessMarker   = "private-state-marker"
	sessAlice    = "sess-alice-token-0123456789abcdef0123456789"
	sessAlice2   = "sess-alice2-token-0123456789abcdef012345678"
	sessBob      = "sess-bob-token-0123456789abcdef0123456789ab"
	sessNoGrants = "sess-nogrants-token-0123456789abcdef012345"
	sessNoProv   = "sess-noprov-token-0123456789abcdef01234567"
)

// sessProvider answers by the last user message:
//
//	"block"      signals started and waits until the turn is cancelled
//	"fail"       PROVIDER_FAILED (after the model call began)
//	"deltas:N"   a reply of N "x"
//	"native"     "first visible reply" with private native state
//	"followup"   "native state received" when that state came back
//	anything     "reply:" + the message
//
// It records what each turn was given.
type sessProvider struct {
	started chan struct{}
	mu      sync.Mutex
	seen    []*abi.CompleteInput
}

func (p *sessProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	p.mu.Lock()
	p.seen = append(p.seen, in)
	p.mu.Unlock()
	input := in.Messages[len(in.Messages)-1].Content
	switch {
	case input == "block":
		p.started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	case input == "fail":
		return nil, protocol.New(protocol.CodeProviderFailed)
	case strings.HasPrefix(input, "deltas:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(input, "deltas:"))
		return &abi.CompleteOutput{Text: strings.Repeat("x", n)}, nil
	case input == "native":
		return &abi.CompleteOutput{Text: "first visible reply", Native: json.RawMessage(`{"state":"` + sessMarker + `"}`)}, nil
	case input == "followup":
		if string(in.Native) != `{"state":"`+sessMarker+`"}` {
			return nil, protocol.New(protocol.CodeProviderFailed)
		}
		return &abi.CompleteOutput{Text: "native state received"}, nil
	}
	sink.Text("reply:")
	sink.Text(input)
	return &abi.CompleteOutput{Text: "reply:" + input}, nil
}

func (p *sessProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE"}, nil
}

func (p *sessProvider) last() *abi.CompleteInput {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

type sessEnv struct {
	url  string
	prov *sessProvider
	kv   sessions.Store
	log  *lockedBuffer
	m    *sessions.Manager
}

type sessOptions struct {
	cfg           sessions.Config
	kv            sessions.Store
	prov          *sessProvider
	caps          map[string]bool // of provider "hist"; nil: historyContinuation
	maxPerSubject int
	off           bool // no sessions at all
	keys          bool // idempotency keys too (on a memory store of their own)
}

// newSessEnv starts a host with providers "hist" (historyContinuation),
// "nat" (nativeContinuation), "noacct" (no account), "nocont" (neither
// capability), all with model "m", and tokens: alice and alice2 (one
// subject, every grant), bob (another subject, every grant), nogrants
// (providers only) and noprov (session grants, no provider grant).
func newSessEnv(t testing.TB, o sessOptions) *sessEnv {
	t.Helper()
	if o.prov == nil {
		o.prov = &sessProvider{started: make(chan struct{}, 16)}
	}
	if o.kv == nil {
		o.kv = durable.NewMemory()
	}
	if o.caps == nil {
		o.caps = map[string]bool{"historyContinuation": true}
	}
	inst := func(id, acct string, caps map[string]bool) *runtime.ProviderInstance {
		c := map[string]bool{"tools": false, "textStreaming": true}
		for k, v := range caps {
			c[k] = v
		}
		return &runtime.ProviderInstance{ID: id, Vendor: "test", AuthMode: "none", AccountID: acct, Models: []string{"m"}, Capabilities: c, Provider: o.prov}
	}
	insts := []*runtime.ProviderInstance{
		inst("hist", "acct", o.caps),
		inst("nat", "acct", map[string]bool{"nativeContinuation": true}),
		inst("noacct", "", map[string]bool{"historyContinuation": true}),
		inst("nocont", "acct", nil),
	}
	logBuf := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	eng, err := runtime.New(runtime.Options{Providers: insts, MaxPerSubject: o.maxPerSubject, Logger: logger, IdempotencyKeys: o.keys})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"sessions.create", "sessions.read", "sessions.continue", "sessions.delete"}
	provs := []string{"hist", "nat", "noacct", "nocont"}
	tokens := []Token{
		{ID: "a", Subject: "alice", Secret: sessAlice, Providers: provs, Ops: all},
		{ID: "a2", Subject: "alice", Secret: sessAlice2, Providers: provs, Ops: all},
		{ID: "b", Subject: "bob", Secret: sessBob, Providers: provs, Ops: all},
		{ID: "n", Subject: "alice", Secret: sessNoGrants, Providers: provs},
		{ID: "p", Subject: "alice", Secret: sessNoProv, Ops: all},
	}
	opts := ServerOptions{Engine: eng, Tokens: tokens, Logger: logger}
	e := &sessEnv{prov: o.prov, kv: o.kv, log: logBuf}
	if !o.off {
		cfg := o.cfg
		if cfg.Retention == 0 {
			cfg.Retention = time.Hour
		}
		if cfg.HostID == "" {
			cfg.HostID = "host-1"
		}
		cfg.Providers, cfg.Logger = eng.Providers(), logger
		m, err := sessions.New(context.Background(), o.kv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.m = m
		opts.Sessions, opts.Features = m, []string{"conversation-sessions"}
	}
	if o.keys {
		keys, err := idempotency.New(durable.NewMemory(), idempotency.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Idempotency = keys
	}
	s := NewServer(opts)
	s.SetReady()
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = s.newHTTPServer()
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		ts.Close()
		if e.m != nil {
			e.m.Close()
		}
	})
	e.url = ts.URL
	return e
}

// post sends a raw POST and returns the status and body.
func (e *sessEnv) post(t *testing.T, token, path, body string, accept string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *sessEnv) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantError checks a JSON error answer's status and code.
func wantError(t *testing.T, what string, status int, body []byte, wantStatus int, code protocol.Code) {
	t.Helper()
	var eb struct{ Error protocol.ErrorInfo }
	if err := json.Unmarshal(body, &eb); err != nil || status != wantStatus || eb.Error.Code != code {
		t.Errorf("%s: %d %s, want %d %s", what, status, body, wantStatus, code)
	}
}

// wantCode checks a client error's code and HTTP status (0: in-stream).
func wantCode(t *testing.T, what string, err error, status int, code protocol.Code) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != code || ce.Status != status {
		t.Errorf("%s: %v, want %s (HTTP %d)", what, err, code, status)
	}
}

func (e *sessEnv) create(t *testing.T, token, provider, mode string, history ...protocol.HistoryItem) *client.SessionSnapshot {
	t.Helper()
	s, err := e.client(t, token).CreateSession(t.Context(), &client.SessionCreate{Provider: provider, Model: "m", Mode: mode, History: history})
	if err != nil {
		t.Fatalf("create %s %s: %v", provider, mode, err)
	}
	return s
}

func sessRun(provider, input, id string, rev int64) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: provider, Model: "m", Input: input, Session: client.SessionRef(id, rev)}
}

func sessBody(provider, input, id string, rev int64, extra string) string {
	return `{"provider":"` + provider + `","model":"m","input":"` + input + `","session":{"id":"` + id + `","revision":` + strconv.FormatInt(rev, 10) + `}` + extra + `}`
}

func (e *sessEnv) state(t *testing.T, id string) client.SessionInfo {
	t.Helper()
	s, err := e.client(t, sessAlice).ReadSession(t.Context(), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return s.Session
}

// TestSessionsOff: without sessions the endpoints are unknown, the feature
// is not advertised, and a run with `session` is SESSIONS_UNAVAILABLE.
func TestSessionsOff(t *testing.T) {
	e := newSessEnv(t, sessOptions{off: true})
	st, b := e.post(t, sessAlice, "/v1/sessions/create", `{"provider":"hist","model":"m","mode":"history"}`, "")
	wantError(t, "create", st, b, 404, protocol.CodeNotFound)
	st, b = e.post(t, sessAlice, "/v1/runs", sessBody("hist", "x", "7e1d4b90-3c2a-4f6e-8b57-2a9c0d1e6f38", 0, ""), "")
	wantError(t, "run with session", st, b, 400, protocol.CodeSessionsUnavailable)
	info, err := e.client(t, sessAlice).Protocol(t.Context())
	if err != nil || info.HasFeature("conversation-sessions") {
		t.Fatalf("protocol: %+v %v", info, err)
	}
	on := newSessEnv(t, sessOptions{})
	if info, err := on.client(t, sessAlice).Protocol(t.Context()); err != nil || !info.HasFeature("conversation-sessions") {
		t.Fatalf("protocol with sessions: %+v %v", info, err)
	}
}

// TestSessionCreateErrors: every create failure with its code and status,
// in the order the checks run.
func TestSessionCreateErrors(t *testing.T) {
	e := newSessEnv(t, sessOptions{cfg: sessions.Config{MaxEntries: 2, MaxMessages: 2}})
	two := `,"history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]`
	for _, tc := range []struct {
		what, token, body string
		status            int
		code              protocol.Code
	}{
		{"not JSON", sessAlice, `{`, 400, protocol.CodeInvalidSession},
		{"unknown member", sessAlice, `{"provider":"hist","model":"m","mode":"history","x":1}`, 400, protocol.CodeInvalidSession},
		{"cased member", sessAlice, `{"Provider":"hist","model":"m","mode":"history"}`, 400, protocol.CodeInvalidSession},
		{"null history", sessAlice, `{"provider":"hist","model":"m","mode":"history","history":null}`, 400, protocol.CodeInvalidSession},
		{"bad mode", sessAlice, `{"provider":"hist","model":"m","mode":"both"}`, 400, protocol.CodeInvalidSession},
		{"no create grant (before the provider)", sessNoGrants, `{"provider":"nope","model":"m","mode":"history"}`, 403, protocol.CodeForbidden},
		{"unknown provider", sessAlice, `{"provider":"nope","model":"m","mode":"history"}`, 400, protocol.CodeUnknownProvider},
		{"no provider grant", sessNoProv, `{"provider":"hist","model":"m","mode":"history"}`, 403, protocol.CodeForbidden},
		{"no continuation capability", sessAlice, `{"provider":"nocont","model":"other","mode":"history"}`, 400, protocol.CodeUnsupportedContinuation},
		{"history mode on a native-only provider", sessAlice, `{"provider":"nat","model":"m","mode":"history"}`, 400, protocol.CodeUnsupportedContinuation},
		{"model not allowed", sessAlice, `{"provider":"hist","model":"other","mode":"history"}`, 400, protocol.CodeUnsupportedModel},
		{"no account", sessAlice, `{"provider":"noacct","model":"m","mode":"history"}`, 400, protocol.CodeSessionAccountRequired},
		{"history over max_messages", sessAlice, `{"provider":"hist","model":"m","mode":"history","history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, 400, protocol.CodeSessionContextLimit},
	} {
		st, b := e.post(t, tc.token, "/v1/sessions/create", tc.body, "")
		wantError(t, tc.what, st, b, tc.status, tc.code)
	}
	// max_messages at its edge is accepted; max_entries too, then full.
	for i := 0; i < 2; i++ {
		st, b := e.post(t, sessAlice, "/v1/sessions/create", `{"provider":"hist","model":"m","mode":"history"`+two+`}`, "")
		if st != 200 {
			t.Fatalf("create %d: %d %s", i, st, b)
		}
	}
	st, b := e.post(t, sessBob, "/v1/sessions/create", `{"provider":"hist","model":"m","mode":"history"}`, "")
	wantError(t, "store full", st, b, 429, protocol.CodeSessionCapacity)
	// Read and delete bodies are strict too.
	for _, body := range []string{`{}`, `{"id":"X"}`, `{"id":"7E1D4B90-3C2A-4F6E-8B57-2A9C0D1E6F38"}`, `{"id":"7e1d4b90-3c2a-4f6e-8b57-2a9c0d1e6f38","x":1}`, `[]`} {
		for _, path := range []string{"/v1/sessions/read", "/v1/sessions/delete"} {
			st, b := e.post(t, sessAlice, path, body, "")
			wantError(t, path+" "+body, st, b, 400, protocol.CodeInvalidSession)
		}
	}
}

// TestSessionContinueCheckOrder: each check of §3.2 answers with its code
// and status before any model call, and an earlier check wins over a later
// one that would also fail.
func TestSessionContinueCheckOrder(t *testing.T) {
	e := newSessEnv(t, sessOptions{cfg: sessions.Config{MaxMessages: 4}})
	s := e.create(t, sessAlice, "hist", "history")
	id := s.Session.ID
	missing := "7e1d4b90-3c2a-4f6e-8b57-2a9c0d1e6f38"
	calls := func() int { e.prov.mu.Lock(); defer e.prov.mu.Unlock(); return len(e.prov.seen) }
	before := calls()
	for _, tc := range []struct {
		what, token, body string
		status            int
		code              protocol.Code
	}{
		{"malformed session option", sessAlice, `{"provider":"hist","model":"m","input":"x","session":{"id":"` + id + `"}}`, 400, protocol.CodeInvalidRequest},
		{"1: history (over a missing session)", sessAlice, sessBody("hist", "x", missing, 0, `,"history":[]`), 400, protocol.CodeSessionHistoryConflict},
		{"1: instructions", sessAlice, sessBody("hist", "x", id, 0, `,"instructions":"i"`), 400, protocol.CodeSessionHistoryConflict},
		{"2: missing (over a wrong provider)", sessAlice, sessBody("nat", "x", missing, 0, ""), 404, protocol.CodeSessionNotFound},
		{"2: another subject's", sessBob, sessBody("hist", "x", id, 0, ""), 404, protocol.CodeSessionNotFound},
		{"2: no continue grant (over a wrong provider)", sessNoGrants, sessBody("nat", "x", id, 0, ""), 403, protocol.CodeForbidden},
		{"2: no provider grant", sessNoProv, sessBody("hist", "x", id, 0, ""), 403, protocol.CodeForbidden},
		{"3: provider (over a stale revision)", sessAlice, sessBody("nat", "x", id, 5, ""), 409, protocol.CodeSessionProviderMismatch},
		{"3: model", sessAlice, `{"provider":"hist","model":"n","input":"x","session":{"id":"` + id + `","revision":0}}`, 409, protocol.CodeSessionProviderMismatch},
		{"4: revision", sessAlice, sessBody("hist", "x", id, 1, ""), 409, protocol.CodeSessionRevisionConflict},
	} {
		st, b := e.post(t, tc.token, "/v1/runs", tc.body, "")
		wantError(t, tc.what, st, b, tc.status, tc.code)
	}
	if calls() != before {
		t.Fatal("a refused session run called the model")
	}
	// 5: with max_messages 4, the first turn fits (user + reply = 2) …
	c := e.client(t, sessAlice)
	res, err := c.Run(t.Context(), sessRun("hist", "one", id, 0))
	if err != nil || res.Text != "reply:one" {
		t.Fatalf("turn 1: %+v %v", res, err)
	}
	// … the second one exactly (4) …
	if _, err := c.Run(t.Context(), sessRun("hist", "two", id, 1)); err != nil {
		t.Fatalf("turn 2 at max_messages: %v", err)
	}
	// … and a third would not, before any model call.
	n := calls()
	st, b := e.post(t, sessAlice, "/v1/runs", sessBody("hist", "three", id, 2, ""), "")
	wantError(t, "5: size", st, b, 400, protocol.CodeSessionContextLimit)
	if calls() != n {
		t.Fatal("the size check came after a model call")
	}
	// The turn that was refused left the session as it was.
	if in := e.state(t, id); in.Revision != 2 || in.State != client.SessionReady {
		t.Fatalf("after refusals: %+v", in)
	}
}

// TestSessionBindingChanges: the checks that need another configuration
// on the same store (a restarted host): account binding changed (over a
// stale revision), and the provider no longer advertising the mode.
func TestSessionBindingChanges(t *testing.T) {
	kv := durable.NewMemory()
	a := newSessEnv(t, sessOptions{kv: kv})
	s := a.create(t, sessAlice, "hist", "history")
	b := newSessEnv(t, sessOptions{kv: kv, cfg: sessions.Config{HostID: "host-2"}})
	st, body := b.post(t, sessAlice, "/v1/runs", sessBody("nat", "x", s.Session.ID, 9, ""), "")
	wantError(t, "account changed", st, body, 409, protocol.CodeSessionAccountChanged)
	c := newSessEnv(t, sessOptions{kv: kv, caps: map[string]bool{"nativeContinuation": true}})
	st, body = c.post(t, sessAlice, "/v1/runs", sessBody("hist", "x", s.Session.ID, 9, ""), "")
	wantError(t, "capability gone (over a stale revision)", st, body, 400, protocol.CodeUnsupportedContinuation)
}

// TestSessionTurns: history mode over JSON and SSE: the provider is given
// the session's history and instructions, each result carries the next
// revision, and read shows the visible conversation.
func TestSessionTurns(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	c := e.client(t, sessAlice)
	ins := "be brief"
	s, err := c.CreateSession(t.Context(), &client.SessionCreate{Provider: "hist", Model: "m", Mode: "history", Instructions: &ins,
		History: []protocol.HistoryItem{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "answer"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Session.ID
	res, err := c.Run(t.Context(), sessRun("hist", "one", id, 0))
	if err != nil || res.Text != "reply:one" {
		t.Fatalf("JSON turn: %+v %v", res, err)
	}
	in := e.prov.last()
	if in.Instructions != ins || len(in.Messages) != 3 || in.Messages[0].Content != "earlier" || in.Messages[2].Content != "one" {
		t.Fatalf("provider input %+v", in)
	}
	var types []string
	res, err = c.Stream(t.Context(), sessRun("hist", "two", id, 1), func(ev client.Event) error {
		types = append(types, ev.Type)
		return nil
	})
	if err != nil || res.Text != "reply:two" {
		t.Fatalf("SSE turn: %+v %v", res, err)
	}
	var info map[string]any
	if err := json.Unmarshal(res.Session, &info); err != nil || info["revision"] != float64(2) || info["state"] != "ready" {
		t.Fatalf("run.completed result.session %s", res.Session)
	}
	if len(e.prov.last().Messages) != 5 {
		t.Fatalf("second turn saw %d messages", len(e.prov.last().Messages))
	}
	got, err := e.client(t, sessAlice2).ReadSession(t.Context(), id) // same subject, another token
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"earlier", "answer", "one", "reply:one", "two", "reply:two"}
	if len(got.History) != len(want) || got.Session.Revision != 2 || got.Instructions == nil || *got.Instructions != ins {
		t.Fatalf("read: %+v", got)
	}
	for i, h := range got.History {
		if h.Content != want[i] || h.Role != []string{"user", "assistant"}[i%2] {
			t.Fatalf("history[%d] = %+v", i, h)
		}
	}
}

// TestSessionNativePrivate: conformance:native then native-followup in a
// native session: the follow-up is given the private state, which appears
// in no result, event, read or log line.
func TestSessionNativePrivate(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	s := e.create(t, sessAlice, "nat", "native")
	st, first := e.post(t, sessAlice, "/v1/runs", sessBody("nat", "native", s.Session.ID, 0, ""), "text/event-stream")
	if st != 200 || !bytes.Contains(first, []byte("first visible reply")) || !bytes.Contains(first, []byte(`"revision":1`)) {
		t.Fatalf("native turn: %d %s", st, first)
	}
	st, second := e.post(t, sessAlice, "/v1/runs", sessBody("nat", "followup", s.Session.ID, 1, ""), "")
	if st != 200 || !bytes.Contains(second, []byte("native state received")) {
		t.Fatalf("follow-up: %d %s", st, second)
	}
	_, snap := e.post(t, sessAlice, "/v1/sessions/read", `{"id":"`+s.Session.ID+`"}`, "")
	for what, b := range map[string][]byte{"stream": first, "JSON result": second, "read": snap, "log": []byte(e.log.String())} {
		if bytes.Contains(b, []byte(sessMarker)) {
			t.Errorf("the native state is in the %s: %s", what, b)
		}
	}
	// A history session on the same adapter would not keep it.
	if e.state(t, s.Session.ID).Revision != 2 {
		t.Fatal("revision after two native turns")
	}
}

// TestSessionConcurrentTurns: eight runs race for one revision: exactly one
// runs, the others are SESSION_BUSY (or SESSION_REVISION_CONFLICT once the
// winner committed); deleting the session then cancels the running turn
// with SESSION_DELETED.
func TestSessionConcurrentTurns(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	s := e.create(t, sessAlice, "hist", "history")
	c := e.client(t, sessAlice)
	type outcome struct {
		started bool
		err     error
	}
	out := make(chan outcome, 8)
	for i := 0; i < 8; i++ {
		go func() {
			started := false
			_, err := c.Stream(context.Background(), sessRun("hist", "block", s.Session.ID, 0), func(ev client.Event) error {
				started = started || ev.Type == client.EventRunStarted
				return nil
			})
			out <- outcome{started, err}
		}()
	}
	busy := 0
	for i := 0; i < 7; i++ {
		o := <-out
		if o.started || (client.CodeOf(o.err) != protocol.CodeSessionBusy && client.CodeOf(o.err) != protocol.CodeSessionRevisionConflict) {
			t.Fatalf("loser %d: started %v, %v", i, o.started, o.err)
		}
		busy++
	}
	<-e.prov.started // the winner's model call is pending
	if in := e.state(t, s.Session.ID); in.State != client.SessionRunning || in.ExpiresAt != nil {
		t.Fatalf("while running: %+v", in)
	}
	if err := c.DeleteSession(t.Context(), s.Session.ID); err != nil {
		t.Fatal(err)
	}
	o := <-out
	if !o.started {
		t.Fatalf("the winner never started: %v", o.err)
	}
	wantCode(t, "the deleted turn", o.err, 0, protocol.CodeSessionDeleted)
	if _, err := c.ReadSession(t.Context(), s.Session.ID); client.CodeOf(err) != protocol.CodeSessionNotFound {
		t.Fatalf("read after delete: %v", err)
	}
}

// TestSessionDeleteJSONTurn: a JSON-mode turn whose session is deleted
// answers SESSION_DELETED with the reference's 502; the delete needs no
// run slot even when the subject's only slot is taken by that turn.
func TestSessionDeleteJSONTurn(t *testing.T) {
	e := newSessEnv(t, sessOptions{maxPerSubject: 1})
	s := e.create(t, sessAlice, "hist", "history")
	done := make(chan []byte, 1)
	go func() {
		st, b := e.post(t, sessAlice, "/v1/runs", sessBody("hist", "block", s.Session.ID, 0, ""), "")
		done <- append([]byte(strconv.Itoa(st)+" "), b...)
	}()
	<-e.prov.started
	// The subject's one slot is taken: session operations still work.
	other := e.create(t, sessAlice, "hist", "history")
	if in := e.state(t, other.Session.ID); in.State != client.SessionReady {
		t.Fatalf("create while the slot is taken: %+v", in)
	}
	st, b := e.post(t, sessAlice, "/v1/sessions/delete", `{"id":"`+s.Session.ID+`"}`, "")
	if st != 200 || string(b) != `{"id":"`+s.Session.ID+`","deleted":true}` {
		t.Fatalf("delete: %d %s", st, b)
	}
	got := <-done
	if !bytes.HasPrefix(got, []byte("502 ")) || !bytes.Contains(got, []byte(`"SESSION_DELETED"`)) {
		t.Fatalf("JSON turn after delete: %s", got)
	}
}

// TestSessionTurnOutcomes: a turn that fails before any model call gives
// the session back ready at the same revision; one that fails or is
// disconnected after model work began leaves it interrupted, which is
// terminal for turns but still readable.
func TestSessionTurnOutcomes(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	c := e.client(t, sessAlice)
	s := e.create(t, sessAlice, "hist", "history")
	id := s.Session.ID
	// Refused by the engine after Begin (tools the provider lacks): no
	// model call.
	st, b := e.post(t, sessAlice, "/v1/runs", sessBody("hist", "x", id, 0, `,"tools":["nope"]`), "")
	wantError(t, "unsupported tools", st, b, 400, protocol.CodeUnsupportedTools)
	if in := e.state(t, id); in.State != client.SessionReady || in.Revision != 0 {
		t.Fatalf("after a refused start: %+v", in)
	}
	// A provider failure after the model call began.
	_, err := c.Run(t.Context(), sessRun("hist", "fail", id, 0))
	wantCode(t, "provider failure", err, 502, protocol.CodeProviderFailed)
	if in := e.state(t, id); in.State != client.SessionInterrupted || in.Revision != 0 || in.ExpiresAt == nil {
		t.Fatalf("after a failed turn: %+v", in)
	}
	_, err = c.Run(t.Context(), sessRun("hist", "again", id, 0))
	wantCode(t, "turn on an interrupted session", err, 409, protocol.CodeSessionInterrupted)

	// A client that goes away mid-turn.
	s2 := e.create(t, sessAlice, "hist", "history")
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-e.prov.started; cancel() }()
	_, err = c.Run(ctx, sessRun("hist", "block", s2.Session.ID, 0))
	if err == nil {
		t.Fatal("the disconnected turn succeeded")
	}
	waitFor(t, "the disconnected turn to end", func() bool { return e.state(t, s2.Session.ID).State == client.SessionInterrupted })

	// A reply over 100,000 UTF-16 units cannot be kept: the turn fails
	// with SESSION_CONTEXT_LIMIT (model work happened: interrupted); one of
	// exactly 100,000 is kept.
	s3 := e.create(t, sessAlice, "hist", "history")
	if res, err := c.Run(t.Context(), sessRun("hist", "deltas:100000", s3.Session.ID, 0)); err != nil || len(res.Text) != 100000 {
		t.Fatalf("reply of 100,000: %v", err)
	}
	_, err = c.Run(t.Context(), sessRun("hist", "deltas:100001", s3.Session.ID, 1))
	wantCode(t, "reply of 100,001", err, 400, protocol.CodeSessionContextLimit)
	if in := e.state(t, s3.Session.ID); in.State != client.SessionInterrupted || in.Revision != 1 {
		t.Fatalf("after an oversized reply: %+v", in)
	}
}

// TestSessionSubjects: sessions belong to their subject: another subject
// can neither read, continue nor delete one (SESSION_NOT_FOUND), while
// two subjects' sessions live side by side.
func TestSessionSubjects(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	sa := e.create(t, sessAlice, "hist", "history")
	sb := e.create(t, sessBob, "hist", "history")
	bob := e.client(t, sessBob)
	if _, err := bob.ReadSession(t.Context(), sa.Session.ID); client.CodeOf(err) != protocol.CodeSessionNotFound {
		t.Errorf("bob reads alice's: %v", err)
	}
	if err := bob.DeleteSession(t.Context(), sa.Session.ID); client.CodeOf(err) != protocol.CodeSessionNotFound {
		t.Errorf("bob deletes alice's: %v", err)
	}
	if _, err := bob.Run(t.Context(), sessRun("hist", "x", sa.Session.ID, 0)); client.CodeOf(err) != protocol.CodeSessionNotFound {
		t.Errorf("bob continues alice's: %v", err)
	}
	var wg sync.WaitGroup
	for _, tc := range []struct {
		token string
		id    string
	}{{sessAlice, sa.Session.ID}, {sessBob, sb.Session.ID}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := client.New(e.url, client.WithToken(tc.token))
			for rev := int64(0); rev < 5; rev++ {
				if _, err := c.Run(context.Background(), sessRun("hist", "m"+strconv.FormatInt(rev, 10), tc.id, rev)); err != nil {
					t.Errorf("%s turn %d: %v", tc.id, rev, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if in := e.state(t, sa.Session.ID); in.Revision != 5 {
		t.Errorf("alice's session at %d", in.Revision)
	}
	// Grants: a token of alice's subject without the read grant.
	st, b := e.post(t, sessNoGrants, "/v1/sessions/read", `{"id":"`+sa.Session.ID+`"}`, "")
	wantError(t, "read without grant", st, b, 403, protocol.CodeForbidden)
	st, b = e.post(t, sessNoProv, "/v1/sessions/read", `{"id":"`+sa.Session.ID+`"}`, "")
	wantError(t, "read without the provider grant", st, b, 403, protocol.CodeForbidden)
	st, b = e.post(t, sessNoGrants, "/v1/sessions/delete", `{"id":"`+sa.Session.ID+`"}`, "")
	wantError(t, "delete without grant", st, b, 403, protocol.CodeForbidden)
}

// TestSessionIdempotentReplay: a keyed session turn replayed returns the
// recorded outcome — the same result and SessionInfo — without a model
// call and without moving the revision; the replay still needs the
// continue grant and the session itself (a deleted one cannot be replayed
// into).
func TestSessionIdempotentReplay(t *testing.T) {
	e := newSessEnv(t, sessOptions{keys: true})
	s := e.create(t, sessAlice, "hist", "history")
	body := sessBody("hist", "one", s.Session.ID, 0, `,"idempotencyKey":"turn-1"`)
	st, first := e.post(t, sessAlice, "/v1/runs", body, "")
	if st != 200 || !bytes.Contains(first, []byte(`"revision":1`)) {
		t.Fatalf("keyed turn: %d %s", st, first)
	}
	calls := len(e.prov.seen)
	st, again := e.post(t, sessAlice, "/v1/runs", body, "")
	if st != 200 || !bytes.Equal(again, first) || len(e.prov.seen) != calls {
		t.Fatalf("replay: %d %s (first %s), model calls %d → %d", st, again, first, calls, len(e.prov.seen))
	}
	if in := e.state(t, s.Session.ID); in.Revision != 1 {
		t.Fatalf("the replay moved the revision to %d", in.Revision)
	}
	st, b := e.post(t, sessNoGrants, "/v1/runs", body, "")
	wantError(t, "replay without the continue grant", st, b, 403, protocol.CodeForbidden)
	if err := e.client(t, sessAlice).DeleteSession(t.Context(), s.Session.ID); err != nil {
		t.Fatal(err)
	}
	st, b = e.post(t, sessAlice, "/v1/runs", body, "")
	wantError(t, "replay into a deleted session", st, b, 404, protocol.CodeSessionNotFound)
}

// BenchmarkSessionTurn is one JSON-mode session turn over HTTP (Begin's
// CAS, the run, the commit's CAS) against a plain run, with the sessions
// on the in-memory store and on the Badger store (two synced commits per
// turn). A session takes 49 turns at max_messages 100; then a new one is
// created (not timed).
func BenchmarkSessionTurn(b *testing.B) {
	for _, tc := range []struct {
		name string
		kv   func(b *testing.B) sessions.Store
	}{
		{"plain", nil},
		{"memory", func(*testing.B) sessions.Store { return durable.NewMemory() }},
		{"badger", func(b *testing.B) sessions.Store {
			st, err := store.Open(b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		}},
		{"jetstream", func(b *testing.B) sessions.Store {
			srv := natstest.Start(b, "")
			st, err := jetstream.Open(context.Background(), jetstream.Options{URLs: []string{srv.URL}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := sessOptions{}
			if tc.kv != nil {
				o.kv = tc.kv(b)
			}
			e := newSessEnv(b, o)
			c, _ := client.New(e.url, client.WithToken(sessAlice))
			ctx := context.Background()
			var id string
			var rev int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &protocol.RunRequest{Provider: "hist", Model: "m", Input: "x"}
				if tc.kv != nil {
					if id == "" || rev == 49 {
						b.StopTimer()
						s, err := c.CreateSession(ctx, &client.SessionCreate{Provider: "hist", Model: "m", Mode: "history"})
						if err != nil {
							b.Fatal(err)
						}
						id, rev = s.Session.ID, 0
						b.StartTimer()
					}
					req.Session = client.SessionRef(id, rev)
				}
				if _, err := c.Run(ctx, req); err != nil {
					b.Fatal(err)
				}
				rev++
			}
		})
	}
}
