package sessions

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// TestTwoHostsOneStore: with presence, a turn running on one host is
// SESSION_BUSY on another and survives the other's New; once its host is
// gone, the next continue anywhere finds it interrupted. Two hosts racing
// on one revision get one success and one conflict.
func TestTwoHostsOneStore(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	pa, err := durable.StartPresence(ctx, e.kv, "host-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := durable.StartPresence(ctx, e.kv, "host-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Stop(ctx)
	cfgA, cfgB := e.cfg, e.cfg
	cfgA.Presence, cfgB.Presence = pa, pb
	a, err := New(ctx, e.kv, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, e.kv, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	s := create(t, a, e.p, `{"provider":"p","model":"m","mode":"history"}`)
	if res, err := e.turn(t, b, s.Session.ID, 0, "on b"); err != nil || res.Text != "echo:on b" {
		t.Fatalf("continue on the other host: %v %v", res, err)
	}
	// Racing on revision 1 from both hosts.
	req := func() *protocol.RunRequest {
		return &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", Session: json.RawMessage(`{"id":"` + s.Session.ID + `","revision":1}`)}
	}
	_, _, _, errA := a.Begin(ctx, e.p, req())
	_, _, _, errB := b.Begin(ctx, e.p, req())
	if errA != nil || protocol.CodeOf(errB) != protocol.CodeSessionBusy {
		t.Fatalf("race: a %v, b %v", errA, errB)
	}
	// A third host starting meanwhile leaves a's live turn alone.
	c, err := New(ctx, e.kv, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, _, _, err := b.Begin(ctx, e.p, req()); protocol.CodeOf(err) != protocol.CodeSessionBusy {
		t.Fatalf("after another host's New: %v", err)
	}
	// Host a dies mid-turn (its presence lapses); b interrupts the turn.
	pa.Stop(ctx)
	if _, _, _, err := b.Begin(ctx, e.p, req()); protocol.CodeOf(err) != protocol.CodeSessionInterrupted {
		t.Fatalf("after a died: %v", err)
	}
	got, err := read(t, b, s.Session.ID)
	if err != nil || got.Session.State != StateInterrupted || got.Session.Revision != 1 {
		t.Fatalf("read: %+v %v", got.Session, err)
	}
}
