package host

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"adhost/abi"
	"adhost/client"
	"adhost/runtime"
	"adhost/runtime/approvals"
	"adhost/runtime/apptools"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// The interactive-approvals and application-tools flows over real HTTP:
// a provider that calls the tool its input names, a gated host tool that
// counts its runs, and the decision and tool-execution endpoints.

const (
	reviewToken   = "review-token-0123456789abcdef0123456789abcdef"
	outsiderToken = "outsider-token-0123456789abcdef0123456789abcd"
	gatedTool     = "gated"
	appTool       = "lookup"
)

// callingProvider answers "call:NAME:ARGS" with one call of NAME, then,
// given the tool's output, with the text "done:OUTPUT"; ARGS "big:N" are
// arguments of N bytes.
type callingProvider struct{}

func (callingProvider) Complete(_ context.Context, in *abi.CompleteInput, _ runtime.TurnSink) (*abi.CompleteOutput, error) {
	last := in.Messages[len(in.Messages)-1]
	if last.Role == abi.RoleTool {
		return &abi.CompleteOutput{Text: "done:" + last.Content}, nil
	}
	rest, ok := strings.CutPrefix(last.Content, "call:")
	if !ok {
		return &abi.CompleteOutput{Text: "no call"}, nil
	}
	name, args, _ := strings.Cut(rest, ":")
	if n, ok := strings.CutPrefix(args, "big:"); ok {
		// Arguments larger than an input may be: {"q":"xx…"} of n bytes.
		size, _ := strconv.Atoi(n)
		args = `{"q":"` + strings.Repeat("x", size-8) + `"}`
	}
	return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}}}, nil
}

func (callingProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{testModel}, Complete: true}, nil
}

// countingTools is the host tool "gated": it echoes its arguments and
// counts its invocations.
type countingTools struct{ runs atomic.Int32 }

func (*countingTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }

func (c *countingTools) Invoke(_ context.Context, call abi.ToolCall, _ func()) (json.RawMessage, error) {
	c.runs.Add(1)
	return call.Arguments, nil
}

// flakyLogs fails every append once failAfter appends have succeeded
// (failAfter < 0: never).
type flakyLogs struct {
	durable.Logs
	mu        sync.Mutex
	failAfter int
}

func (f *flakyLogs) Append(ctx context.Context, log string, last uint64, recs ...[]byte) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAfter == 0 {
		return 0, errors.New("disk full")
	}
	f.failAfter--
	return f.Logs.Append(ctx, log, last, recs...)
}

type reviewEnv struct {
	ts     *httptest.Server
	tools  *countingTools
	audit  *flakyLogs
	store  *durable.Memory
	review *approvals.Service
	apps   *apptools.Service
}

type reviewOptions struct {
	maxApprovals, maxExecutions int
	failAuditAfter              int // appends before the audit log fails; 0: never fails
	appReview                   bool
	noIdlePause                 bool
	hook                        runtime.ApprovalHook
}

func newReviewEnv(t *testing.T, o reviewOptions) *reviewEnv {
	t.Helper()
	env := &reviewEnv{tools: &countingTools{}, store: durable.NewMemory()}
	env.audit = &flakyLogs{Logs: env.store, failAfter: -1}
	if o.failAuditAfter > 0 {
		env.audit.failAfter = o.failAuditAfter - 1
	}
	env.review = approvals.New(approvals.Config{AllowIdlePause: !o.noIdlePause, MaxPending: o.maxApprovals, Audit: env.audit})
	env.apps = apptools.New(apptools.Config{RequireApproval: o.appReview, MaxPending: o.maxExecutions})
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: testProvider, Name: "Calling", Vendor: "test", AuthMode: "none",
			Models:       []string{testModel},
			Capabilities: map[string]bool{"tools": true},
			UsageSource:  "synthetic",
			Provider:     callingProvider{},
		}},
		Tools: []*runtime.Tool{{
			Def:              abi.ToolDef{Name: gatedTool, Description: "a tool with effects", InputSchema: json.RawMessage(`{"type":"object"}`)},
			RequiresApproval: true,
			Set:              env.tools,
		}},
		Reviewer:         env.review,
		ApplicationTools: env.apps,
		ApprovalHook:     o.hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	noReview := map[string]bool{appTool: false}
	s := NewServer(ServerOptions{
		Engine: eng,
		Tokens: []Token{
			{ID: "t1", Subject: "alice", Secret: testToken, Providers: []string{testProvider}, Tools: []string{gatedTool},
				ApproveTools: []string{gatedTool, appTool}, AppTools: noReview},
			// The same subject's reviewer without the approve grant.
			{ID: "t2", Subject: "alice", Secret: reviewToken, Providers: []string{testProvider}},
			// Another subject holding every grant.
			{ID: "t3", Subject: "mallory", Secret: outsiderToken, Providers: []string{testProvider}, Tools: []string{gatedTool},
				ApproveTools: []string{gatedTool, appTool}, AppTools: noReview},
		},
		Features:   []string{"application-tools", "interactive-approvals"},
		Approvals:  env.review,
		Executions: env.apps,
	})
	s.SetReady()
	env.ts = httptest.NewServer(s)
	t.Cleanup(func() {
		env.ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
	return env
}

func (e *reviewEnv) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.ts.URL, client.WithToken(token), client.WithHTTPClient(e.ts.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gatedRun(args string, approvals json.RawMessage) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "call:" + gatedTool + ":" + args,
		Tools: []string{gatedTool}, Approvals: approvals}
}

// streamUntil streams req; at each approval or execution request it
// calls on, whose error stops the stream. It returns the run's outcome and
// the event types seen.
func streamUntil(t *testing.T, c *client.Client, req *protocol.RunRequest, on func(ev client.Event) error) (*protocol.RunResult, []string, error) {
	t.Helper()
	var types []string
	res, err := c.Stream(t.Context(), req, func(ev client.Event) error {
		types = append(types, ev.Type)
		if ev.Approval != nil || ev.Execution != nil {
			return on(ev)
		}
		return nil
	})
	return res, types, err
}

func codeOf(err error) protocol.Code { return client.CodeOf(err) }

func TestApprovalApprove(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	args := `{"title":"North","tags":["a","b"],"n":1}`
	var receipt *client.ApprovalResolution
	res, types, err := streamUntil(t, alice, gatedRun(args, client.Approvals("pause", 0)), func(ev client.Event) error {
		a := ev.Approval
		if a.ExpiresAt != nil || a.IdlePolicy != "pause" || a.Call.Name != gatedTool || string(a.Call.Arguments) != args {
			t.Errorf("approval.requested = %+v", a)
		}
		if env.tools.runs.Load() != 0 {
			t.Error("the tool ran before the decision")
		}
		// Object key order does not count; every value does.
		a.Call.Arguments = json.RawMessage(`{"n":1.0,"tags":["a","b"],"title":"North"}`)
		var err error
		receipt, err = alice.DecideApproval(t.Context(), a, client.DecisionApprove)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run.started", "step.started", "tool.called", "approval.requested", "approval.resolved", "tool.completed", "step.started", "text.delta", "run.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("events = %v", types)
	}
	if res.Text != "done:"+args || env.tools.runs.Load() != 1 || receipt.Outcome != "approved" {
		t.Errorf("text %q, tool runs %d, receipt %+v", res.Text, env.tools.runs.Load(), receipt)
	}
	if env.review.Pending() != 0 {
		t.Errorf("%d approvals still pending", env.review.Pending())
	}
	// The audit log holds the request and the resolution.
	recs, err := env.store.Read(t.Context(), approvals.AuditLogName(time.Now().UTC().Format("2006-01-02")), 0, 0, 0)
	if err != nil || len(recs) != 2 || !strings.Contains(string(recs[0].Data), `"approval.requested"`) ||
		!strings.Contains(string(recs[1].Data), `"outcome":"approved"`) {
		t.Errorf("audit = %d records, %v", len(recs), err)
	}
}

// TestApprovalRefusals: every decision that is not a valid approve of the
// exact pending call leaves the tool unrun — another subject, a reviewer
// without the grant, altered arguments, another run — and none of those
// consumes the approval; deny then fails the run and a repeat is
// APPROVAL_NOT_FOUND.
func TestApprovalRefusals(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice, reviewer, outsider := env.client(t, testToken), env.client(t, reviewToken), env.client(t, outsiderToken)
	var pending *client.ApprovalRequest
	_, types, err := streamUntil(t, alice, gatedRun(`{"x":[1,2]}`, client.Approvals("continue", 0)), func(ev client.Event) error {
		a := *ev.Approval
		pending = &a
		check := func(what string, c *client.Client, req *client.ApprovalRequest, want protocol.Code) {
			if _, err := c.DecideApproval(t.Context(), req, client.DecisionApprove); codeOf(err) != want {
				t.Errorf("%s: %v, want %s", what, err, want)
			}
		}
		check("another subject", outsider, &a, protocol.CodeApprovalNotFound)
		check("no approve grant", reviewer, &a, protocol.CodeForbidden)
		altered := a
		altered.Call.Arguments = json.RawMessage(`{"x":[2,1]}`)
		check("array order", alice, &altered, protocol.CodeApprovalMismatch)
		altered.Call.Arguments = json.RawMessage(`{"x":[1,2],"y":0}`)
		check("extra argument", alice, &altered, protocol.CodeApprovalMismatch)
		other := a
		other.RunID = "c41f9a70-2b3e-4d58-8e6a-91b0d7c3f245"
		check("another run", alice, &other, protocol.CodeApprovalMismatch)
		unknown := a
		unknown.ApprovalID = "0d9c7a61-44e2-4b8f-b1a3-6e5f2c7d8a90"
		check("unknown id", alice, &unknown, protocol.CodeApprovalNotFound)
		_, err := alice.DecideApproval(t.Context(), &a, client.DecisionDeny)
		return err
	})
	if codeOf(err) != protocol.CodeApprovalDenied || env.tools.runs.Load() != 0 {
		t.Fatalf("run: %v, tool runs %d", err, env.tools.runs.Load())
	}
	if types[len(types)-2] != "approval.resolved" || types[len(types)-1] != "run.failed" {
		t.Errorf("events = %v", types)
	}
	if _, err := alice.DecideApproval(t.Context(), pending, client.DecisionApprove); codeOf(err) != protocol.CodeApprovalNotFound {
		t.Errorf("reused decision: %v", err)
	}
}

func TestApprovalMalformedDecisions(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	for _, body := range []string{
		`{}`, `[]`, `{"approvalId":"a","runId":"r","call":{"id":"c","name":"gated","arguments":{}},"decision":"maybe"}`,
		`{"approvalId":"","runId":"r","call":{"id":"c","name":"gated","arguments":{}},"decision":"approve"}`,
		`{"approvalId":"a","runId":"r","call":{"id":"c","name":"gated","arguments":[]},"decision":"approve"}`,
		`{"approvalId":"a","runId":"r","call":{"id":"c","name":"bad/name","arguments":{}},"decision":"approve"}`,
		`{"approvalId":"a","runId":"r","call":{"id":"c","name":"gated","arguments":{},"extra":1},"decision":"approve"}`,
		`{"approvalId":"a","runId":"r","call":{"id":"c","name":"gated","arguments":{"n":1e400}},"decision":"approve"}`,
		`{"approvalId":"a","runId":null,"call":{"id":"c","name":"gated","arguments":{}},"decision":"approve"}`,
		`{"approvalId":"` + strings.Repeat("a", 257) + `","runId":"r","call":{"id":"c","name":"gated","arguments":{}},"decision":"approve"}`,
	} {
		resp := postJSON(t, env.ts.URL+"/v1/approvals/decisions", testToken, body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(readAll(t, resp), `"INVALID_APPROVAL"`) {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	// The id bound at its edge is a well-formed (unknown) approval.
	edge := `{"approvalId":"` + strings.Repeat("a", 256) + `","runId":"r","call":{"id":"c","name":"gated","arguments":{}},"decision":"approve"}`
	if resp := postJSON(t, env.ts.URL+"/v1/approvals/decisions", testToken, edge); resp.StatusCode != http.StatusNotFound {
		t.Errorf("256-unit id: status %d", resp.StatusCode)
	}
}

func postJSON(t *testing.T, url, token, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestApprovalExpiry(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	var pending *client.ApprovalRequest
	_, types, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", time.Millisecond)), func(ev client.Event) error {
		a := *ev.Approval
		pending = &a
		if a.ExpiresAt == nil || !a.ExpiresAt.Equal(a.RequestedAt.Add(time.Millisecond)) {
			t.Errorf("expiresAt = %v, requestedAt %v", a.ExpiresAt, a.RequestedAt)
		}
		return nil
	})
	if codeOf(err) != protocol.CodeApprovalExpired || env.tools.runs.Load() != 0 {
		t.Fatalf("run: %v (events %v), tool runs %d", err, types, env.tools.runs.Load())
	}
	if _, err := alice.DecideApproval(t.Context(), pending, client.DecisionApprove); codeOf(err) != protocol.CodeApprovalNotFound {
		t.Errorf("late decision: %v", err)
	}
}

func TestApprovalCancelDecision(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	_, types, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(ev client.Event) error {
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionCancel)
		return err
	})
	if codeOf(err) != protocol.CodeCancelled || types[len(types)-1] != "run.cancelled" || env.tools.runs.Load() != 0 {
		t.Fatalf("run: %v (events %v), tool runs %d", err, types, env.tools.runs.Load())
	}
}

// TestApprovalCapacity: with max_pending 1 a second run's gated call
// fails APPROVAL_CAPACITY while the first waits, and once the first is
// settled the next one is admitted again.
func TestApprovalCapacity(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{maxApprovals: 1})
	alice := env.client(t, testToken)
	_, _, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(ev client.Event) error {
		_, _, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(client.Event) error {
			t.Error("a second approval was requested beyond max_pending")
			return nil
		})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != protocol.CodeApprovalCapacity || !ce.Retryable {
			t.Errorf("second run: %v", err)
		}
		_, err = alice.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(ev client.Event) error {
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove)
		return err
	})
	if err != nil || env.tools.runs.Load() != 2 {
		t.Errorf("after the first settled: %v, tool runs %d", err, env.tools.runs.Load())
	}
}

// TestApprovalAuditFailure: a request that cannot be recorded is never
// shown, a decision that cannot be recorded authorizes nothing, and the
// tool runs in neither case.
func TestApprovalAuditFailure(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{failAuditAfter: 1})
	alice := env.client(t, testToken)
	_, types, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(client.Event) error {
		t.Error("an unrecorded approval was requested")
		return nil
	})
	if codeOf(err) != protocol.CodeApprovalAuditFailed || env.tools.runs.Load() != 0 {
		t.Fatalf("request not recorded: %v (events %v)", err, types)
	}

	env = newReviewEnv(t, reviewOptions{failAuditAfter: 2}) // the request is recorded, the decision is not
	alice = env.client(t, testToken)
	_, _, err = streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(ev client.Event) error {
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != protocol.CodeApprovalAuditFailed || ce.Status != 503 {
			t.Errorf("decision: %v", err)
		}
		return nil
	})
	if codeOf(err) != protocol.CodeApprovalAuditFailed || env.tools.runs.Load() != 0 {
		t.Fatalf("decision not recorded: run %v, tool runs %d", err, env.tools.runs.Load())
	}
}

func TestApprovalValidation(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{noIdlePause: true})
	alice := env.client(t, testToken)
	// No approval path: fail closed.
	if _, _, err := streamUntil(t, alice, gatedRun(`{}`, nil), nil); codeOf(err) != protocol.CodeApprovalRequired {
		t.Errorf("no approvals option: %v", err)
	}
	if _, err := alice.Run(t.Context(), gatedRun(`{}`, client.Approvals("continue", 0))); codeOf(err) != protocol.CodeApprovalStreamRequired {
		t.Errorf("JSON run: %v", err)
	}
	if _, _, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), nil); codeOf(err) != protocol.CodeApprovalPolicy {
		t.Errorf("pause forbidden: %v", err)
	}
	bad := gatedRun(`{}`, json.RawMessage(`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":0}`))
	if _, _, err := streamUntil(t, alice, bad, nil); codeOf(err) != protocol.CodeInvalidRequest {
		t.Errorf("expiresAfterMs 0: %v", err)
	}
	if env.tools.runs.Load() != 0 {
		t.Errorf("tool runs %d", env.tools.runs.Load())
	}
}

// TestApprovalIdlePolicy: under "pause" a decision may take longer than
// the run's idle interval, and the interval restarts in full once it
// settles; under "continue" the idle clock keeps running, the run ends
// IDLE_TIMEOUT and its approval is gone.
func TestApprovalIdlePolicy(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	idle := int64(300)
	req := gatedRun(`{}`, client.Approvals("pause", 0))
	req.IdleTimeoutMs = &idle
	_, _, err := streamUntil(t, alice, req, func(ev client.Event) error {
		time.Sleep(900 * time.Millisecond) // three idle intervals
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove)
		return err
	})
	if err != nil || env.tools.runs.Load() != 1 {
		t.Fatalf("pause: %v, tool runs %d", err, env.tools.runs.Load())
	}
	req = gatedRun(`{}`, client.Approvals("continue", 0))
	req.IdleTimeoutMs = &idle
	var pending *client.ApprovalRequest
	_, types, err := streamUntil(t, alice, req, func(ev client.Event) error {
		a := *ev.Approval
		pending = &a
		return nil
	})
	if codeOf(err) != protocol.CodeIdleTimeout || types[len(types)-1] != "run.cancelled" || env.tools.runs.Load() != 1 {
		t.Fatalf("continue: %v, events %v", err, types)
	}
	if _, err := alice.DecideApproval(t.Context(), pending, client.DecisionApprove); codeOf(err) != protocol.CodeApprovalNotFound {
		t.Errorf("decision after the idle timeout: %v", err)
	}
}

// TestApprovalHostHook: the host's own approval callback is asked first;
// its denial is APPROVAL_REQUIRED before any approval is requested, and a
// decision cannot override it; its consent still leaves the interactive
// decision to the reviewer.
func TestApprovalHostHook(t *testing.T) {
	var allow atomic.Bool
	env := newReviewEnv(t, reviewOptions{hook: runtime.ApprovalFunc(func(context.Context, *runtime.ApprovalRequest) (bool, error) {
		return allow.Load(), nil
	})})
	alice := env.client(t, testToken)
	_, types, err := streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(client.Event) error {
		t.Error("an approval was requested after the host denied the call")
		return nil
	})
	if codeOf(err) != protocol.CodeApprovalRequired || env.tools.runs.Load() != 0 {
		t.Fatalf("host denies: %v, events %v", err, types)
	}
	allow.Store(true)
	_, _, err = streamUntil(t, alice, gatedRun(`{}`, client.Approvals("pause", 0)), func(ev client.Event) error {
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionDeny)
		return err
	})
	if codeOf(err) != protocol.CodeApprovalDenied || env.tools.runs.Load() != 0 {
		t.Fatalf("host allows, reviewer denies: %v", err)
	}
	// With the host's consent and no interactive policy the hook decides.
	if _, _, err := streamUntil(t, alice, gatedRun(`{}`, nil), nil); err != nil || env.tools.runs.Load() != 1 {
		t.Errorf("host allows, no approvals option: %v, tool runs %d", err, env.tools.runs.Load())
	}
}
