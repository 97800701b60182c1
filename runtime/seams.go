package runtime

import (
	"context"
	"encoding/json"
	"time"

	"adhost/abi"
)

// The interfaces in this file are the engine's extension seams. The core
// protocol does not need them to do anything; later features plug in here
// without changing the step loop:
//
//   - RunStore / EventLog: durable jobs and idempotency replay persist each
//     event before it is delivered (wire-extensions §2.3 "event commit
//     barrier", §8 "committed before it is sent").
//   - ApprovalHook: the host-level approval callback; interactive approvals
//     (wire-extensions §4) wrap it with approval.* events.
//   - ToolExecutor: how one validated call runs. Host tools run through a
//     ToolSet; application tools (wire-extensions §5) will implement it by
//     emitting tool.execution.requested and awaiting the submitted result.

// RunInfo describes an admitted run to a RunStore.
type RunInfo struct {
	RunID     string
	Subject   string
	Provider  string
	Model     string
	StartedAt time.Time
}

// RunStore opens the event log of a run. The engine calls OpenRun once per
// admitted run, before run.started is emitted. An error refuses the run
// (Start returns it; a *protocol.Error keeps its code). Nil RunStore: events
// are not persisted.
type RunStore interface {
	OpenRun(ctx context.Context, info RunInfo) (EventLog, error)
}

// EventLog receives every committed event of one run, in sequence order,
// before the engine delivers it (queues it for Run.Next). Append is called
// with the run's internal lock held, so it must not call back into the Run.
//
// An Append error on a non-terminal event stops the run: its terminal event
// is run.failed carrying the error (a *protocol.Error keeps its code and
// outcome; anything else becomes INTERNAL_ERROR). The terminal event is
// appended too; its error is only logged.
type EventLog interface {
	Append(ctx context.Context, ev Event) error
}

// ApprovalRequest is a tool call that needs approval (Tool.RequiresApproval).
type ApprovalRequest struct {
	RunID    string
	Subject  string
	Provider string
	Call     abi.ToolCall
}

// ApprovalHook decides host-level approvals. It fails closed: false or an
// error is APPROVAL_REQUIRED, and without a hook every tool that requires
// approval fails with APPROVAL_REQUIRED.
type ApprovalHook interface {
	ApproveToolCall(ctx context.Context, req *ApprovalRequest) (bool, error)
}

// ApprovalFunc adapts a function to ApprovalHook.
type ApprovalFunc func(ctx context.Context, req *ApprovalRequest) (bool, error)

// ApproveToolCall calls f.
func (f ApprovalFunc) ApproveToolCall(ctx context.Context, req *ApprovalRequest) (bool, error) {
	return f(ctx, req)
}

// ToolExecution is one validated, approved call handed to a ToolExecutor.
type ToolExecution struct {
	RunID   string
	Subject string
	Call    abi.ToolCall // arguments are compact JSON and must not be modified
	// Progress reports real progress of the call (re-arms the idle timer;
	// throttled run.progress with phase "tool").
	Progress func()
}

// ToolExecutor runs one tool call and returns its output (any JSON value;
// the engine validates it and bounds it to 1,000,000 bytes). Every error is
// reported as TOOL_OUTCOME_UNCERTAIN: the call was dispatched, so effects
// may have happened. It must return promptly once ctx is done; the engine
// stops waiting at cancellation either way.
type ToolExecutor interface {
	ExecuteTool(ctx context.Context, x *ToolExecution) (json.RawMessage, error)
}

// toolSetExecutor runs host tools through their extension's ToolSet.
type toolSetExecutor struct{ set ToolSet }

func (t toolSetExecutor) ExecuteTool(ctx context.Context, x *ToolExecution) (json.RawMessage, error) {
	return t.set.Invoke(ctx, x.Call, x.Progress)
}
