// Package apptools implements application-tools (wire-extensions §5):
// tools a run defines itself and an application executes. It is the
// engine's ApplicationTools seam — it decodes a run's definitions and runs
// each call of one by issuing a ticket, emitting tool.execution.requested
// and waiting for the application's result — and the logic of
// POST /v1/tool-executions/progress and /results.
//
// Tickets live in this process's memory (§5.5): run, review, progress and
// result must reach the process owning the run's stream, and a restart
// forgets them. The host never replays a call: a ticket whose run ends is
// gone, later submissions are TOOL_EXECUTION_NOT_FOUND, and the run's
// outcome is uncertain for the application to reconcile.
package apptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"adhost/runtime"
	"adhost/runtime/approvals/strict"
	"adhost/runtime/protocol"
)

// Bounds (wire-extensions §5.1, §5.5).
const (
	DefaultMaxPending = 1000
	MaxPendingLimit   = 1_000_000
	MaxDefinitions    = 32
	maxDescription    = 10_000 // UTF-16 units
	MaxOutputBytes    = 128_000
	MaxCallBytes      = 128_000 // a call's JSON, near enough: its execution envelope without the ids
)

// Config configures a Service.
type Config struct {
	// RequireApproval is the host default of the review requirement
	// (§5.2: requireApproval, default true).
	RequireApproval bool
	// MaxPending bounds the outstanding tickets host-wide; 0: 1000.
	MaxPending int
}

// Service holds the tickets of one process. It implements
// runtime.ApplicationTools.
type Service struct {
	cfg Config

	mu      sync.Mutex
	tickets map[string]*ticket // by executionId
}

var _ runtime.ApplicationTools = (*Service)(nil)

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	return &Service{cfg: cfg, tickets: map[string]*ticket{}}
}

// ticket is one dispatched call awaiting its result.
type ticket struct {
	id, runID, callID, name, subject, provider string
	progress                                   func()
	check                                      func(json.RawMessage) error
	// result receives the one accepted submission; finished (under
	// Service.mu) says a submission or the run's end consumed the ticket.
	result   chan submission
	finished bool
}

type submission struct {
	output json.RawMessage
	failed bool // APPLICATION_TOOL_FAILED, an oversize or invalid output
}

// Pending returns the number of outstanding tickets.
func (s *Service) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tickets)
}

// RequireApproval implements runtime.ApplicationTools.
func (s *Service) RequireApproval() bool { return s.cfg.RequireApproval }

// Definitions decodes a run's applicationTools (wire-core §3.1): 1..32
// strict {name, description 1..10,000, inputSchema object, outputSchema?
// object, requiresApproval? boolean}. Schema failures are INVALID_REQUEST;
// names, sizes and schema compilation are the engine's checks.
func (s *Service) Definitions(raw json.RawMessage) ([]runtime.ApplicationTool, error) {
	bad := protocol.New(protocol.CodeInvalidRequest)
	var items []json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &items) != nil ||
		len(items) < 1 || len(items) > MaxDefinitions {
		return nil, bad
	}
	out := make([]runtime.ApplicationTool, 0, len(items))
	for _, it := range items {
		m, ok := strict.Object(it, "name", "description", "inputSchema", "outputSchema", "requiresApproval")
		if !ok {
			return nil, bad
		}
		var d runtime.ApplicationTool
		if !strict.String(m, "name", &d.Def.Name, true) || !protocol.IsToolName(d.Def.Name) ||
			!strict.String(m, "description", &d.Def.Description, true) {
			return nil, bad
		}
		if n := protocol.UTF16Len(d.Def.Description); n < 1 || n > maxDescription {
			return nil, bad
		}
		in, ok := m["inputSchema"]
		if !ok || !strict.IsObject(in) {
			return nil, bad
		}
		d.Def.InputSchema = compact(in)
		if o, ok := m["outputSchema"]; ok {
			if !strict.IsObject(o) {
				return nil, bad
			}
			d.Def.OutputSchema = compact(o)
		}
		if v, ok := m["requiresApproval"]; ok {
			if json.Unmarshal(v, &d.RequiresApproval) != nil {
				return nil, bad
			}
		}
		d.Size = len(compact(it))
		out = append(out, d)
	}
	return out, nil
}

func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}

// executionRequest is tool.execution.requested's ToolExecutionRequest.
type executionRequest struct {
	ExecutionID string   `json:"executionId"`
	RunID       string   `json:"runId"`
	Call        wireCall `json:"call"`
}

type wireCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// errToolFailed is the run's cause when the application reported failure
// or submitted an output that was refused: the call was dispatched, so
// the engine reports TOOL_OUTCOME_UNCERTAIN.
var errToolFailed = errors.New("apptools: the application did not confirm an output")

// ExecuteTool implements runtime.ToolExecutor for application tools: a
// ticket (TOOL_EXECUTOR_CAPACITY at maxPending, before anything is
// dispatched), tool.execution.requested, then the wait for the one
// result. Progress submissions re-arm the run's idle clock through
// x.Progress. When ctx ends first the ticket is withdrawn.
func (s *Service) ExecuteTool(ctx context.Context, x *runtime.ToolExecution) (json.RawMessage, error) {
	t := &ticket{
		id: runtime.NewID(), runID: x.RunID, callID: x.Call.ID, name: x.Call.Name, subject: x.Subject,
		provider: x.Provider, progress: x.Progress, check: x.CheckOutput, result: make(chan submission, 1),
	}
	body, err := json.Marshal(executionRequest{
		ExecutionID: t.id, RunID: t.runID, Call: wireCall{ID: x.Call.ID, Name: x.Call.Name, Arguments: x.Call.Arguments},
	})
	if err != nil {
		return nil, runtime.NotDispatched(protocol.Wrap(protocol.CodeInternalError, err))
	}
	if len(body)-len(t.id)-len(t.runID) > MaxCallBytes {
		// §5.5: an application never sees a call over its bound.
		return nil, runtime.NotDispatched(protocol.New(protocol.CodeInvalidToolCall))
	}
	s.mu.Lock()
	if len(s.tickets) >= s.cfg.MaxPending {
		s.mu.Unlock()
		return nil, runtime.NotDispatched(protocol.New(protocol.CodeToolExecutorCapacity))
	}
	s.tickets[t.id] = t
	s.mu.Unlock()
	defer s.withdraw(t)

	if x.Emit == nil || !x.Emit(runtime.EventToolExecutionRequested, "execution", body) {
		return nil, context.Cause(ctx) // the run is stopping
	}
	select {
	case sub := <-t.result:
		if sub.failed {
			return nil, errToolFailed
		}
		return sub.output, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// withdraw removes t once its call is over, however it ended.
func (s *Service) withdraw(t *ticket) {
	s.mu.Lock()
	t.finished = true
	delete(s.tickets, t.id)
	s.mu.Unlock()
}
