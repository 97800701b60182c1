package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"adhost/runtime/durable"
	"adhost/runtime/durable/durabletest"
	"adhost/store"
)

func TestDurableConformance(t *testing.T) {
	t.Run("InMemory", func(t *testing.T) {
		durabletest.Run(t, func(t *testing.T) durable.Store {
			s, err := store.Open("", store.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("Disk", func(t *testing.T) {
		durabletest.Run(t, func(t *testing.T) durable.Store {
			s := open(t, t.TempDir())
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

// Revisions and fencing tokens keep growing across a delete and re-create
// and across a restart, and everything written is there after reopening.
func TestDurableSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := open(t, dir)
	r1, err := s.Create(ctx, "k", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", r1); err != nil {
		t.Fatal(err)
	}
	r2, err := s.Create(ctx, "k", []byte("two"))
	if err != nil || r2 <= r1 {
		t.Fatalf("re-Create: %d (was %d) %v", r2, r1, err)
	}
	if _, err := s.Append(ctx, "log", 0, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	l1, err := s.Acquire(ctx, "lease", "host-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, durable.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := s.Create(ctx, "x", nil); !errors.Is(err, durable.ErrClosed) {
		t.Fatalf("Create after Close: %v", err)
	}

	s = open(t, dir)
	defer s.Close()
	e, err := s.Get(ctx, "k")
	if err != nil || string(e.Value) != "two" || e.Revision != r2 {
		t.Fatalf("Get after reopen: %+v %v", e, err)
	}
	if err := s.Delete(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	r3, err := s.Create(ctx, "k", []byte("three"))
	if err != nil || r3 <= r2 {
		t.Fatalf("Create after reopen: %d (was %d) %v", r3, r2, err)
	}
	recs, err := s.Read(ctx, "log", 0, 0, 0)
	if err != nil || len(recs) != 2 || string(recs[1].Data) != "b" {
		t.Fatalf("Read after reopen: %+v %v", recs, err)
	}
	if _, err := s.Acquire(ctx, "lease", "host-b", time.Hour); !errors.Is(err, durable.ErrHeld) {
		t.Fatalf("lease not kept: %v", err)
	}
	l2, err := s.Acquire(ctx, "lease", "host-a", time.Hour)
	if err != nil || l2.Token <= l1.Token {
		t.Fatalf("re-Acquire after reopen: %+v (was %d) %v", l2, l1.Token, err)
	}
}

// The records of log "a" and of log "a/b" (whose name extends a's) stay
// apart, and so do keys under a prefix that another key extends.
func TestDurableNamesNest(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	defer s.Close()
	for _, l := range []string{"a", "a/b", "a-"} {
		if _, err := s.Append(ctx, l, 0, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"a", "a/b", "a-"} {
		recs, err := s.Read(ctx, l, 0, 0, 0)
		if err != nil || len(recs) != 1 || string(recs[0].Data) != l {
			t.Fatalf("Read %s: %+v %v", l, recs, err)
		}
	}
	if recs, err := s.Read(ctx, "a", math.MaxUint64, 0, 0); err != nil || len(recs) != 0 {
		t.Fatalf("Read after the largest sequence: %+v %v", recs, err)
	}
	if err := s.DeleteLog(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Last(ctx, "a/b"); n != 1 {
		t.Fatalf("DeleteLog a took a/b: last %d", n)
	}
	for _, k := range []string{"p", "p/1", "p/2", "q"} {
		s.Create(ctx, k, nil)
	}
	es, err := s.List(ctx, "p/", "", 0)
	if err != nil || len(es) != 2 || es[0].Key != "p/1" {
		t.Fatalf("List p/: %+v %v", es, err)
	}
	es, _ = s.List(ctx, "", "p/2", 0)
	if len(es) != 1 || es[0].Key != "q" {
		t.Fatalf("List after p/2: %+v", es)
	}
	es, _ = s.List(ctx, "p/", "a", 1)
	if len(es) != 1 || es[0].Key != "p/1" {
		t.Fatalf("List with after before the prefix: %+v", es)
	}
}

// Values and records are refused past the store's bound and taken at it.
func TestDurableBounds(t *testing.T) {
	ctx := t.Context()
	for _, mem := range []bool{false, true} {
		t.Run(fmt.Sprint("InMemory=", mem), func(t *testing.T) {
			dir := ""
			if !mem {
				dir = t.TempDir()
			}
			s, err := store.Open(dir, store.Options{InMemory: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			max := s.MaxValue()
			at, over := bytes.Repeat([]byte("x"), max), bytes.Repeat([]byte("x"), max+1)
			if _, err := s.Create(ctx, "over", over); !errors.Is(err, durable.ErrTooLarge) {
				t.Fatalf("Create over the bound: %v", err)
			}
			if _, err := s.Create(ctx, "at", at); err != nil {
				t.Fatalf("Create at the bound: %v", err)
			}
			if e, err := s.Get(ctx, "at"); err != nil || len(e.Value) != max {
				t.Fatalf("Get: %d %v", len(e.Value), err)
			}
			if _, err := s.Append(ctx, "l", 0, over); !errors.Is(err, durable.ErrTooLarge) {
				t.Fatalf("Append over the bound: %v", err)
			}
			if _, err := s.Append(ctx, "l", 0, at[:max/2+1], at[:max/2]); !errors.Is(err, durable.ErrTooLarge) {
				t.Fatalf("Append of records over the bound together: %v", err)
			}
			if n, _ := s.Last(ctx, "l"); n != 0 {
				t.Fatalf("refused Append wrote: last %d", n)
			}
			if _, err := s.Append(ctx, "l", 0, at[:max/2], at[:max/2]); err != nil {
				t.Fatalf("Append at the bound: %v", err)
			}
			// Many small records: past Badger's transaction limit.
			many := make([][]byte, 40000)
			for i := range many {
				many[i] = []byte("small record")
			}
			if _, err := s.Append(ctx, "many", 0, many...); !errors.Is(err, durable.ErrTooLarge) {
				t.Fatalf("Append past the transaction limit: %v", err)
			}
			if _, err := s.Append(ctx, "many", 0, many[:10000]...); err != nil {
				t.Fatalf("Append of 10000 small records: %v", err)
			}
		})
	}
}

// A log longer than one deletion step is deleted whole.
func TestDurableDeleteLongLog(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	defer s.Close()
	recs := make([][]byte, 3000)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, "%d", i)
	}
	last, err := s.Append(ctx, "long", 0, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if last, err = s.Append(ctx, "long", last, recs...); err != nil || last != 6000 {
		t.Fatalf("Append: %d %v", last, err)
	}
	if err := s.DeleteLog(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(ctx, "long", 0, 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("Read after DeleteLog: %d records %v", len(got), err)
	}
	if n, _ := s.Append(ctx, "long", 0, []byte("new")); n != 1 {
		t.Fatalf("Append after DeleteLog: last %d", n)
	}
}

// Concurrent writers of one log and one key, each retrying on a lost race,
// leave a log without gaps or duplicates and a counter that counts them
// all: every group commit sees the writes of the one before.
func TestDurableConcurrentCAS(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	defer s.Close()
	const writers, each = 16, 20
	if _, err := s.Create(ctx, "counter", []byte("0")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					last, err := s.Last(ctx, "log")
					if err != nil {
						t.Error(err)
						return
					}
					_, err = s.Append(ctx, "log", last, fmt.Appendf(nil, "%d/%d", w, i))
					if err == nil {
						break
					}
					if !errors.Is(err, durable.ErrSequence) {
						t.Error(err)
						return
					}
				}
				for {
					e, err := s.Get(ctx, "counter")
					if err != nil {
						t.Error(err)
						return
					}
					var n int
					fmt.Sscan(string(e.Value), &n)
					_, err = s.Update(ctx, "counter", fmt.Append(nil, n+1), e.Revision)
					if err == nil {
						break
					}
					if !errors.Is(err, durable.ErrRevision) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	recs, err := s.Read(ctx, "log", 0, 0, 0)
	if err != nil || len(recs) != writers*each {
		t.Fatalf("Read: %d records %v", len(recs), err)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) || seen[string(r.Data)] {
			t.Fatalf("record %d: seq %d %q (duplicate %v)", i, r.Seq, r.Data, seen[string(r.Data)])
		}
		seen[string(r.Data)] = true
	}
	if e, _ := s.Get(ctx, "counter"); string(e.Value) != fmt.Sprint(writers*each) {
		t.Fatalf("counter = %s, want %d", e.Value, writers*each)
	}
}
