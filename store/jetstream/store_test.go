package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"adhost/runtime/durable"
	"adhost/runtime/durable/durabletest"
	"adhost/store/jetstream"
	"adhost/store/jetstream/natstest"
)

var prefixes atomic.Int64

// open returns a store on srv under a fresh bucket prefix: the tests of
// one server are independent.
func open(t testing.TB, srv *natstest.Server) *jetstream.Store {
	t.Helper()
	st, err := jetstream.Open(context.Background(), jetstream.Options{
		URLs: []string{srv.URL}, BucketPrefix: fmt.Sprintf("T%d", prefixes.Add(1)), Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	srv := natstest.Start(t, "")
	durabletest.Run(t, func(t *testing.T) durable.Store { return open(t, srv) })
}

// Two stores (two hosts) on one server see one state: a log appended
// through one is read through the other, and of two appends at the same
// expected sequence exactly one is taken.
func TestTwoHostsOneLog(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	a := open(t, srv)
	b, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{srv.URL}, BucketPrefix: bucketOf(t, a)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for round := range 50 {
		var wins atomic.Int32
		done := make(chan error, 2)
		for _, st := range []*jetstream.Store{a, b} {
			go func() {
				_, err := st.Append(ctx, "jobs/v1/ev/x", uint64(round), fmt.Appendf(nil, "r%d", round))
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, durable.ErrSequence) {
					done <- err
					return
				}
				done <- nil
			}()
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d appends won", round, wins.Load())
		}
	}
	recs, err := b.Read(ctx, "jobs/v1/ev/x", 0, 0, 0)
	if err != nil || len(recs) != 50 || recs[49].Seq != 50 {
		t.Fatalf("read back: %d records %v", len(recs), err)
	}
}

// bucketOf recovers the prefix open chose (the last one issued).
func bucketOf(t testing.TB, _ *jetstream.Store) string {
	return fmt.Sprintf("T%d", prefixes.Load())
}

// A multi-record append is one message; reads starting inside it, and
// pages bounded by count and bytes, return exactly the records asked for.
func TestFramesAndPages(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	s := open(t, srv)
	if _, err := s.Append(ctx, "l", 0, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "l", 1, []byte("22"), []byte("333"), []byte("4444")); err != nil {
		t.Fatal(err)
	}
	for i := 5; i <= 600; i++ {
		if _, err := s.Append(ctx, "l", uint64(i-1), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Last(ctx, "l"); err != nil || n != 600 {
		t.Fatalf("Last: %d %v", n, err)
	}
	for after := uint64(0); after <= 6; after++ {
		recs, err := s.Read(ctx, "l", after, 2, 0)
		if err != nil || len(recs) != 2 || recs[0].Seq != after+1 || string(recs[0].Data) != strings.Repeat(fmt.Sprint(after+1), int(min(after+1, 4))) && after < 4 {
			t.Fatalf("Read after %d: %+v %v", after, recs, err)
		}
	}
	// More than one batch of the scan.
	recs, err := s.Read(ctx, "l", 3, 0, 0)
	if err != nil || len(recs) != 597 || recs[0].Seq != 4 || recs[596].Seq != 600 {
		t.Fatalf("Read the rest: %d %v", len(recs), err)
	}
	if recs, _ := s.Read(ctx, "l", 600, 0, 0); len(recs) != 0 {
		t.Fatalf("Read at the end: %d", len(recs))
	}
	// Byte bound at its edge: 2+3 fit in 5, the 4 does not.
	if recs, _ := s.Read(ctx, "l", 1, 0, 5); len(recs) != 2 {
		t.Fatalf("maxBytes 5: %+v", recs)
	}
	if recs, _ := s.Read(ctx, "l", 1, 0, 9); len(recs) != 3 {
		t.Fatalf("maxBytes 9: %+v", recs)
	}
	// A log whose name extends another's stays apart.
	if _, err := s.Append(ctx, "l/1", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Last(ctx, "l"); n != 600 {
		t.Fatalf("l/1 changed l: %d", n)
	}
	if err := s.DeleteLog(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Last(ctx, "l/1"); n != 1 {
		t.Fatalf("DeleteLog l removed l/1: %d", n)
	}
	if last, err := s.Append(ctx, "l", 0, []byte("again")); err != nil || last != 1 {
		t.Fatalf("append after delete: %d %v", last, err)
	}
}

// List pages in key order across levels, and never returns keys of a
// sibling whose name merely starts like the prefix's last level.
func TestListOrder(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	s := open(t, srv)
	for i := 700; i > 0; i-- {
		if _, err := s.Create(ctx, fmt.Sprintf("p/k%04d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"p2/x", "p/k/deeper", "q"} {
		if _, err := s.Create(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "p/k0007", 0); err != nil {
		t.Fatal(err)
	}
	all := listAll(t, s, "p/", 256)
	if len(all) != 700 || all[0] != "p/k/deeper" || all[1] != "p/k0001" || all[699] != "p/k0700" {
		t.Fatalf("List: %d keys, %v … %v", len(all), all[:2], all[len(all)-1])
	}
	if es, _ := s.List(ctx, "p/k00", "", 0); len(es) != 98 {
		t.Fatalf("partial level prefix: %d", len(es))
	}
}

// A restarted server (same store directory) keeps everything
// acknowledged; during the outage operations fail with an ordinary error
// (not one of the durable answers a feature would take for a lost race),
// and succeed again once it is back, on the same connection.
func TestServerRestart(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	st, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{srv.URL}, BucketPrefix: "R", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rev, err := st.Create(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "l", 0, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	for _, err := range []error{
		func() error { _, err := st.Get(ctx, "k"); return err }(),
		func() error { _, err := st.Append(ctx, "l", 2, []byte("c")); return err }(),
		func() error { _, err := st.Update(ctx, "k", []byte("w"), rev); return err }(),
	} {
		if err == nil {
			t.Fatal("an operation succeeded with the server down")
		}
		for _, d := range []error{durable.ErrNotFound, durable.ErrRevision, durable.ErrSequence, durable.ErrExists, durable.ErrFenced, durable.ErrClosed} {
			if errors.Is(err, d) {
				t.Fatalf("outage reported as %v", d)
			}
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var e durable.Entry
	for i := 0; ; i++ {
		if e, err = st.Get(ctx, "k"); err == nil || i > 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || string(e.Value) != "v" || e.Revision != rev {
		t.Fatalf("after restart: %+v %v", e, err)
	}
	if last, err := st.Append(ctx, "l", 2, []byte("c")); err != nil || last != 3 {
		t.Fatalf("append after restart: %d %v", last, err)
	}
}

func TestClosedAndTooLarge(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	s := open(t, srv)
	if _, err := s.Create(ctx, "big", make([]byte, 9<<20)); !errors.Is(err, durable.ErrTooLarge) {
		t.Fatalf("9 MiB value: %v", err)
	}
	if _, err := s.Append(ctx, "big", 0, make([]byte, 5<<20), make([]byte, 5<<20)); !errors.Is(err, durable.ErrTooLarge) {
		t.Fatalf("10 MiB append: %v", err)
	}
	s.Close()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, durable.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{"nats://127.0.0.1:1"}, Timeout: 200 * time.Millisecond}); err == nil {
		t.Fatal("opened with no server")
	}
	if _, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{"nats://127.0.0.1:1"}, Replicas: 2}); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("replicas 2: %v", err)
	}
	if _, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{"nats://127.0.0.1:1"}, BucketPrefix: "a.b"}); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("prefix a.b: %v", err)
	}
}

// listAll pages through s.List(prefix) page keys at a time and returns
// every key.
func listAll(t *testing.T, s durable.Store, prefix string, page int) []string {
	t.Helper()
	var all []string
	for after := ""; ; {
		es, err := s.List(context.Background(), prefix, after, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			all = append(all, e.Key)
		}
		if len(es) < page {
			return all
		}
		after = es[len(es)-1].Key
	}
}
