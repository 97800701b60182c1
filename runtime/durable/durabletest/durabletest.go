// Package durabletest is the conformance suite of durable.Store: every
// backend (durable.Memory, store's Badger backend, a later JetStream one)
// runs it, so the features above them can rely on the same semantics.
package durabletest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"adhost/runtime/durable"
)

// Run runs the suite against fresh stores made by open.
func Run(t *testing.T, open func(t *testing.T) durable.Store) {
	ctx := context.Background()
	t.Run("KV", func(t *testing.T) {
		s := open(t)
		if _, err := s.Get(ctx, "a/b"); !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("Get absent: %v", err)
		}
		r1, err := s.Create(ctx, "a/b", []byte("one"))
		if err != nil || r1 == 0 {
			t.Fatalf("Create: %d %v", r1, err)
		}
		if _, err := s.Create(ctx, "a/b", []byte("x")); !errors.Is(err, durable.ErrExists) {
			t.Fatalf("Create twice: %v", err)
		}
		if _, err := s.Update(ctx, "a/b", []byte("x"), r1+100); !errors.Is(err, durable.ErrRevision) {
			t.Fatalf("Update stale: %v", err)
		}
		r2, err := s.Update(ctx, "a/b", []byte("two"), r1)
		if err != nil || r2 <= r1 {
			t.Fatalf("Update: %d %v", r2, err)
		}
		e, err := s.Get(ctx, "a/b")
		if err != nil || string(e.Value) != "two" || e.Revision != r2 || e.Key != "a/b" {
			t.Fatalf("Get: %+v %v", e, err)
		}
		if _, err := s.Update(ctx, "nope", []byte("x"), 1); !errors.Is(err, durable.ErrRevision) {
			t.Fatalf("Update absent: %v", err)
		}
		if err := s.Delete(ctx, "a/b", r1); !errors.Is(err, durable.ErrRevision) {
			t.Fatalf("Delete stale: %v", err)
		}
		for _, k := range []string{"a/c", "a/a", "b/a", "a/d"} {
			if _, err := s.Create(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		es, err := s.List(ctx, "a/", "a/a", 2)
		if err != nil || len(es) != 2 || es[0].Key != "a/b" || es[1].Key != "a/c" {
			t.Fatalf("List: %+v %v", es, err)
		}
		if err := s.Delete(ctx, "a/b", r2); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "a/b", 0); err != nil {
			t.Fatalf("Delete absent rev 0: %v", err)
		}
		r3, err := s.Create(ctx, "a/b", []byte("again"))
		if err != nil || r3 <= r2 {
			t.Fatalf("re-Create after Delete: rev %d (was %d) %v", r3, r2, err)
		}
		if _, err := s.Create(ctx, "bad key", nil); err == nil {
			t.Fatal("key with a space accepted")
		}
	})
	t.Run("CreateRace", func(t *testing.T) {
		s := open(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 16 {
			wg.Go(func() {
				_, err := s.Create(ctx, "race", fmt.Appendf(nil, "%d", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case !errors.Is(err, durable.ErrExists):
					t.Errorf("Create: %v", err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d creators won", won)
		}
	})
	t.Run("Logs", func(t *testing.T) {
		s := open(t)
		if n, err := s.Last(ctx, "l/1"); err != nil || n != 0 {
			t.Fatalf("Last empty: %d %v", n, err)
		}
		if _, err := s.Append(ctx, "l/1", 1, []byte("x")); !errors.Is(err, durable.ErrSequence) {
			t.Fatalf("Append at wrong sequence: %v", err)
		}
		last, err := s.Append(ctx, "l/1", 0, []byte("aa"), []byte("bbb"), []byte("c"))
		if err != nil || last != 3 {
			t.Fatalf("Append: %d %v", last, err)
		}
		if _, err := s.Append(ctx, "l/1", 2, []byte("x")); !errors.Is(err, durable.ErrSequence) {
			t.Fatalf("stale Append: %v", err)
		}
		if _, err := s.Append(ctx, "l/2", 0, []byte("other")); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Read(ctx, "l/1", 0, 0, 0)
		if err != nil || len(recs) != 3 || recs[1].Seq != 2 || string(recs[1].Data) != "bbb" {
			t.Fatalf("Read all: %+v %v", recs, err)
		}
		if recs, _ = s.Read(ctx, "l/1", 1, 1, 0); len(recs) != 1 || recs[0].Seq != 2 {
			t.Fatalf("Read limit: %+v", recs)
		}
		if recs, _ = s.Read(ctx, "l/1", 0, 0, 5); len(recs) != 2 {
			t.Fatalf("Read maxBytes 5 of 2+3+1: %+v", recs)
		}
		if recs, _ = s.Read(ctx, "l/1", 0, 0, 1); len(recs) != 1 {
			t.Fatalf("Read: the first record is always returned: %+v", recs)
		}
		if recs, _ = s.Read(ctx, "l/1", 3, 0, 0); len(recs) != 0 {
			t.Fatalf("Read at end: %+v", recs)
		}
		if err := s.DeleteLog(ctx, "l/1"); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.Last(ctx, "l/1"); n != 0 {
			t.Fatalf("Last after DeleteLog: %d", n)
		}
		if recs, _ = s.Read(ctx, "l/2", 0, 0, 0); len(recs) != 1 {
			t.Fatalf("DeleteLog touched another log: %+v", recs)
		}
	})
	t.Run("Leases", func(t *testing.T) {
		s := open(t)
		a, err := s.Acquire(ctx, "lease", "host-a", time.Hour)
		if err != nil || a.Token == 0 {
			t.Fatalf("Acquire: %+v %v", a, err)
		}
		if cur, err := s.Acquire(ctx, "lease", "host-b", time.Hour); !errors.Is(err, durable.ErrHeld) || cur.Owner != "host-a" {
			t.Fatalf("Acquire held: %+v %v", cur, err)
		}
		if _, err := s.Renew(ctx, "lease", a.Token, time.Hour); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		// The same owner again (a restarted process): a new token fences
		// the old one.
		a2, err := s.Acquire(ctx, "lease", "host-a", time.Hour)
		if err != nil || a2.Token <= a.Token {
			t.Fatalf("re-Acquire: %+v %v", a2, err)
		}
		if _, err := s.Renew(ctx, "lease", a.Token, time.Hour); !errors.Is(err, durable.ErrFenced) {
			t.Fatalf("Renew with a fenced token: %v", err)
		}
		if err := s.Release(ctx, "lease", a2.Token); err != nil {
			t.Fatal(err)
		}
		b, err := s.Acquire(ctx, "lease", "host-b", 50*time.Millisecond)
		if err != nil || b.Token <= a2.Token {
			t.Fatalf("Acquire after Release: %+v %v", b, err)
		}
		time.Sleep(80 * time.Millisecond)
		c, err := s.Acquire(ctx, "lease", "host-c", time.Hour)
		if err != nil || c.Token <= b.Token {
			t.Fatalf("Acquire after expiry: %+v %v", c, err)
		}
		if err := s.Release(ctx, "lease", b.Token); !errors.Is(err, durable.ErrFenced) {
			t.Fatalf("Release by the expired holder: %v", err)
		}
	})
}
