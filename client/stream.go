package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"time"
	"unicode/utf8"

	"adhost/abi/sse"
	"adhost/runtime/protocol"
)

// Event types of wire-core §5.2.
const (
	EventRunStarted             = "run.started"
	EventStepStarted            = "step.started"
	EventTextDelta              = "text.delta"
	EventRunProgress            = "run.progress"
	EventUsageReported          = "usage.reported"
	EventToolCalled             = "tool.called"
	EventToolCompleted          = "tool.completed"
	EventRunCompleted           = "run.completed"
	EventRunFailed              = "run.failed"
	EventRunCancelled           = "run.cancelled"
	EventApprovalRequested      = "approval.requested"
	EventApprovalResolved       = "approval.resolved"
	EventToolExecutionRequested = "tool.execution.requested"
)

// Event is one validated stream event. The envelope is always set; the
// payload fields are set for the event types that carry them. Raw is the
// whole event object as received.
type Event struct {
	Type      string
	RunID     string
	Sequence  int64
	Timestamp time.Time
	Raw       json.RawMessage

	Provider, Model string              // run.started
	Step            int                 // step.started, usage.reported
	Text            string              // text.delta
	Phase           string              // run.progress: model | tool | context
	Usage           *protocol.Usage     // usage.reported
	Call            *ToolCall           // tool.called
	CallID          string              // tool.completed
	Output          json.RawMessage     // tool.completed
	Result          *protocol.RunResult // run.completed
	Error           *protocol.ErrorInfo // run.failed, run.cancelled
	// Extension events of a run that opted in (approvals.go).
	Approval   *ApprovalRequest      // approval.requested
	Resolution *ApprovalResolution   // approval.resolved
	Execution  *ToolExecutionRequest // tool.execution.requested
}

// Terminal reports whether e ends the run.
func (e *Event) Terminal() bool {
	switch e.Type {
	case EventRunCompleted, EventRunFailed, EventRunCancelled:
		return true
	}
	return false
}

// ToolCall is the call of a tool.called event.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Stream executes a run in SSE mode. fn sees every event in order,
// including the terminal one; unknown advisory events (optional: true) are
// validated and skipped. It returns the result of run.completed, or a
// *Error: the code of run.failed/run.cancelled, or a client code when the
// stream breaks the protocol. If fn returns an error the stream is closed —
// which cancels the run on the host — and that error is returned unchanged.
func (c *Client) Stream(ctx context.Context, req *protocol.RunRequest, fn func(Event) error) (*protocol.RunResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.post(ctx, req, "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !hasMediaType(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil, invalidResponse("Content-Type is not text/event-stream")
	}
	rd := sse.NewReader(resp.Body, sse.WithMaxEventBytes(MaxEventBytes))
	v := validator{req: req}
	for {
		frame, err := rd.Next()
		if err != nil {
			switch {
			case errors.Is(err, sse.ErrTooLarge):
				return nil, newError(protocol.CodeResponseTooLarge, "an event frame exceeds 2,000,000 bytes")
			case err == io.EOF:
				return nil, newError(protocol.CodeIncompleteStream, "the stream ended without a terminal event")
			case ctx.Err() != nil:
				return nil, &Error{Code: protocol.CodeHTTPError, Message: "the stream was interrupted", Err: context.Cause(ctx)}
			default:
				return nil, &Error{Code: protocol.CodeIncompleteStream, Message: "the stream broke before a terminal event", Err: err}
			}
		}
		ev, deliver, err := v.event(frame.Data)
		if err != nil {
			return nil, err
		}
		if !deliver {
			continue
		}
		if fn != nil {
			if err := fn(ev); err != nil {
				return nil, err
			}
		}
		switch ev.Type {
		case EventRunCompleted:
			return ev.Result, nil
		case EventRunFailed, EventRunCancelled:
			return nil, &Error{Code: ev.Error.Code, Message: ev.Error.Message, Retryable: ev.Error.Retryable, Outcome: ev.Error.Outcome}
		}
	}
}

// Events is Stream as an iterator. It yields every delivered event with a
// nil error; when the run fails or the stream breaks it then yields one
// final (Event{}, err). Breaking out of the loop closes the stream, which
// cancels the run on the host.
func (c *Client) Events(ctx context.Context, req *protocol.RunRequest) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		stopped := false
		_, err := c.Stream(ctx, req, func(ev Event) error {
			if !yield(ev, nil) {
				stopped = true
				return errStopped
			}
			return nil
		})
		if err != nil && !stopped {
			yield(Event{}, err)
		}
	}
}

var errStopped = errors.New("client: iteration stopped")

// validator holds the per-stream state of wire-core §5.4.
type validator struct {
	req   *protocol.RunRequest
	runID string
	seq   int64
	// executions and executedCalls are the execution ids and call ids
	// tool.execution.requested has named (each only once).
	executions, executedCalls map[string]bool
}

// event validates one frame's data. deliver is false for a skipped
// advisory event.
func (v *validator) event(data []byte) (ev Event, deliver bool, err error) {
	if !utf8.Valid(data) {
		return ev, false, invalidStream("event data is not valid UTF-8")
	}
	m, ok := parseObject(data)
	if !ok {
		return ev, false, invalidStream("event is not a JSON object")
	}
	if ev.Type, ok = asNonEmptyString(m["type"]); !ok {
		return ev, false, invalidStream("event type is missing")
	}
	if ev.RunID, ok = asNonEmptyString(m["runId"]); !ok {
		return ev, false, invalidStream("event runId is missing")
	}
	if ev.Sequence, ok = asSafeInt(m["sequence"]); !ok || ev.Sequence < 1 {
		return ev, false, invalidStream("event sequence is not a positive integer")
	}
	if ev.Timestamp, ok = asTimestamp(m["timestamp"]); !ok {
		return ev, false, invalidStream("event timestamp is not an RFC 3339 date-time")
	}
	if ev.Sequence != v.seq+1 {
		return ev, false, invalidStream("sequence %d follows %d", ev.Sequence, v.seq)
	}
	v.seq = ev.Sequence
	if v.runID == "" {
		if ev.Type != EventRunStarted {
			return ev, false, invalidStream("the first event is %s, not run.started", ev.Type)
		}
		v.runID = ev.RunID
	} else {
		if ev.Type == EventRunStarted {
			return ev, false, invalidStream("run.started repeats")
		}
		if ev.RunID != v.runID {
			return ev, false, invalidStream("runId changed")
		}
	}
	ev.Raw = json.RawMessage(append([]byte(nil), data...))
	if err := v.payload(&ev, m); err != nil {
		return ev, false, err
	}
	if ev.Type == "" { // skipped advisory event
		return ev, false, nil
	}
	return ev, true, nil
}

// payload validates and extracts a known payload; an unknown type is
// skipped when it is marked optional:true and rejected otherwise.
func (v *validator) payload(ev *Event, m object) error {
	bad := func(what string) error { return invalidStream("%s: %s", ev.Type, what) }
	var ok bool
	switch ev.Type {
	case EventRunStarted:
		if ev.Provider, ok = asString(m["provider"]); !ok || ev.Provider != v.req.Provider {
			return bad("provider does not match the request")
		}
		if ev.Model, ok = asString(m["model"]); !ok || ev.Model != v.req.Model {
			return bad("model does not match the request")
		}
	case EventStepStarted:
		n, ok := asSafeInt(m["step"])
		if !ok || n < 1 {
			return bad("step is not a positive integer")
		}
		ev.Step = int(n)
	case EventTextDelta:
		if ev.Text, ok = asString(m["text"]); !ok {
			return bad("text is not a string")
		}
	case EventRunProgress:
		ev.Phase, ok = asString(m["phase"])
		if !ok || (ev.Phase != "model" && ev.Phase != "tool" && ev.Phase != "context") {
			return bad("phase is not one of " + progressPhaseList)
		}
	case EventUsageReported:
		n, ok := asSafeInt(m["step"])
		if !ok || n < 1 {
			return bad("step is not a positive integer")
		}
		ev.Step = int(n)
		u, ok := validateUsage(m["usage"])
		if !ok {
			return bad("usage is invalid")
		}
		ev.Usage = &u
	case EventToolCalled:
		call, ok := asObject(m["call"])
		if !ok {
			return bad("call is not an object")
		}
		var tc ToolCall
		if tc.ID, ok = asNonEmptyString(call["id"]); !ok {
			return bad("call.id is invalid")
		}
		if tc.Name, ok = asNonEmptyString(call["name"]); !ok {
			return bad("call.name is invalid")
		}
		if _, ok = asObject(call["arguments"]); !ok {
			return bad("call.arguments is not an object")
		}
		tc.Arguments = call["arguments"]
		ev.Call = &tc
	case EventToolCompleted:
		if ev.CallID, ok = asNonEmptyString(m["callId"]); !ok {
			return bad("callId is invalid")
		}
		out, present := m["output"]
		if !present {
			return bad("output is missing")
		}
		ev.Output = out
	case EventRunCompleted:
		res, err := validateResult(m["result"], v.req, v.runID)
		if err != nil {
			return bad(err.Error())
		}
		ev.Result = res
	case EventRunFailed, EventRunCancelled:
		if ev.Error, ok = validateErrorInfo(m["error"]); !ok {
			return bad("error is not a valid ErrorInfo")
		}
	case EventApprovalRequested, EventApprovalResolved:
		// Extension events are only legal on runs that opted in; even
		// optional:true does not make them skippable (§5.4).
		if v.req.Approvals == nil {
			return newError(protocol.CodeUnsupportedEvent, "unnegotiated extension event "+ev.Type)
		}
		if ev.Type == EventApprovalRequested {
			a, err := validateApproval(m["approval"], v.req, v.runID)
			if err != nil {
				return bad(err.Error())
			}
			ev.Approval = a
			break
		}
		rm, ok := asObject(m["resolution"])
		if !ok {
			return bad("resolution is not an object")
		}
		res, err := validateResolution(rm)
		if err == nil && res.RunID != v.runID {
			err = fieldError("resolution.runId is not the run's")
		}
		if err != nil {
			return bad(err.Error())
		}
		ev.Resolution = res
	case EventToolExecutionRequested:
		if v.req.ApplicationTools == nil {
			return newError(protocol.CodeUnsupportedEvent, "unnegotiated extension event "+ev.Type)
		}
		x, err := v.validateExecution(m["execution"])
		if err != nil {
			return bad(err.Error())
		}
		ev.Execution = x
	default:
		if opt, ok := asBool(m["optional"]); ok && opt {
			ev.Type = "" // skipped: envelope and sequence were checked
			return nil
		}
		return newError(protocol.CodeUnsupportedEvent, "unknown required event type "+ev.Type)
	}
	return nil
}
