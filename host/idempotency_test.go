package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/idempotency"
	"adhost/runtime/protocol"
	"adhost/runtime/sessions"
	"adhost/store"
)

// Tokens of the idempotency tests: two of subject alice (they share
// keys), one of bob.
const (
	idemAlice  = "idem-alice-0123456789abcdef0123456789abcdef"
	idemAlice2 = "idem-alice2-0123456789abcdef0123456789abcdef"
	idemBob    = "idem-bob-0123456789abcdef0123456789abcdef"
)

// idemProvider mimics the fixture's conformance scenarios and counts its
// turns:
//
//	conformance:tools   step 1 calls conformance_lookup {"value":7}; step 2 "tool receipt: 7"
//	conformance:cancel  waits until cancelled (pending is signalled)
//	conformance:html    "<b>&</b>" (HTML-escaped in events, not in the JSON body)
//	fail                PROVIDER_FAILED
//	anything else       "Hello " + "fixture"
type idemProvider struct {
	calls   atomic.Int32
	pending chan struct{}
}

func (p *idemProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	p.calls.Add(1)
	last := in.Messages[len(in.Messages)-1]
	input := ""
	for _, m := range in.Messages {
		if m.Role == abi.RoleUser {
			input = m.Content
		}
	}
	one := int64(3)
	sink.Usage(abi.Usage{InputTokens: &one, OutputTokens: &one})
	switch input {
	case "conformance:tools":
		if last.Role == abi.RoleTool {
			sink.Text("tool receipt: 7")
			return &abi.CompleteOutput{Text: "tool receipt: 7"}, nil
		}
		return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "call_1", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":7}`)}}}, nil
	case "conformance:cancel":
		p.pending <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	case "conformance:html":
		sink.Text("<b>&</b>")
		return &abi.CompleteOutput{Text: "<b>&</b>"}, nil
	case "fail":
		return nil, protocol.New(protocol.CodeProviderFailed)
	}
	sink.Text("Hello ")
	sink.Text("fixture")
	return &abi.CompleteOutput{Text: "Hello fixture"}, nil
}

func (p *idemProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE", Complete: true}, nil
}

// lookupTools is conformance_lookup, counting its executions.
type lookupTools struct{ calls atomic.Int32 }

func (l *lookupTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }

func (l *lookupTools) Invoke(_ context.Context, call abi.ToolCall, _ func()) (json.RawMessage, error) {
	l.calls.Add(1)
	return json.RawMessage(`{"receipt":7}`), nil
}

// countingSink counts usage records.
type countingSink struct{ n atomic.Int32 }

func (c *countingSink) RecordUsage(context.Context, *runtime.UsageRecord) error {
	c.n.Add(1)
	return nil
}

type idemEnv struct {
	url      string
	engine   *runtime.Engine
	keys     *idempotency.Keys
	provider *idemProvider
	tools    *lookupTools
	usage    *countingSink
}

type idemOptions struct {
	store         durable.Store // nil: a fresh memory store
	maxRecord     int
	maxPerSubject int
	off           bool // no operation store
}

func newIdemEnv(t testing.TB, o idemOptions) *idemEnv {
	t.Helper()
	env := &idemEnv{provider: &idemProvider{pending: make(chan struct{}, 8)}, tools: &lookupTools{}, usage: &countingSink{}}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: "p", Name: "P", Vendor: "test", AuthMode: "none",
			Capabilities: map[string]bool{"tools": true, "textStreaming": true},
			UsageSource:  "adapter-report",
			Provider:     env.provider,
		}},
		Tools: []*runtime.Tool{{
			Def: abi.ToolDef{Name: "conformance_lookup", Description: "lookup",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)},
			Set: env.tools,
		}},
		MaxPerSubject:   o.maxPerSubject,
		UsageSink:       env.usage,
		IdempotencyKeys: !o.off,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.engine = eng
	opts := ServerOptions{
		Engine: eng,
		Tokens: []Token{
			{ID: "a1", Subject: "alice", Secret: idemAlice, Providers: []string{"p"}, Tools: []string{"conformance_lookup"}},
			{ID: "a2", Subject: "alice", Secret: idemAlice2, Providers: []string{"p"}, Tools: []string{"conformance_lookup"}},
			{ID: "b1", Subject: "bob", Secret: idemBob, Providers: []string{"p"}},
		},
	}
	if !o.off {
		st := o.store
		if st == nil {
			st = durable.NewMemory()
		}
		if env.keys, err = idempotency.New(st, idempotency.Options{MaxRecordBytes: o.maxRecord}); err != nil {
			t.Fatal(err)
		}
		opts.Idempotency = env.keys
		opts.Features = []string{"idempotency"}
	}
	env.url = serveIdem(t, NewServer(opts))
	return env
}

// serveIdem serves s on a loopback httptest server until the test ends.
func serveIdem(t testing.TB, s *Server) string {
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
	})
	return ts.URL
}

// idemResponse is one answer: status, and either the JSON body or the
// stream's frames.
type idemResponse struct {
	status int
	body   []byte
	frames []sseFrame
}

type sseFrame struct {
	id, typ string
	data    []byte
}

// errorCode returns the code, retryable flag and outcome of an error body.
func (r *idemResponse) errorInfo(t *testing.T) protocol.ErrorInfo {
	t.Helper()
	var b struct{ Error protocol.ErrorInfo }
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("status %d body %s: not an error body", r.status, r.body)
	}
	return b.Error
}

// terminal returns the last frame's error (zero for run.completed).
func (r *idemResponse) terminal(t *testing.T) (string, protocol.ErrorInfo) {
	t.Helper()
	if len(r.frames) == 0 {
		t.Fatalf("status %d: no events (%s)", r.status, r.body)
	}
	last := r.frames[len(r.frames)-1]
	var ev struct{ Error protocol.ErrorInfo }
	_ = json.Unmarshal(last.data, &ev)
	return last.typ, ev.Error
}

func (e *idemEnv) post(t *testing.T, token, body string, stream bool) *idemResponse {
	t.Helper()
	resp := e.start(t, t.Context(), token, body, stream)
	defer resp.Body.Close()
	return readIdem(t, resp, stream)
}

func (e *idemEnv) start(t *testing.T, ctx context.Context, token, body string, stream bool) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/runs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readIdem(t *testing.T, resp *http.Response, stream bool) *idemResponse {
	t.Helper()
	out := &idemResponse{status: resp.StatusCode}
	if !stream || resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out.body = b
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var f sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.typ != "" {
				out.frames = append(out.frames, f)
			}
			f = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = []byte(line[6:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func keyed(input, key string, extra ...string) string {
	b := `{"provider":"p","model":"m","input":"` + input + `","idempotencyKey":"` + key + `"`
	for _, x := range extra {
		b += "," + x
	}
	return b + "}"
}

var seqMember = regexp.MustCompile(`"sequence":\d+`)

// compactOf is what a replay of the original frames must be: the events a
// record keeps, renumbered from 1, every other byte as first sent.
func compactOf(frames []sseFrame) []sseFrame {
	var out []sseFrame
	for _, f := range frames {
		switch f.typ {
		case "text.delta", "run.progress", "approval.requested", "approval.resolved", "tool.execution.requested":
			continue
		}
		n := strconv.Itoa(len(out) + 1)
		data := seqMember.ReplaceAll(f.data, []byte(`"sequence":`+n))
		out = append(out, sseFrame{id: n, typ: f.typ, data: data})
	}
	return out
}

func sameFrames(t *testing.T, what string, got, want []sseFrame) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d:\n got %s\nwant %s", what, len(got), len(want), framesString(got), framesString(want))
	}
	for i := range got {
		if got[i].id != want[i].id || got[i].typ != want[i].typ || !bytes.Equal(got[i].data, want[i].data) {
			t.Errorf("%s: event %d:\n got id %s %s %s\nwant id %s %s %s", what, i, got[i].id, got[i].typ, got[i].data, want[i].id, want[i].typ, want[i].data)
		}
	}
}

func framesString(fs []sseFrame) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.id + " " + f.typ + "; ")
	}
	return b.String()
}

// A tool run replays, as a stream and as JSON, without calling the
// provider or the tool again and without a usage record; a JSON run
// replays its exact body.
func TestIdempotentToolRunReplays(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	body := keyed("conformance:tools", "tools-1", `"tools":["conformance_lookup"]`)
	first := env.post(t, idemAlice, body, true)
	if first.status != http.StatusOK {
		t.Fatalf("first run: %d %s", first.status, first.body)
	}
	if typ, _ := first.terminal(t); typ != "run.completed" {
		t.Fatalf("first run ended with %s", typ)
	}
	waitFor(t, "the usage record", func() bool { return env.usage.n.Load() == 1 })
	provider, tool := env.provider.calls.Load(), env.tools.calls.Load()
	if provider != 2 || tool != 1 {
		t.Fatalf("first run: %d provider turns, %d tool calls; want 2, 1", provider, tool)
	}
	want := compactOf(first.frames)
	var result json.RawMessage
	{
		var ev struct{ Result json.RawMessage }
		if err := json.Unmarshal(first.frames[len(first.frames)-1].data, &ev); err != nil {
			t.Fatal(err)
		}
		result = ev.Result
	}

	for i, token := range []string{idemAlice, idemAlice2} { // tokens of one subject share keys
		again := env.post(t, token, body, true)
		if again.status != http.StatusOK {
			t.Fatalf("replay %d: %d %s", i, again.status, again.body)
		}
		sameFrames(t, "stream replay", again.frames, want)

		js := env.post(t, token, body, false)
		if js.status != http.StatusOK {
			t.Fatalf("JSON replay %d: %d %s", i, js.status, js.body)
		}
		var got, exp any
		_ = json.Unmarshal(js.body, &got)
		_ = json.Unmarshal(result, &exp)
		if !jsonEqual(got, exp) {
			t.Errorf("JSON replay = %s, want the recorded result %s", js.body, result)
		}
	}
	if p, tl, u := env.provider.calls.Load(), env.tools.calls.Load(), env.usage.n.Load(); p != provider || tl != tool || u != 1 {
		t.Errorf("after replays: %d provider turns, %d tool calls, %d usage records; want %d, %d, 1", p, tl, u, provider, tool)
	}

	// A JSON run replays byte for byte, as JSON and as the stream of the
	// events it recorded (HTML-escaped in events, not in the body).
	jbody := keyed("conformance:html", "json-1")
	orig := env.post(t, idemAlice, jbody, false)
	if orig.status != http.StatusOK || !bytes.Contains(orig.body, []byte("<b>&</b>")) {
		t.Fatalf("JSON run: %d %s", orig.status, orig.body)
	}
	again := env.post(t, idemAlice, jbody, false)
	if again.status != http.StatusOK || !bytes.Equal(again.body, orig.body) {
		t.Errorf("JSON replay:\n got %d %s\nwant %s", again.status, again.body, orig.body)
	}
	st := env.post(t, idemAlice, jbody, true)
	var types []string
	for i, f := range st.frames {
		types = append(types, f.typ)
		if f.id != strconv.Itoa(i+1) || !bytes.Contains(f.data, []byte(`"sequence":`+f.id+`,`)) {
			t.Errorf("replayed event %d: id %s, data %s", i, f.id, f.data)
		}
	}
	if strings.Join(types, ",") != "run.started,step.started,usage.reported,run.completed" {
		t.Errorf("stream replay of a JSON run: %v", types)
	}
	if last := st.frames[len(st.frames)-1].data; !bytes.Contains(last, []byte(`\u003cb\u003e\u0026\u003c/b\u003e`)) {
		t.Errorf("replayed run.completed %s: result not as the engine encodes events", last)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Any changed field is a conflict; key order and whitespace are not.
func TestIdempotencyConflict(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	base := `{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3}`
	if r := env.post(t, idemAlice, base, false); r.status != http.StatusOK {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	calls := env.provider.calls.Load()
	reordered := `{ "metadata":{"b":"2","a":"1"}, "maxSteps":3, "idempotencyKey":"c-1", "input":"hi", "model":"m", "provider":"p" }`
	if r := env.post(t, idemAlice, reordered, false); r.status != http.StatusOK {
		t.Errorf("same request, other key order: %d %s; want the replay", r.status, r.body)
	}
	for _, changed := range []string{
		`{"provider":"p","model":"m","input":"hi!","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3}`,
		`{"provider":"p","model":"m2","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"3"},"maxSteps":3}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1"},"maxSteps":3}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":4}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"}}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3,"instructions":"x"}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3,"retry":{"maxAttempts":1}}`,
		`{"provider":"p","model":"m","input":"hi","idempotencyKey":"c-1","metadata":{"a":"1","b":"2"},"maxSteps":3,"tools":["conformance_lookup"]}`,
	} {
		for _, stream := range []bool{false, true} {
			r := env.post(t, idemAlice, changed, stream)
			if r.status != http.StatusConflict || r.errorInfo(t).Code != protocol.CodeIdempotencyConflict {
				t.Errorf("%s (stream %v): %d %s; want 409 IDEMPOTENCY_CONFLICT", changed, stream, r.status, r.body)
			}
		}
	}
	// Another subject's key of the same name is its own.
	if r := env.post(t, idemBob, keyed("other", "c-1"), false); r.status != http.StatusOK {
		t.Errorf("bob's c-1: %d %s", r.status, r.body)
	}
	if got := env.provider.calls.Load(); got != calls+1 {
		t.Errorf("provider turns %d, want %d (only bob's run)", got, calls+1)
	}
}

// Two subjects with the same key run independently, each replaying its own.
func TestIdempotencySubjectsIndependent(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	a := env.post(t, idemAlice, keyed("for alice", "same"), false)
	b := env.post(t, idemBob, keyed("for bob", "same"), false)
	if a.status != 200 || b.status != 200 || bytes.Equal(a.body, b.body) {
		t.Fatalf("alice %d %s, bob %d %s", a.status, a.body, b.status, b.body)
	}
	if a2 := env.post(t, idemAlice, keyed("for alice", "same"), false); !bytes.Equal(a2.body, a.body) {
		t.Errorf("alice's replay %s, want %s", a2.body, a.body)
	}
	if b2 := env.post(t, idemBob, keyed("for bob", "same"), false); !bytes.Equal(b2.body, b.body) {
		t.Errorf("bob's replay %s, want %s", b2.body, b.body)
	}
	if n := env.provider.calls.Load(); n != 2 {
		t.Errorf("provider turns %d, want 2", n)
	}
}

// While the first run is pending: OPERATION_IN_PROGRESS (retryable), or a
// conflict for another request; once it is cancelled, the cancellation
// replays.
func TestIdempotencyInProgressThenCancelled(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	body := keyed("conformance:cancel", "pending-1")
	ctx, cancel := context.WithCancel(t.Context())
	resp := env.start(t, ctx, idemAlice, body, true)
	<-env.provider.pending

	for _, stream := range []bool{false, true} {
		r := env.post(t, idemAlice2, body, stream)
		info := r.errorInfo(t)
		if r.status != http.StatusConflict || info.Code != protocol.CodeOperationInProgress || !info.Retryable {
			t.Errorf("same key while pending (stream %v): %d %s; want 409 OPERATION_IN_PROGRESS retryable", stream, r.status, r.body)
		}
	}
	if r := env.post(t, idemAlice, keyed("other", "pending-1"), false); r.status != http.StatusConflict || r.errorInfo(t).Code != protocol.CodeIdempotencyConflict {
		t.Errorf("other request while pending: %d %s; want IDEMPOTENCY_CONFLICT", r.status, r.body)
	}
	cancel() // the client goes away: run.cancelled
	resp.Body.Close()
	waitFor(t, "the run to end", func() bool { return env.engine.Running() == 0 })

	r := env.post(t, idemAlice, body, false)
	if info := r.errorInfo(t); info.Code != protocol.CodeCancelled || r.status != protocol.HTTPStatus(protocol.CodeCancelled) {
		t.Errorf("replay of the cancelled run: %d %s; want CANCELLED", r.status, r.body)
	}
	s := env.post(t, idemAlice, body, true)
	if typ, info := s.terminal(t); typ != "run.cancelled" || info.Code != protocol.CodeCancelled || s.frames[0].typ != "run.started" {
		t.Errorf("stream replay of the cancelled run: %s", framesString(s.frames))
	}
	if n := env.provider.calls.Load(); n != 1 {
		t.Errorf("provider turns %d, want 1", n)
	}
}

// A recorded failure replays as that failure, with its status.
func TestIdempotencyFailureReplays(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	body := keyed("fail", "f-1")
	first := env.post(t, idemAlice, body, false)
	again := env.post(t, idemAlice, body, false)
	if first.status != protocol.HTTPStatus(protocol.CodeProviderFailed) || again.status != first.status || !bytes.Equal(again.body, first.body) {
		t.Errorf("failure %d %s, replay %d %s", first.status, first.body, again.status, again.body)
	}
	if n := env.provider.calls.Load(); n != 1 {
		t.Errorf("provider turns %d, want 1", n)
	}
}

// Validation and authorization come before the key: a refused request
// claims nothing, and the key stays free.
func TestIdempotencyValidationFirst(t *testing.T) {
	env := newIdemEnv(t, idemOptions{})
	for _, tc := range []struct {
		token, body string
		code        protocol.Code
	}{
		{idemAlice, keyed("x", "v-1", `"tools":["nope"]`), protocol.CodeUnknownTool},
		{idemAlice, `{"provider":"zz","model":"m","input":"x","idempotencyKey":"v-1"}`, protocol.CodeUnknownProvider},
		{idemBob, keyed("x", "v-1", `"tools":["conformance_lookup"]`), protocol.CodeForbidden},
	} {
		if r := env.post(t, tc.token, tc.body, false); r.errorInfo(t).Code != tc.code {
			t.Errorf("%s: %d %s; want %s", tc.body, r.status, r.body, tc.code)
		}
	}
	if r := env.post(t, idemAlice, keyed("x", "v-1"), false); r.status != http.StatusOK {
		t.Errorf("the key after refusals: %d %s; want a fresh run", r.status, r.body)
	}
	if n := env.provider.calls.Load(); n != 1 {
		t.Errorf("provider turns %d, want 1", n)
	}
}

// Without an operation store a key is IDEMPOTENCY_UNAVAILABLE and the
// feature is not advertised.
func TestIdempotencyUnavailable(t *testing.T) {
	env := newIdemEnv(t, idemOptions{off: true})
	r := env.post(t, idemAlice, keyed("x", "k"), false)
	if r.status != http.StatusBadRequest || r.errorInfo(t).Code != protocol.CodeIdempotencyUnavailable {
		t.Errorf("key without a store: %d %s", r.status, r.body)
	}
	if n := env.provider.calls.Load(); n != 0 {
		t.Errorf("provider turns %d, want 0", n)
	}
	on := newIdemEnv(t, idemOptions{})
	for _, e := range []struct {
		env  *idemEnv
		want bool
	}{{env, false}, {on, true}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.env.url+"/v1/protocol", nil)
		req.Header.Set("Authorization", "Bearer "+idemAlice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc protocolDoc
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		has := false
		for _, f := range doc.Features {
			has = has || f == "idempotency"
		}
		if has != e.want {
			t.Errorf("features %v: idempotency advertised %v, want %v", doc.Features, has, e.want)
		}
	}
}

// A replay passes admission first (BUSY when the subject's slots are
// taken) but takes no slot; a new key refused as BUSY gives its key back.
func TestIdempotencyAdmission(t *testing.T) {
	env := newIdemEnv(t, idemOptions{maxPerSubject: 1})
	done := keyed("x", "adm-done")
	if r := env.post(t, idemAlice, done, false); r.status != http.StatusOK {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	resp := env.start(t, ctx, idemAlice, keyed("conformance:cancel", "adm-pending"), true)
	<-env.provider.pending

	if r := env.post(t, idemAlice, done, false); r.status != http.StatusTooManyRequests || r.errorInfo(t).Code != protocol.CodeBusy {
		t.Errorf("replay while alice's slot is taken: %d %s; want 429 BUSY", r.status, r.body)
	}
	if r := env.post(t, idemAlice, keyed("y", "adm-new"), false); r.errorInfo(t).Code != protocol.CodeBusy {
		t.Errorf("new key while alice's slot is taken: %d %s; want BUSY", r.status, r.body)
	}
	if r := env.post(t, idemBob, keyed("x", "adm-done"), false); r.status != http.StatusOK {
		t.Errorf("bob is not busy: %d %s", r.status, r.body)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the run to end", func() bool { return env.engine.Running() == 0 })

	calls := env.provider.calls.Load()
	if r := env.post(t, idemAlice, done, false); r.status != http.StatusOK {
		t.Errorf("replay once free: %d %s", r.status, r.body)
	}
	if r := env.post(t, idemAlice, keyed("y", "adm-new"), false); r.status != http.StatusOK {
		t.Errorf("the key refused as BUSY, now: %d %s; want a fresh run", r.status, r.body)
	}
	if got := env.provider.calls.Load(); got != calls+1 {
		t.Errorf("provider turns %d, want %d", got, calls+1)
	}
}

// faultyStore fails chosen operations of a memory store.
type faultyStore struct {
	*durable.Memory
	mu sync.Mutex
	// failAppend fails an append whose record contains it (once, or
	// every later append too when sticky).
	failAppend string
	sticky     bool
	failing    bool
	full       bool // Create reports a full store
}

var errInjected = errors.New("injected store failure")

func (f *faultyStore) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if f.full {
		return 0, durable.ErrFull
	}
	return f.Memory.Create(ctx, key, value)
}

func (f *faultyStore) Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (uint64, error) {
	f.mu.Lock()
	fail := f.failing
	if f.failAppend != "" && !fail {
		for _, r := range recs {
			if bytes.Contains(r, []byte(f.failAppend)) {
				fail = true
				f.failing = f.sticky
			}
		}
	}
	f.mu.Unlock()
	if fail {
		return 0, errInjected
	}
	return f.Memory.Append(ctx, log, expectLast, recs...)
}

// A store failure mid-run ends the run with OPERATION_STORE_ERROR
// (uncertain); a failed tool.called commit means the tool never runs.
// The record then replays what it holds: the failure when the store took
// it, OPERATION_UNCERTAIN when it did not.
func TestIdempotencyStoreFailureMidRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sticky bool
		replay protocol.Code
	}{
		{"once", false, protocol.CodeOperationStoreError},
		{"from then on", true, protocol.CodeOperationUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &faultyStore{Memory: durable.NewMemory(), failAppend: `"type":"tool.called"`, sticky: tc.sticky}
			env := newIdemEnv(t, idemOptions{store: st})
			// A JSON run holds its first events and commits them with
			// tool.called: the failure is the same, and the tool never runs.
			jbody := keyed("conformance:tools", "sf-json", `"tools":["conformance_lookup"]`)
			j := env.post(t, idemAlice, jbody, false)
			if info := j.errorInfo(t); j.status != http.StatusServiceUnavailable || info.Code != protocol.CodeOperationStoreError || info.Outcome != "uncertain" || info.Retryable {
				t.Fatalf("JSON run: %d %s; want 503 OPERATION_STORE_ERROR uncertain", j.status, j.body)
			}
			if n := env.tools.calls.Load(); n != 0 {
				t.Errorf("tool ran %d times after its tool.called failed to commit", n)
			}
			st.mu.Lock()
			st.failing = false
			st.mu.Unlock()
			if j := env.post(t, idemAlice, jbody, false); j.errorInfo(t).Code != tc.replay {
				t.Errorf("JSON run's replay: %d %s; want %s", j.status, j.body, tc.replay)
			}
			st.mu.Lock()
			st.failAppend = `"type":"tool.called"`
			st.mu.Unlock()

			body := keyed("conformance:tools", "sf-1", `"tools":["conformance_lookup"]`)
			r := env.post(t, idemAlice, body, true)
			typ, info := r.terminal(t)
			if typ != "run.failed" || info.Code != protocol.CodeOperationStoreError || info.Outcome != "uncertain" || info.Retryable {
				t.Fatalf("run: %s %+v; want run.failed OPERATION_STORE_ERROR uncertain", typ, info)
			}
			for _, f := range r.frames {
				if f.typ == "tool.called" {
					t.Error("an uncommitted tool.called was delivered")
				}
			}
			if n := env.tools.calls.Load(); n != 0 {
				t.Errorf("tool ran %d times after its tool.called failed to commit", n)
			}
			st.mu.Lock()
			st.failAppend, st.failing = "", false
			st.mu.Unlock()
			again := env.post(t, idemAlice, body, true)
			typ, info = again.terminal(t)
			if typ != "run.failed" || info.Code != tc.replay || info.Outcome != "uncertain" {
				t.Errorf("replay: %s %+v; want %s uncertain", framesString(again.frames), info, tc.replay)
			}
			if got := compactOf(r.frames); tc.replay == protocol.CodeOperationStoreError {
				sameFrames(t, "replay", again.frames, got)
			} else {
				sameFrames(t, "replay without the terminal", again.frames[:len(again.frames)-1], got[:len(got)-1])
			}
			js := env.post(t, idemAlice, body, false)
			if js.errorInfo(t).Code != tc.replay || js.status != protocol.HTTPStatus(tc.replay) {
				t.Errorf("JSON replay: %d %s", js.status, js.body)
			}
			if n := env.provider.calls.Load(); n != 2 {
				t.Errorf("provider turns %d, want 2 (one per run)", n)
			}
		})
	}
}

// A full store at the claim: OPERATION_STORE_FULL, nothing runs.
func TestIdempotencyStoreFull(t *testing.T) {
	env := newIdemEnv(t, idemOptions{store: &faultyStore{Memory: durable.NewMemory(), full: true}})
	r := env.post(t, idemAlice, keyed("x", "full-1"), true)
	if r.status != http.StatusServiceUnavailable || r.errorInfo(t).Code != protocol.CodeOperationStoreFull {
		t.Errorf("claim on a full store: %d %s", r.status, r.body)
	}
	if n := env.provider.calls.Load(); n != 0 {
		t.Errorf("provider turns %d, want 0", n)
	}
}

// The record bound at its edge: the JSON of the recorded events (all but
// text.delta, run.progress and the terminal one) plus the result.
func TestIdempotencyRecordLimit(t *testing.T) {
	probe := newIdemEnv(t, idemOptions{})
	body := keyed("conformance:tools", "rl-1", `"tools":["conformance_lookup"]`)
	r := probe.post(t, idemAlice, body, true)
	size := 0
	for _, f := range r.frames {
		switch f.typ {
		case "text.delta", "run.progress":
		case "run.completed":
			var ev struct{ Result json.RawMessage }
			json.Unmarshal(f.data, &ev)
			size += len(ev.Result) // no HTML-sensitive characters in this one
		default:
			size += len(f.data)
		}
	}

	at := newIdemEnv(t, idemOptions{maxRecord: size})
	if r := at.post(t, idemAlice, body, true); r.status != 200 || r.frames[len(r.frames)-1].typ != "run.completed" {
		t.Fatalf("run at the bound (%d bytes): %s %s", size, framesString(r.frames), r.body)
	}
	if r := at.post(t, idemAlice, body, false); r.status != 200 {
		t.Errorf("replay at the bound: %d %s", r.status, r.body)
	}

	over := newIdemEnv(t, idemOptions{maxRecord: size - 1})
	r = over.post(t, idemAlice, body, true)
	typ, info := r.terminal(t)
	if typ != "run.failed" || info.Code != protocol.CodeOperationRecordLimit || info.Outcome != "uncertain" {
		t.Fatalf("run one byte over the bound: %s %+v", framesString(r.frames), info)
	}
	js := over.post(t, idemAlice, body, false)
	if js.status != http.StatusServiceUnavailable || js.errorInfo(t).Code != protocol.CodeOperationRecordLimit {
		t.Errorf("replay of the record-limit failure: %d %s", js.status, js.body)
	}
	if n := over.tools.calls.Load(); n != 1 {
		t.Errorf("tool calls %d, want 1", n)
	}

	// A bound below run.started refuses the run before it starts: nothing
	// ran, the HTTP error says so, and the key is free again.
	tiny := newIdemEnv(t, idemOptions{maxRecord: 10})
	r = tiny.post(t, idemAlice, body, true)
	if r.status != http.StatusServiceUnavailable || r.errorInfo(t).Code != protocol.CodeOperationRecordLimit || r.errorInfo(t).Outcome != "" {
		t.Errorf("run under a 10-byte bound: %d %s", r.status, r.body)
	}
	if n := tiny.provider.calls.Load(); n != 0 {
		t.Errorf("provider turns %d, want 0", n)
	}
}

// A claim another process holds (or held when it crashed) is never taken
// over: it replays what it recorded, then OPERATION_UNCERTAIN.
func TestIdempotencyOtherProcessUncertain(t *testing.T) {
	st := durable.NewMemory()
	first := newIdemEnv(t, idemOptions{store: st})
	body := keyed("conformance:cancel", "op-1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := first.start(t, ctx, idemAlice, body, true)
	defer resp.Body.Close()
	<-first.provider.pending

	second := newIdemEnv(t, idemOptions{store: st}) // another process on the same store
	s := second.post(t, idemAlice, body, true)
	var types []string
	for _, f := range s.frames {
		types = append(types, f.typ)
	}
	if typ, info := s.terminal(t); typ != "run.failed" || info.Code != protocol.CodeOperationUncertain || info.Outcome != "uncertain" || info.Retryable ||
		strings.Join(types, ",") != "run.started,step.started,run.failed" {
		t.Errorf("other process's pending claim: %v %+v", types, info)
	}
	j := second.post(t, idemAlice, body, false)
	if info := j.errorInfo(t); j.status != http.StatusConflict || info.Code != protocol.CodeOperationUncertain || info.Outcome != "uncertain" {
		t.Errorf("JSON: %d %s", j.status, j.body)
	}
	if n := second.provider.calls.Load(); n != 0 {
		t.Errorf("the second process ran the claim %d times", n)
	}
}

// BenchmarkIdempotencyJSONRun: what the feature costs a JSON run. "unkeyed"
// alternates rounds of runs without a key on a host with the feature on
// and on one with it off, and reports on/off (the time ratio; 1.00 is
// "pays nothing"). "keyed" is a run with a new key each time, on the
// in-memory store and on the Badger store with its synced group commits,
// for the cost of a claimed, recorded run.
func BenchmarkIdempotencyJSONRun(b *testing.B) {
	body := `{"provider":"p","model":"m","input":"conformance:text"}`
	for _, c := range benchConcurrency {
		b.Run("unkeyed/c"+itoa(c), func(b *testing.B) {
			on := newIdemEnv(b, idemOptions{maxPerSubject: 32})
			off := newIdemEnv(b, idemOptions{maxPerSubject: 32, off: true})
			hc := benchClient()
			defer hc.CloseIdleConnections()
			op := func(url string) func(int) error {
				return func(int) error { return postRun(hc, url, idemAlice, body, false) }
			}
			var onT, offT time.Duration
			b.ResetTimer()
			for i, n := range benchRounds(b.N, 10) {
				if i%2 == 1 { // either side goes first half of the time
					offT += timeOps(b, c, n, op(off.url))
				}
				b.StartTimer()
				onT += timeOps(b, c, n, op(on.url))
				b.StopTimer()
				if i%2 == 0 {
					offT += timeOps(b, c, n, op(off.url))
				}
			}
			b.ReportMetric(onT.Seconds()/offT.Seconds(), "on/off")
		})
	}
	for _, backend := range []string{"memory", "badger"} {
		for _, c := range benchConcurrency {
			b.Run("keyed/"+backend+"/c"+itoa(c), func(b *testing.B) {
				var st durable.Store = durable.NewMemory()
				if backend == "badger" {
					bs, err := store.Open(b.TempDir(), store.Options{})
					if err != nil {
						b.Fatal(err)
					}
					defer bs.Close()
					st = bs
				}
				env := newIdemEnv(b, idemOptions{maxPerSubject: 32, store: st})
				hc := benchClient()
				defer hc.CloseIdleConnections()
				var next atomic.Int64
				b.ResetTimer()
				timeOps(b, c, b.N, func(int) error {
					k := strconv.FormatInt(next.Add(1), 10)
					return postRun(hc, env.url, idemAlice, `{"provider":"p","model":"m","input":"conformance:text","idempotencyKey":"k`+k+`"}`, false)
				})
			})
		}
	}
}

// timeOps runs n ops from c goroutines and returns the wall time.
func timeOps(b *testing.B, c, n int, op func(int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(t0)
}

// benchRounds splits n ops into k rounds.
func benchRounds(n, k int) []int {
	k = max(1, min(n, k))
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}

// A keyed session turn (wire-extensions §3.5): the replay returns the
// recorded outcome without moving the revision forward, needs the current
// continue grant, and cannot bring back a deleted session.
func TestIdempotencySessionTurnReplay(t *testing.T) {
	prov := &sessProvider{started: make(chan struct{}, 4)}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{ID: "hist", Vendor: "test", AuthMode: "none", AccountID: "acct", Models: []string{"m"},
			Capabilities: map[string]bool{"historyContinuation": true, "textStreaming": true}, Provider: prov}},
		IdempotencyKeys: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := durable.NewMemory()
	m, err := sessions.New(context.Background(), st, sessions.Config{Retention: time.Hour, HostID: "host-1", Providers: eng.Providers()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close) // after the server's shutdown (cleanups run last first)
	keys, err := idempotency.New(st, idempotency.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"sessions.create", "sessions.read", "sessions.continue", "sessions.delete"}
	url := serveIdem(t, NewServer(ServerOptions{Engine: eng, Sessions: m, Idempotency: keys, Tokens: []Token{
		{ID: "a", Subject: "alice", Secret: sessAlice, Providers: []string{"hist"}, Ops: all},
		{ID: "n", Subject: "alice", Secret: sessNoGrants, Providers: []string{"hist"}, Ops: []string{"sessions.read"}},
	}}))
	env := &sessEnv{url: url, prov: prov, kv: st, m: m}

	sess := env.create(t, sessAlice, "hist", "history")
	rev := sess.Session.Revision
	body := sessBody("hist", "hello", sess.Session.ID, rev, `,"idempotencyKey":"turn-1"`)
	status, first := env.post(t, sessAlice, "/v1/runs", body, "")
	if status != http.StatusOK {
		t.Fatalf("turn: %d %s", status, first)
	}
	after := env.state(t, sess.Session.ID).Revision
	if after != rev+1 {
		t.Fatalf("revision after the turn %d, want %d", after, rev+1)
	}
	prov.mu.Lock()
	turns := len(prov.seen)
	prov.mu.Unlock()

	status, again := env.post(t, sessAlice, "/v1/runs", body, "")
	if status != http.StatusOK || !bytes.Equal(again, first) {
		t.Errorf("replay: %d %s, want %s", status, again, first)
	}
	if got := env.state(t, sess.Session.ID).Revision; got != after {
		t.Errorf("revision after the replay %d, want %d (not moved)", got, after)
	}
	prov.mu.Lock()
	if len(prov.seen) != turns {
		t.Errorf("the replay called the provider")
	}
	prov.mu.Unlock()

	status, b := env.post(t, sessNoGrants, "/v1/runs", body, "")
	wantError(t, "replay without the continue grant", status, b, http.StatusForbidden, protocol.CodeForbidden)

	if err := env.client(t, sessAlice).DeleteSession(t.Context(), sess.Session.ID); err != nil {
		t.Fatal(err)
	}
	status, b = env.post(t, sessAlice, "/v1/runs", body, "")
	wantError(t, "replay of a deleted session's turn", status, b, http.StatusNotFound, protocol.CodeSessionNotFound)
}
