package idempotency

import (
	"context"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// TestTwoHostsOneStore: a key claimed and still running on one host is
// OPERATION_IN_PROGRESS on another while that host lives, a changed
// request is IDEMPOTENCY_CONFLICT there, and once the claiming host is
// gone its unfinished claim replays as OPERATION_UNCERTAIN (never re-run).
func TestTwoHostsOneStore(t *testing.T) {
	ctx := context.Background()
	st := durable.NewMemory()
	pa, err := durable.StartPresence(ctx, st, "host-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := durable.StartPresence(ctx, st, "host-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Stop(ctx)
	a, _ := New(st, Options{Presence: pa})
	b, _ := New(st, Options{Presence: pb})
	key := "k"
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", IdempotencyKey: &key}
	changed := &protocol.RunRequest{Provider: "p", Model: "m", Input: "y", IdempotencyKey: &key}
	c, _, err := a.Begin(ctx, "alice", req, runtime.ModeStream)
	if err != nil || c == nil {
		t.Fatalf("claim on a: %v", err)
	}
	if err := c.Append(ctx, runtime.Event{Type: runtime.EventRunStarted, Sequence: 1, Data: ev("run.started", 1, `,"provider":"p","model":"m"`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Begin(ctx, "alice", req, runtime.ModeStream); protocol.CodeOf(err) != protocol.CodeOperationInProgress {
		t.Fatalf("same key on b while a runs it: %v", err)
	}
	if _, _, err := b.Begin(ctx, "alice", changed, runtime.ModeStream); protocol.CodeOf(err) != protocol.CodeIdempotencyConflict {
		t.Fatalf("changed request on b: %v", err)
	}
	// Another subject's key of that name is b's to claim.
	if c2, _, err := b.Begin(ctx, "bob", req, runtime.ModeStream); c2 == nil || err != nil {
		t.Fatalf("bob on b: %v", err)
	}
	pa.Stop(ctx) // a dies mid-run
	_, rp, err := b.Begin(ctx, "alice", req, runtime.ModeStream)
	if err != nil || rp == nil || rp.Err == nil || rp.Err.Code != protocol.CodeOperationUncertain || len(rp.Events) != 2 {
		t.Fatalf("after a died: %+v %v", rp, err)
	}
}
