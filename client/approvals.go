package client

import (
	"context"
	"encoding/json"
	"time"

	"adhost/runtime/protocol"
)

// Interactive approvals (wire-extensions §4) and application tools (§5):
// the events of a run that opted in, validated against the request, and
// the calls that answer them.

// ApprovalRequest is approval.requested's payload: a gated call waiting
// for a decision (DecideApproval).
type ApprovalRequest struct {
	ApprovalID  string
	RunID       string
	IdlePolicy  string
	Call        ToolCall
	RequestedAt time.Time
	// ExpiresAt is set when the run asked for expiresAfterMs.
	ExpiresAt *time.Time
}

// ApprovalResolution is approval.resolved's payload and the decision
// receipt.
type ApprovalResolution struct {
	ApprovalID, RunID, CallID string
	// Outcome is approved, denied, cancelled or expired.
	Outcome   string
	DecidedAt time.Time
}

// ToolExecutionRequest is tool.execution.requested's payload: the
// application runs Call and answers with SubmitToolResult.
type ToolExecutionRequest struct {
	ExecutionID string
	RunID       string
	Call        ToolCall
}

// Identity returns the ticket identity the execution's progress and
// result carry.
func (x *ToolExecutionRequest) Identity() ToolExecution {
	return ToolExecution{ExecutionID: x.ExecutionID, RunID: x.RunID, CallID: x.Call.ID}
}

// ToolExecution identifies one application tool execution (a
// ToolExecutionIdentity).
type ToolExecution struct {
	ExecutionID string `json:"executionId"`
	RunID       string `json:"runId"`
	CallID      string `json:"callId"`
}

// Decisions of DecideApproval.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	DecisionCancel  = "cancel"
)

// Approvals is the `approvals` run option: set RunRequest.Approvals to it.
// idlePolicy is "pause" or "continue"; expiresAfter 0 means no expiry.
func Approvals(idlePolicy string, expiresAfter time.Duration) json.RawMessage {
	opt := struct {
		Mode       string `json:"mode"`
		IdlePolicy string `json:"idlePolicy"`
		ExpiresMs  int64  `json:"expiresAfterMs,omitempty"`
	}{"interactive", idlePolicy, expiresAfter.Milliseconds()}
	b, _ := json.Marshal(opt)
	return b
}

var decisionOutcome = map[string]string{DecisionApprove: "approved", DecisionDeny: "denied", DecisionCancel: "cancelled"}

// DecideApproval calls POST /v1/approvals/decisions for the pending
// approval req with decision (approve, deny or cancel), echoing its run
// and call exactly. The receipt says the decision was accepted, not that
// the tool ran: the run's events settle that. Never retry it: a decision
// is single use.
func (c *Client) DecideApproval(ctx context.Context, req *ApprovalRequest, decision string) (*ApprovalResolution, error) {
	want, ok := decisionOutcome[decision]
	if req == nil || !ok {
		return nil, newError(protocol.CodeInvalidRequest, "the decision is not approve, deny or cancel")
	}
	body, err := c.postOp(ctx, "/v1/approvals/decisions", struct {
		ApprovalID string   `json:"approvalId"`
		RunID      string   `json:"runId"`
		Call       ToolCall `json:"call"`
		Decision   string   `json:"decision"`
	}{req.ApprovalID, req.RunID, req.Call, decision})
	if err != nil {
		return nil, err
	}
	m, ok := parseObject(body)
	if !ok {
		return nil, invalidResponse("the approval receipt is not an object")
	}
	res, err := validateResolution(m)
	switch {
	case err != nil:
		return nil, invalidResponse("approval receipt: %s", err)
	case res.ApprovalID != req.ApprovalID || res.RunID != req.RunID || res.CallID != req.Call.ID:
		return nil, invalidResponse("the approval receipt is for another approval")
	case res.Outcome != want:
		return nil, invalidResponse("the approval receipt's outcome is not the decision sent")
	}
	return res, nil
}

// ReportToolProgress calls POST /v1/tool-executions/progress: real work
// of the application on the execution (it re-arms the run's idle clock).
// Send it after work, never on a timer.
func (c *Client) ReportToolProgress(ctx context.Context, x ToolExecution) error {
	return c.toolExecution(ctx, "/v1/tool-executions/progress", x, x, "progress")
}

// SubmitToolResult calls POST /v1/tool-executions/results with the
// execution's output (any JSON value; nil sends null).
func (c *Client) SubmitToolResult(ctx context.Context, x ToolExecution, output json.RawMessage) error {
	if output == nil {
		output = json.RawMessage("null")
	}
	return c.toolExecution(ctx, "/v1/tool-executions/results", struct {
		ToolExecution
		Output json.RawMessage `json:"output"`
	}{x, output}, x, "accepted")
}

// SubmitToolFailure reports that the application's function failed
// (APPLICATION_TOOL_FAILED; its own error text is never sent). The run
// then fails with an uncertain outcome.
func (c *Client) SubmitToolFailure(ctx context.Context, x ToolExecution) error {
	return c.toolExecution(ctx, "/v1/tool-executions/results", struct {
		ToolExecution
		Error string `json:"error"`
	}{x, string(protocol.CodeApplicationToolFailed)}, x, "accepted")
}

func (c *Client) toolExecution(ctx context.Context, path string, body any, x ToolExecution, status string) error {
	resp, err := c.postOp(ctx, path, body)
	if err != nil {
		return err
	}
	m, ok := parseObject(resp)
	if !ok {
		return invalidResponse("the tool execution receipt is not an object")
	}
	var got ToolExecution
	var st string
	if got.ExecutionID, ok = asString(m["executionId"]); ok {
		if got.RunID, ok = asString(m["runId"]); ok {
			if got.CallID, ok = asString(m["callId"]); ok {
				st, ok = asString(m["status"])
			}
		}
	}
	switch {
	case !ok:
		return invalidResponse("the tool execution receipt is malformed")
	case got != x:
		return invalidResponse("the tool execution receipt is for another execution")
	case st != status:
		return invalidResponse("the tool execution receipt's status is not %q", status)
	}
	return nil
}

// validID is an id of 1..256 UTF-16 units.
func validID(raw json.RawMessage) (string, bool) {
	s, ok := asNonEmptyString(raw)
	return s, ok && protocol.UTF16Len(s) <= 256
}

// validCall checks a call object of an extension event: id, a tool name,
// object arguments.
func validCall(raw json.RawMessage) (ToolCall, error) {
	var tc ToolCall
	m, ok := asObject(raw)
	if !ok {
		return tc, fieldError("call is not an object")
	}
	if tc.ID, ok = validID(m["id"]); !ok {
		return tc, fieldError("call.id is invalid")
	}
	if tc.Name, ok = asString(m["name"]); !ok || !protocol.IsToolName(tc.Name) {
		return tc, fieldError("call.name is not a tool name")
	}
	if _, ok = asObject(m["arguments"]); !ok {
		return tc, fieldError("call.arguments is not an object")
	}
	tc.Arguments = m["arguments"]
	return tc, nil
}

func validateApproval(raw json.RawMessage, req *protocol.RunRequest, runID string) (*ApprovalRequest, error) {
	m, ok := asObject(raw)
	if !ok {
		return nil, fieldError("approval is not an object")
	}
	a := &ApprovalRequest{}
	if a.ApprovalID, ok = validID(m["approvalId"]); !ok {
		return nil, fieldError("approvalId is invalid")
	}
	if a.RunID, ok = asString(m["runId"]); !ok || a.RunID != runID {
		return nil, fieldError("approval.runId is not the run's")
	}
	var asked struct{ IdlePolicy string }
	_ = json.Unmarshal(req.Approvals, &asked)
	if a.IdlePolicy, ok = asString(m["idlePolicy"]); !ok || a.IdlePolicy != asked.IdlePolicy {
		return nil, fieldError("idlePolicy is not the one asked for")
	}
	var err error
	if a.Call, err = validCall(m["call"]); err != nil {
		return nil, err
	}
	if a.RequestedAt, ok = asTimestamp(m["requestedAt"]); !ok {
		return nil, fieldError("requestedAt is not a date-time")
	}
	if v, present := m["expiresAt"]; present {
		t, ok := asTimestamp(v)
		if !ok {
			return nil, fieldError("expiresAt is not a date-time")
		}
		a.ExpiresAt = &t
	}
	return a, nil
}

var resolutionOutcomes = set("approved", "denied", "cancelled", "expired")

func validateResolution(m object) (*ApprovalResolution, error) {
	r := &ApprovalResolution{}
	var ok bool
	if r.ApprovalID, ok = validID(m["approvalId"]); !ok {
		return nil, fieldError("approvalId is invalid")
	}
	if r.RunID, ok = asNonEmptyString(m["runId"]); !ok {
		return nil, fieldError("runId is invalid")
	}
	if r.CallID, ok = validID(m["callId"]); !ok {
		return nil, fieldError("callId is invalid")
	}
	if r.Outcome, ok = asString(m["outcome"]); !ok || !resolutionOutcomes[r.Outcome] {
		return nil, fieldError("outcome is not one of approved, denied, cancelled, expired")
	}
	if r.DecidedAt, ok = asTimestamp(m["decidedAt"]); !ok {
		return nil, fieldError("decidedAt is not a date-time")
	}
	return r, nil
}

// validateExecution checks tool.execution.requested against the request:
// the tool is one of its application tools and selected, and neither the
// execution nor its call was requested before in the stream.
func (v *validator) validateExecution(raw json.RawMessage) (*ToolExecutionRequest, error) {
	m, ok := asObject(raw)
	if !ok {
		return nil, fieldError("execution is not an object")
	}
	x := &ToolExecutionRequest{}
	if x.ExecutionID, ok = validID(m["executionId"]); !ok {
		return nil, fieldError("executionId is invalid")
	}
	if x.RunID, ok = asString(m["runId"]); !ok || x.RunID != v.runID {
		return nil, fieldError("execution.runId is not the run's")
	}
	var err error
	if x.Call, err = validCall(m["call"]); err != nil {
		return nil, err
	}
	var defs []struct{ Name string }
	_ = json.Unmarshal(v.req.ApplicationTools, &defs)
	defined := false
	for _, d := range defs {
		defined = defined || d.Name == x.Call.Name
	}
	if !defined || !contains(v.req.Tools, x.Call.Name) {
		return nil, fieldError("the call is not a selected application tool")
	}
	if v.executions == nil {
		v.executions, v.executedCalls = map[string]bool{}, map[string]bool{}
	}
	if v.executions[x.ExecutionID] || v.executedCalls[x.Call.ID] {
		return nil, fieldError("the execution or its call was already requested")
	}
	v.executions[x.ExecutionID], v.executedCalls[x.Call.ID] = true, true
	return x, nil
}
