package approvals

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

func TestPolicy(t *testing.T) {
	s := New(Config{AllowIdlePause: true})
	noPause := New(Config{})
	for _, tc := range []struct {
		raw    string
		want   protocol.Code // "" = accepted
		pause  bool
		expiry time.Duration
	}{
		{`{"mode":"interactive","idlePolicy":"pause"}`, "", true, 0},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":1}`, "", false, time.Millisecond},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":2147483647}`, "", false, 2147483647 * time.Millisecond},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":2.0}`, "", false, 2 * time.Millisecond},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":2147483648}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":0}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":1.5}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive","idlePolicy":"continue","expiresAfterMs":null}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive"}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"batch","idlePolicy":"pause"}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive","idlePolicy":"Pause"}`, protocol.CodeInvalidRequest, false, 0},
		{`{"Mode":"interactive","idlePolicy":"pause"}`, protocol.CodeInvalidRequest, false, 0},
		{`{"mode":"interactive","idlePolicy":"pause","x":1}`, protocol.CodeInvalidRequest, false, 0},
	} {
		pol, err := s.Policy(json.RawMessage(tc.raw))
		if protocol.CodeOf(err) != tc.want && !(tc.want == "" && err == nil) {
			t.Errorf("%s: %v, want %q", tc.raw, err, tc.want)
			continue
		}
		if err == nil && (pol.IdlePause != tc.pause || pol.ExpiresAfter != tc.expiry) {
			t.Errorf("%s: %+v", tc.raw, pol)
		}
	}
	if _, err := noPause.Policy(json.RawMessage(`{"mode":"interactive","idlePolicy":"pause"}`)); protocol.CodeOf(err) != protocol.CodeApprovalPolicy {
		t.Errorf("pause forbidden: %v", err)
	}
	if _, err := noPause.Policy(json.RawMessage(`{"mode":"interactive","idlePolicy":"continue"}`)); err != nil {
		t.Errorf("continue: %v", err)
	}
}

// racingLogs appends a record of another host to the log before the
// first append of every writer, so the cached sequence is stale.
type racingLogs struct {
	durable.Logs
	raced bool
}

func (r *racingLogs) Append(ctx context.Context, log string, last uint64, recs ...[]byte) (uint64, error) {
	if !r.raced {
		r.raced = true
		if _, err := r.Logs.Append(ctx, log, last, []byte(`{"type":"other host"}`)); err != nil {
			return 0, err
		}
	}
	return r.Logs.Append(ctx, log, last, recs...)
}

// TestAuditSharedLog: another host appending to the same day's log
// between two records of this one loses nothing: both are kept, in order.
func TestAuditSharedLog(t *testing.T) {
	mem := durable.NewMemory()
	a := &auditLog{logs: &racingLogs{Logs: mem}}
	ctx := t.Context()
	at := "2026-12-01T10:00:00.000Z"
	for _, typ := range []string{"approval.requested", "approval.resolved"} {
		if err := a.write(ctx, &record{Type: typ, At: at, Subject: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := mem.Read(ctx, AuditLogName("2026-12-01"), 0, 0, 0)
	if err != nil || len(recs) != 3 || !strings.Contains(string(recs[1].Data), "requested") || !strings.Contains(string(recs[2].Data), "resolved") {
		t.Fatalf("log = %v, %v", recs, err)
	}
	if err := (&auditLog{}).write(ctx, &record{At: at}); err == nil {
		t.Error("no audit log: the write succeeded")
	}
}

// TestReviewCancelledRun: a run that ends while its approval is pending
// invalidates the approval: a later decision is APPROVAL_NOT_FOUND and
// the audit records it as cancelled.
func TestReviewCancelledRun(t *testing.T) {
	mem := durable.NewMemory()
	s := New(Config{Audit: mem})
	ctx, cancel := context.WithCancel(t.Context())
	var requested json.RawMessage
	done := make(chan runtime.ReviewOutcome, 1)
	go func() {
		out, _ := s.Review(ctx, &runtime.Review{
			RunID: "run-1", Subject: "alice", Provider: "p",
			Call: abiCall(`{"a":1}`),
			Emit: func(typ, _ string, v json.RawMessage) bool {
				if typ == runtime.EventApprovalRequested {
					requested = v
					cancel()
				}
				return true
			},
		})
		done <- out
	}()
	if out := <-done; out != runtime.ReviewCancelled {
		t.Fatalf("outcome %v", out)
	}
	var req struct{ ApprovalID string }
	_ = json.Unmarshal(requested, &req)
	p := &runtime.Principal{Subject: "alice", Providers: map[string]bool{"p": true}, ApproveTools: map[string]bool{"t": true}}
	body := `{"approvalId":"` + req.ApprovalID + `","runId":"run-1","call":{"id":"c1","name":"t","arguments":{"a":1}},"decision":"approve"}`
	if _, err := s.Decide(t.Context(), p, []byte(body)); protocol.CodeOf(err) != protocol.CodeApprovalNotFound {
		t.Errorf("decision after the run ended: %v", err)
	}
	recs, _ := mem.Read(t.Context(), AuditLogName(time.Now().UTC().Format("2006-01-02")), 0, 0, 0)
	if len(recs) != 3 || !strings.Contains(string(recs[1].Data), `"outcome":"cancelled"`) || !strings.Contains(string(recs[2].Data), "approval.rejected") {
		t.Errorf("audit: %d records", len(recs))
	}
	if s.Pending() != 0 {
		t.Errorf("%d pending", s.Pending())
	}
}
