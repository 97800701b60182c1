package host

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

// appRun is a run whose model calls the application tool "lookup" with
// args; the definition declares an object output.
func appRun(args string, extra ...string) *protocol.RunRequest {
	def := `{"name":"lookup","description":"looks a ticket up","inputSchema":{"type":"object"},` +
		`"outputSchema":{"type":"object","required":["ok"]}` + strings.Join(extra, "") + `}`
	return &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "call:" + appTool + ":" + args,
		Tools: []string{appTool}, ApplicationTools: json.RawMessage("[" + def + "]")}
}

func TestAppToolResult(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice, outsider := env.client(t, testToken), env.client(t, outsiderToken)
	res, types, err := streamUntil(t, alice, appRun(`{"q":"solar"}`), func(ev client.Event) error {
		x := ev.Execution
		if x.Call.Name != appTool || string(x.Call.Arguments) != `{"q":"solar"}` {
			t.Errorf("execution = %+v", x)
		}
		id := x.Identity()
		if err := outsider.SubmitToolResult(t.Context(), id, json.RawMessage(`{"ok":1}`)); codeOf(err) != protocol.CodeToolExecutionNotFound {
			t.Errorf("another subject: %v", err)
		}
		wrong := id
		wrong.CallID = "call_9"
		if err := alice.SubmitToolResult(t.Context(), wrong, json.RawMessage(`{"ok":1}`)); codeOf(err) != protocol.CodeToolExecutionMismatch {
			t.Errorf("another call: %v", err)
		}
		wrong = id
		wrong.ExecutionID = "a7c3e912-5f0b-4d2e-9c84-1b6e0f3a7d25"
		if err := alice.SubmitToolResult(t.Context(), wrong, json.RawMessage(`{"ok":1}`)); codeOf(err) != protocol.CodeToolExecutionNotFound {
			t.Errorf("wrong ticket: %v", err)
		}
		if err := alice.ReportToolProgress(t.Context(), id); err != nil {
			t.Errorf("progress: %v", err)
		}
		// None of those consumed the ticket.
		if err := alice.SubmitToolResult(t.Context(), id, json.RawMessage(`{"ok":true}`)); err != nil {
			return err
		}
		if err := alice.SubmitToolResult(t.Context(), id, json.RawMessage(`{"ok":2}`)); codeOf(err) != protocol.CodeToolExecutionNotFound {
			t.Errorf("second result: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != `done:{"ok":true}` {
		t.Errorf("text = %q", res.Text)
	}
	joined := strings.Join(types, " ")
	if !strings.Contains(joined, "tool.called tool.execution.requested") || strings.Contains(joined, "approval") {
		t.Errorf("events = %v", types)
	}
	if env.apps.Pending() != 0 {
		t.Errorf("%d tickets left", env.apps.Pending())
	}
}

// TestAppToolOutcomes: an output refused at submission consumes the
// ticket and leaves the run uncertain, as does a reported failure.
func TestAppToolOutcomes(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	big := `{"ok":"` + strings.Repeat("x", 128_000-9) + `"}` // 128,000 bytes: the bound itself
	for _, tc := range []struct {
		name    string
		submit  func(client.ToolExecution) error
		receipt protocol.Code // "" = accepted
		run     protocol.Code
	}{
		{"at the bound", func(x client.ToolExecution) error {
			return alice.SubmitToolResult(t.Context(), x, json.RawMessage(big))
		}, "", ""},
		{"oversize", func(x client.ToolExecution) error {
			return alice.SubmitToolResult(t.Context(), x, json.RawMessage(big[:len(big)-2]+`x"}`))
		}, protocol.CodeToolOutputLimit, protocol.CodeToolOutcomeUncertain},
		{"schema", func(x client.ToolExecution) error {
			return alice.SubmitToolResult(t.Context(), x, json.RawMessage(`{"no":1}`))
		},
			protocol.CodeInvalidToolOutput, protocol.CodeToolOutcomeUncertain},
		{"failure", func(x client.ToolExecution) error { return alice.SubmitToolFailure(t.Context(), x) }, "", protocol.CodeToolOutcomeUncertain},
	} {
		var id client.ToolExecution
		_, _, err := streamUntil(t, alice, appRun(`{}`), func(ev client.Event) error {
			id = ev.Execution.Identity()
			if err := tc.submit(id); codeOf(err) != tc.receipt {
				t.Errorf("%s: receipt %v, want %q", tc.name, err, tc.receipt)
			}
			return nil
		})
		var ce *client.Error
		switch {
		case tc.run == "" && err != nil:
			t.Errorf("%s: run %v", tc.name, err)
		case tc.run != "" && (!errors.As(err, &ce) || ce.Code != tc.run || ce.Outcome != "uncertain"):
			t.Errorf("%s: run %v, want %s uncertain", tc.name, err, tc.run)
		}
		if err := alice.SubmitToolResult(t.Context(), id, json.RawMessage(`{"ok":1}`)); codeOf(err) != protocol.CodeToolExecutionNotFound {
			t.Errorf("%s: a result after the verdict: %v", tc.name, err)
		}
	}
}

func TestAppToolMalformedSubmissions(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	id := `"executionId":"e","runId":"r","callId":"c"`
	for _, body := range []string{
		`{}`, `{` + id + `}`, `{` + id + `,"output":{},"error":"APPLICATION_TOOL_FAILED"}`,
		`{` + id + `,"error":"it broke: stack trace"}`, `{` + id + `,"output":1e400}`,
		`{` + id + `,"output":{},"extra":1}`, `{"executionId":"","runId":"r","callId":"c","output":{}}`,
		`{"executionId":"e","runId":"r","callId":null,"output":{}}`,
	} {
		resp := postJSON(t, env.ts.URL+"/v1/tool-executions/results", testToken, body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(readAll(t, resp), `"INVALID_TOOL_EXECUTION"`) {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	// A null output is an output; an unknown ticket is then NOT_FOUND.
	resp := postJSON(t, env.ts.URL+"/v1/tool-executions/results", testToken, `{`+id+`,"output":null}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("null output: status %d", resp.StatusCode)
	}
	resp = postJSON(t, env.ts.URL+"/v1/tool-executions/progress", testToken, `{`+id+`,"output":{}}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("progress with output: status %d", resp.StatusCode)
	}
}

// TestAppToolCancel: a client that goes away while the application works
// cancels the run; the host never replays the call, and the late result
// finds no ticket.
func TestAppToolCancel(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	var id client.ToolExecution
	stop := errors.New("the client leaves")
	_, _, err := streamUntil(t, alice, appRun(`{}`), func(ev client.Event) error {
		id = ev.Execution.Identity()
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
	waitFor(t, "the ticket to be withdrawn", func() bool { return env.apps.Pending() == 0 })
	if err := alice.SubmitToolResult(t.Context(), id, json.RawMessage(`{"ok":1}`)); codeOf(err) != protocol.CodeToolExecutionNotFound {
		t.Errorf("late result: %v", err)
	}
}

// TestAppToolProgressKeepsRunAlive: progress reports re-arm the idle
// clock; without them the same wait ends IDLE_TIMEOUT with an uncertain
// outcome.
func TestAppToolProgressKeepsRunAlive(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	idle := int64(1500)
	req := appRun(`{}`)
	req.IdleTimeoutMs = &idle
	_, _, err := streamUntil(t, alice, req, func(ev client.Event) error {
		for range 3 {
			time.Sleep(1100 * time.Millisecond)
			if err := alice.ReportToolProgress(t.Context(), ev.Execution.Identity()); err != nil {
				return err
			}
		}
		return alice.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"ok":1}`))
	})
	if err != nil {
		t.Fatalf("with progress: %v", err)
	}
	req = appRun(`{}`)
	req.IdleTimeoutMs = &idle
	_, _, err = streamUntil(t, alice, req, func(client.Event) error { return nil })
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != protocol.CodeIdleTimeout || ce.Outcome != "uncertain" {
		t.Errorf("without progress: %v", err)
	}
}

func TestAppToolCapacity(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{maxExecutions: 1})
	alice := env.client(t, testToken)
	_, _, err := streamUntil(t, alice, appRun(`{}`), func(ev client.Event) error {
		_, _, err := streamUntil(t, alice, appRun(`{}`), func(client.Event) error {
			t.Error("a second ticket beyond max_pending")
			return nil
		})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != protocol.CodeToolExecutorCapacity || !ce.Retryable || ce.Outcome != "" {
			t.Errorf("second run: %v", err)
		}
		return alice.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"ok":1}`))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAppToolReview: with review required (host default) an application
// tool is executed only after an approval, and a denial dispatches nothing.
func TestAppToolReview(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{appReview: true})
	alice := env.client(t, testToken)
	req := appRun(`{}`)
	req.Approvals = client.Approvals("pause", 0)
	_, types, err := streamUntil(t, alice, req, func(ev client.Event) error {
		if ev.Approval != nil {
			_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove)
			return err
		}
		return alice.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"ok":1}`))
	})
	if err != nil || !strings.Contains(strings.Join(types, " "), "approval.requested approval.resolved tool.execution.requested") {
		t.Fatalf("approved: %v, events %v", err, types)
	}
	_, types, err = streamUntil(t, alice, req, func(ev client.Event) error {
		if ev.Execution != nil {
			t.Error("a denied call was dispatched")
			return nil
		}
		_, err := alice.DecideApproval(t.Context(), ev.Approval, client.DecisionDeny)
		return err
	})
	if codeOf(err) != protocol.CodeApprovalDenied {
		t.Errorf("denied: %v, events %v", err, types)
	}
	// The definition's own flag adds review where host and grant waive it.
	env = newReviewEnv(t, reviewOptions{})
	alice = env.client(t, testToken)
	if _, _, err := streamUntil(t, alice, appRun(`{}`, `,"requiresApproval":true`), nil); codeOf(err) != protocol.CodeApprovalRequired {
		t.Errorf("definition asks for review, no approvals: %v", err)
	}
}

func TestAppToolValidation(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice, reviewer := env.client(t, testToken), env.client(t, reviewToken)
	stream := func(req *protocol.RunRequest) error {
		_, _, err := streamUntil(t, alice, req, nil)
		return err
	}
	conflict := appRun(`{}`)
	conflict.Tools = []string{gatedTool}
	conflict.ApplicationTools = json.RawMessage(`[{"name":"gated","description":"d","inputSchema":{"type":"object"}}]`)
	twice := appRun(`{}`)
	twice.ApplicationTools = json.RawMessage(`[{"name":"lookup","description":"d","inputSchema":{}},{"name":"lookup","description":"e","inputSchema":{}}]`)
	unselected := appRun(`{}`)
	unselected.Tools = nil
	tooBig := appRun(`{}`)
	tooBig.ApplicationTools = json.RawMessage(`[{"name":"lookup","description":"` + strings.Repeat("d", 10_000) +
		`","inputSchema":{"description":"` + strings.Repeat("s", 118_000) + `"}}]`)
	badSchema := appRun(`{}`)
	badSchema.ApplicationTools = json.RawMessage(`[{"name":"lookup","description":"d","inputSchema":{"type":12}}]`)
	longDesc := appRun(`{}`)
	longDesc.ApplicationTools = json.RawMessage(`[{"name":"lookup","description":"` + strings.Repeat("d", 10_001) + `","inputSchema":{}}]`)
	for _, tc := range []struct {
		name string
		req  *protocol.RunRequest
		want protocol.Code
	}{
		{"host tool name", conflict, protocol.CodeToolDefinitionConflict},
		{"duplicate", twice, protocol.CodeToolDefinitionConflict},
		{"not selected", unselected, protocol.CodeInvalidRequest},
		{"over 128,000 bytes", tooBig, protocol.CodeToolDefinitionLimit},
		{"schema", badSchema, protocol.CodeInvalidSchema},
		{"description", longDesc, protocol.CodeInvalidRequest},
	} {
		if err := stream(tc.req); codeOf(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := alice.Run(t.Context(), appRun(`{}`)); codeOf(err) != protocol.CodeToolStreamRequired {
		t.Errorf("JSON run: %v", err)
	}
	both := appRun(`{}`)
	both.Approvals = client.Approvals("pause", 0)
	if _, err := alice.Run(t.Context(), both); codeOf(err) != protocol.CodeToolStreamRequired {
		t.Errorf("JSON run with both: %v", err)
	}
	if _, _, err := streamUntil(t, reviewer, appRun(`{}`), nil); codeOf(err) != protocol.CodeForbidden {
		t.Errorf("no application_tools grant: %v", err)
	}
}

// TestAppToolCallBound: a call over 128,000 bytes is refused before an
// application sees it (INVALID_TOOL_CALL, a certain outcome).
func TestAppToolCallBound(t *testing.T) {
	env := newReviewEnv(t, reviewOptions{})
	alice := env.client(t, testToken)
	_, _, err := streamUntil(t, alice, appRun("big:128001"), func(client.Event) error {
		t.Error("an oversize call was dispatched")
		return nil
	})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != protocol.CodeInvalidToolCall || ce.Outcome != "" {
		t.Errorf("oversize call: %v", err)
	}
	if _, _, err := streamUntil(t, alice, appRun("big:127900"), func(ev client.Event) error {
		return alice.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"ok":1}`))
	}); err != nil {
		t.Errorf("a call within the bound: %v", err)
	}
}
