// Package approvals implements interactive-approvals (wire-extensions §4):
// the engine's Reviewer seam, which holds one pending approval per gated
// call of a run that opted in, and the decision endpoint's logic
// (POST /v1/approvals/decisions), with an append-only audit record of every
// request, resolution and rejected decision in the durable store.
//
// Pending approvals live in this process's memory (§4.7): a decision must
// reach the process that owns the run's stream, and a restart forgets them
// (their runs end with the process). Everything fails closed: a call runs
// only after a decision that was bound to its run, call and arguments,
// authorized for its tool and recorded in the audit log.
package approvals

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"adhost/runtime"
	"adhost/runtime/approvals/strict"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Defaults and bounds (wire-extensions §4.1, §4.7).
const (
	DefaultMaxPending = 1000
	// MaxPendingLimit bounds what an operator may configure: each pending
	// approval pins a run, its slot and its call.
	MaxPendingLimit = 1_000_000
	maxExpiresMs    = 2_147_483_647
	maxCallBytes    = 128_000
)

// Config configures a Service.
type Config struct {
	// AllowIdlePause admits idlePolicy "pause"; false: APPROVAL_POLICY.
	AllowIdlePause bool
	// MaxPending bounds the outstanding approvals host-wide; 0: 1000.
	MaxPending int
	// Audit receives the audit records (durable.Logs of the store).
	// Required: without an audit log nothing can be approved.
	Audit durable.Logs
	// Logger; nil discards. Lines carry ids and codes, never arguments.
	Logger *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Service is the interactive-approvals state of one process. It
// implements runtime.Reviewer.
type Service struct {
	cfg   Config
	audit *auditLog
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]*pending // by approvalId
}

var _ runtime.Reviewer = (*Service)(nil)

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, audit: &auditLog{logs: cfg.Audit}, log: log, pending: map[string]*pending{}}
}

// pending is one approval awaiting its decision.
type pending struct {
	id, runID, subject, provider string
	call                         runtime.Review
	args                         any // the decoded arguments, for deep equality
	requestedAt, expiresAt       time.Time
	// settled receives the outcome exactly once, from whoever finishes
	// the approval first (a decision, the expiry, the run's end), under
	// Service.mu via finishLocked.
	settled  chan settlement
	finished bool
}

type settlement struct {
	outcome   runtime.ReviewOutcome
	decidedAt time.Time
	err       error // the decision could not be recorded: fail closed
}

// Pending returns the number of outstanding approvals.
func (s *Service) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Policy decodes a run's `approvals` option (wire-core §3.1): strict
// {mode: "interactive", idlePolicy: "pause"|"continue", expiresAfterMs?:
// 1..2,147,483,647}.
func (s *Service) Policy(raw json.RawMessage) (*runtime.ApprovalPolicy, error) {
	bad := protocol.New(protocol.CodeInvalidRequest)
	m, ok := strict.Object(raw, "mode", "idlePolicy", "expiresAfterMs")
	if !ok {
		return nil, bad
	}
	var mode, idle string
	if !strict.String(m, "mode", &mode, true) || mode != "interactive" ||
		!strict.String(m, "idlePolicy", &idle, true) || (idle != "pause" && idle != "continue") {
		return nil, bad
	}
	pol := &runtime.ApprovalPolicy{IdlePause: idle == "pause"}
	if v, ok := m["expiresAfterMs"]; ok {
		ms, ok := strict.Integer(v)
		if !ok || ms < 1 || ms > maxExpiresMs {
			return nil, bad
		}
		pol.ExpiresAfter = time.Duration(ms) * time.Millisecond
	}
	if pol.IdlePause && !s.cfg.AllowIdlePause {
		return nil, protocol.New(protocol.CodeApprovalPolicy)
	}
	return pol, nil
}

// request is approval.requested's ApprovalRequest (§4.4).
type request struct {
	ApprovalID  string   `json:"approvalId"`
	RunID       string   `json:"runId"`
	IdlePolicy  string   `json:"idlePolicy"`
	Call        wireCall `json:"call"`
	RequestedAt string   `json:"requestedAt"`
	ExpiresAt   string   `json:"expiresAt,omitempty"`
}

type wireCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Resolution is the ApprovalResolution of approval.resolved and of the
// decision receipt (§4.4).
type Resolution struct {
	ApprovalID string `json:"approvalId"`
	RunID      string `json:"runId"`
	CallID     string `json:"callId"`
	Outcome    string `json:"outcome"`
	DecidedAt  string `json:"decidedAt"`
}

var outcomeNames = map[runtime.ReviewOutcome]string{
	runtime.ReviewApproved:  "approved",
	runtime.ReviewDenied:    "denied",
	runtime.ReviewCancelled: "cancelled",
	runtime.ReviewExpired:   "expired",
}

// Review implements runtime.Reviewer: capacity, the audit record of the
// request, registration, approval.requested, the wait, approval.resolved.
func (s *Service) Review(ctx context.Context, rv *runtime.Review) (runtime.ReviewOutcome, error) {
	// A reviewer must be shown exactly what will run: a call over 128,000
	// bytes, or arguments a client cannot hold losslessly, is refused.
	args, ok := strict.Lossless(rv.Call.Arguments)
	if !ok || 64+len(rv.Call.ID)+len(rv.Call.Name)+len(rv.Call.Arguments) > maxCallBytes {
		return 0, protocol.New(protocol.CodeInvalidToolCall)
	}
	now := s.cfg.Now()
	p := &pending{
		id: runtime.NewID(), runID: rv.RunID, subject: rv.Subject, provider: rv.Provider,
		call: *rv, args: args, requestedAt: now, settled: make(chan settlement, 1),
	}
	if rv.Policy.ExpiresAfter > 0 {
		p.expiresAt = now.Add(rv.Policy.ExpiresAfter)
	}
	idle := "continue"
	if rv.Policy.IdlePause {
		idle = "pause"
	}
	req := request{
		ApprovalID: p.id, RunID: p.runID, IdlePolicy: idle,
		Call:        wireCall{ID: rv.Call.ID, Name: rv.Call.Name, Arguments: rv.Call.Arguments},
		RequestedAt: stamp(p.requestedAt),
	}
	if !p.expiresAt.IsZero() {
		req.ExpiresAt = stamp(p.expiresAt)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}

	s.mu.Lock()
	if len(s.pending) >= s.cfg.MaxPending {
		s.mu.Unlock()
		return 0, protocol.New(protocol.CodeApprovalCapacity)
	}
	// The request is on record before anyone can see it.
	if err := s.audit.write(ctx, &record{
		Type: "approval.requested", At: stamp(now), Subject: p.subject, Provider: p.provider,
		ApprovalID: p.id, RunID: p.runID, Call: &req.Call, ExpiresAt: req.ExpiresAt,
	}); err != nil {
		s.mu.Unlock()
		s.log.Warn("approval audit failed", "runId", p.runID, "event", "approval.requested", "err", err)
		return 0, protocol.Wrap(protocol.CodeApprovalAuditFailed, err)
	}
	s.pending[p.id] = p
	s.mu.Unlock()

	if !rv.Emit(runtime.EventApprovalRequested, "approval", body) {
		s.abandon(ctx, p) // the run is stopping
		return runtime.ReviewCancelled, nil
	}

	var expiry <-chan time.Time
	if !p.expiresAt.IsZero() {
		t := time.NewTimer(p.expiresAt.Sub(s.cfg.Now()))
		defer t.Stop()
		expiry = t.C
	}
	var st settlement
	select {
	case st = <-p.settled:
	case <-expiry:
		st = s.expire(ctx, p)
	case <-ctx.Done():
		s.abandon(ctx, p)
		return runtime.ReviewCancelled, nil
	}
	if st.err != nil {
		return 0, st.err
	}
	res, _ := json.Marshal(Resolution{
		ApprovalID: p.id, RunID: p.runID, CallID: rv.Call.ID, Outcome: outcomeNames[st.outcome], DecidedAt: stamp(st.decidedAt),
	})
	rv.Emit(runtime.EventApprovalResolved, "resolution", res)
	return st.outcome, nil
}

// expire finishes p as expired, unless a decision got there first (then
// that decision's settlement is returned).
func (s *Service) expire(ctx context.Context, p *pending) settlement {
	s.mu.Lock()
	if p.finished {
		s.mu.Unlock()
		return <-p.settled
	}
	st := s.finishLocked(ctx, p, runtime.ReviewExpired, "")
	s.mu.Unlock()
	<-p.settled
	return st
}

// abandon finishes p as cancelled when its run ends while it is pending
// (§4.5: the approval is invalidated; a closed transport gets no events).
func (s *Service) abandon(ctx context.Context, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !p.finished {
		s.finishLocked(context.WithoutCancel(ctx), p, runtime.ReviewCancelled, "")
	}
}

// finishLocked settles p: the audit record of its resolution first, then
// the settlement (an audit failure settles it as APPROVAL_AUDIT_FAILED, so
// no tool runs on an unrecorded decision). by is the token id of the
// decider ("" for expiry and cancellation). s.mu is held.
func (s *Service) finishLocked(ctx context.Context, p *pending, out runtime.ReviewOutcome, by string) settlement {
	p.finished = true
	delete(s.pending, p.id)
	st := settlement{outcome: out, decidedAt: s.cfg.Now()}
	if err := s.audit.write(ctx, &record{
		Type: "approval.resolved", At: stamp(st.decidedAt), Subject: p.subject, Provider: p.provider,
		ApprovalID: p.id, RunID: p.runID, CallID: p.call.Call.ID, Tool: p.call.Call.Name,
		Outcome: outcomeNames[out], TokenID: by,
	}); err != nil {
		s.log.Warn("approval audit failed", "runId", p.runID, "event", "approval.resolved", "err", err)
		st.err = protocol.Wrap(protocol.CodeApprovalAuditFailed, err)
	}
	p.settled <- st
	return st
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
