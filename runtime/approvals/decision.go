package approvals

import (
	"context"
	"encoding/json"
	"reflect"

	"adhost/runtime"
	"adhost/runtime/approvals/strict"
	"adhost/runtime/protocol"
)

// decision is a decoded POST /v1/approvals/decisions body (§4.3).
type decision struct {
	approvalID, runID string
	callID, callName  string
	args              any
	outcome           runtime.ReviewOutcome
}

var decisionOutcomes = map[string]runtime.ReviewOutcome{
	"approve": runtime.ReviewApproved,
	"deny":    runtime.ReviewDenied,
	"cancel":  runtime.ReviewCancelled,
}

// parseDecision decodes the strict decision body; ok false is
// INVALID_APPROVAL.
func parseDecision(body []byte) (d decision, ok bool) {
	m, ok := strict.Object(body, "approvalId", "runId", "call", "decision")
	if !ok {
		return d, false
	}
	var word string
	if !strict.ID(m, "approvalId", &d.approvalID) || !strict.ID(m, "runId", &d.runID) ||
		!strict.String(m, "decision", &word, true) {
		return d, false
	}
	if d.outcome, ok = decisionOutcomes[word]; !ok {
		return d, false
	}
	c, ok := strict.Object(m["call"], "id", "name", "arguments")
	if !ok || !strict.ID(c, "id", &d.callID) || !strict.String(c, "name", &d.callName, true) ||
		!protocol.IsToolName(d.callName) {
		return d, false
	}
	args, ok := c["arguments"]
	if !ok || !strict.IsObject(args) {
		return d, false
	}
	if d.args, ok = strict.Lossless(args); !ok {
		return d, false
	}
	return d, true
}

// Decide serves one decision of principal p (§4.3): the binding checks in
// their order, the audit record, and the settlement of the pending
// approval. It returns the receipt (an ApprovalResolution) or a
// *protocol.Error. A decision is single use: once it has settled an
// approval, the same id is APPROVAL_NOT_FOUND.
func (s *Service) Decide(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	d, ok := parseDecision(body)
	if !ok {
		return nil, s.reject(ctx, p, "", "", protocol.CodeInvalidApproval)
	}
	s.mu.Lock()
	pa := s.pending[d.approvalID]
	if pa == nil || pa.finished || pa.subject != p.Subject {
		// Another subject's approval gets the same answer as none.
		s.mu.Unlock()
		return nil, s.reject(ctx, p, d.approvalID, d.runID, protocol.CodeApprovalNotFound)
	}
	if !pa.expiresAt.IsZero() && !s.cfg.Now().Before(pa.expiresAt) {
		// Expired by the clock, whether or not its timer has fired.
		s.finishLocked(ctx, pa, runtime.ReviewExpired, "")
		s.mu.Unlock()
		return nil, s.reject(ctx, p, d.approvalID, d.runID, protocol.CodeApprovalNotFound)
	}
	if !p.Providers[pa.provider] || !p.ApproveTools[pa.call.Call.Name] {
		s.mu.Unlock()
		return nil, s.reject(ctx, p, d.approvalID, d.runID, protocol.CodeForbidden)
	}
	if d.runID != pa.runID || d.callID != pa.call.Call.ID || d.callName != pa.call.Call.Name ||
		!reflect.DeepEqual(d.args, pa.args) {
		s.mu.Unlock()
		return nil, s.reject(ctx, p, d.approvalID, d.runID, protocol.CodeApprovalMismatch)
	}
	st := s.finishLocked(ctx, pa, d.outcome, p.TokenID)
	s.mu.Unlock()
	if st.err != nil {
		return nil, st.err
	}
	return json.Marshal(Resolution{
		ApprovalID: pa.id, RunID: pa.runID, CallID: pa.call.Call.ID,
		Outcome: outcomeNames[d.outcome], DecidedAt: stamp(st.decidedAt),
	})
}

// reject records a refused decision (approval.rejected) and returns its
// error; when even that record fails, APPROVAL_AUDIT_FAILED — nothing was
// authorized either way.
func (s *Service) reject(ctx context.Context, p *runtime.Principal, approvalID, runID string, code protocol.Code) error {
	if err := s.audit.write(ctx, &record{
		Type: "approval.rejected", At: stamp(s.cfg.Now()), Subject: p.Subject, TokenID: p.TokenID,
		ApprovalID: approvalID, RunID: runID, Code: string(code),
	}); err != nil {
		s.log.Warn("approval audit failed", "event", "approval.rejected", "err", err)
		return protocol.Wrap(protocol.CodeApprovalAuditFailed, err)
	}
	return protocol.New(code)
}
