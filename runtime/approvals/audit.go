package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"adhost/runtime/durable"
)

// record is one audit entry (§4.7): approval.requested (the snapshot),
// approval.resolved (the outcome, and which token decided) and
// approval.rejected (a refused decision and its code). Arguments appear
// only in the requested record, where the reviewer saw them.
type record struct {
	Type       string    `json:"type"`
	At         string    `json:"at"`
	Subject    string    `json:"subject"`
	Provider   string    `json:"provider,omitempty"`
	TokenID    string    `json:"tokenId,omitempty"`
	ApprovalID string    `json:"approvalId,omitempty"`
	RunID      string    `json:"runId,omitempty"`
	Call       *wireCall `json:"call,omitempty"`
	CallID     string    `json:"callId,omitempty"`
	Tool       string    `json:"tool,omitempty"`
	ExpiresAt  string    `json:"expiresAt,omitempty"`
	Outcome    string    `json:"outcome,omitempty"`
	Code       string    `json:"code,omitempty"`
}

// auditLog appends records to one append-only log per UTC day
// ("approvals/audit/2026-12-01"), so an operator reads or expires a day at
// a time. Appends are serialized; the expected last sequence is cached and
// re-read once when another process appended meanwhile.
type auditLog struct {
	logs durable.Logs

	mu   sync.Mutex
	name string
	last uint64
}

// AuditLogName is the log holding the records of day (YYYY-MM-DD).
func AuditLogName(day string) string { return "approvals/audit/" + day }

var errNoAudit = errors.New("approvals: no audit log configured")

func (a *auditLog) write(ctx context.Context, rec *record) error {
	if a.logs == nil {
		return errNoAudit
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	name := AuditLogName(rec.At[:10])
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx = context.WithoutCancel(ctx) // a record is written whole even as its run ends
	if name != a.name {
		if a.last, err = a.logs.Last(ctx, name); err != nil {
			return err
		}
		a.name = name
	}
	for attempt := 0; ; attempt++ {
		last, err := a.logs.Append(ctx, name, a.last, data)
		if err == nil {
			a.last = last
			return nil
		}
		if !errors.Is(err, durable.ErrSequence) || attempt > 0 {
			a.name = "" // re-read the sequence next time
			return err
		}
		if a.last, err = a.logs.Last(ctx, name); err != nil {
			a.name = ""
			return err
		}
	}
}
