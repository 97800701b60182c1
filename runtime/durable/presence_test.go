package durable_test

import (
	"context"
	"testing"
	"time"

	"adhost/runtime/durable"
)

func TestPresence(t *testing.T) {
	ctx := context.Background()
	m := durable.NewMemory()
	now := time.Unix(1000, 0)
	m.Now = func() time.Time { return now }
	a, err := durable.StartPresence(ctx, m, "host-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := durable.StartPresence(ctx, m, "host-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    *durable.Presence
		id   string
		want bool
	}{{a, "host-a", true}, {a, "host-b", true}, {b, "host-a", true}, {a, "never-seen", false}, {a, "bad id", false}} {
		if got, err := c.p.Alive(ctx, c.id); err != nil || got != c.want {
			t.Errorf("%s: Alive(%s) = %v %v, want %v", c.p.ID(), c.id, got, err, c.want)
		}
	}
	// The probe of a dead id gives the lease back: asking twice is the
	// same answer, and asking does not make it alive.
	if got, _ := a.Alive(ctx, "never-seen"); got {
		t.Fatal("a probed id became alive")
	}
	// A stopped process is gone at once; an expired one after its ttl.
	b.Stop(ctx)
	if got, _ := a.Alive(ctx, "host-b"); got {
		t.Fatal("stopped host still alive")
	}
	c, err := durable.StartPresence(ctx, m, "host-c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	now = now.Add(2 * time.Minute) // c's renewals run on the real clock: it has not renewed on this one
	if got, _ := a.Alive(ctx, "host-c"); got {
		t.Fatal("expired host still alive")
	}
	a.Stop(ctx)
}
