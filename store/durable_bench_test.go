package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// BenchmarkDurableCommit measures durable (synced) commits of KV creates
// and one-record log appends from 1, 8 and 64 goroutines, the shape of
// many jobs each committing its events. ns/op is wall time per
// acknowledged operation (1e9/ns-op = commits/s); batches/op is the group
// commits per operation: each batch is one Badger transaction, one write
// and one sync of the memtable log (plus one of the value log).
//
// BadgerTxn is the baseline without the committer: one synced Badger
// transaction per operation, batched only by Badger's own write channel.
//
//	go test -run '^$' -bench DurableCommit -benchtime 4000x ./store/
func BenchmarkDurableCommit(b *testing.B) {
	ctx := context.Background()
	record := make([]byte, 300) // about one job event
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("Create/g=%d", g), func(b *testing.B) {
			s := benchStore(b)
			benchOps(b, s, g, func(i int) error {
				_, err := s.Create(ctx, fmt.Sprintf("jobs/%d", i), record)
				return err
			})
		})
		b.Run(fmt.Sprintf("Append/g=%d", g), func(b *testing.B) {
			s := benchStore(b)
			// One log per goroutine, as each job has its own.
			var lasts [64]uint64
			benchOps(b, s, g, func(i int) error {
				l := i % g
				last, err := s.Append(ctx, fmt.Sprintf("ev/%d", l), lasts[l], record)
				lasts[l] = last
				return err
			})
		})
		b.Run(fmt.Sprintf("BadgerTxn/g=%d", g), func(b *testing.B) {
			s := benchStore(b)
			benchOps(b, s, g, func(i int) error {
				return s.db.Update(func(txn *badger.Txn) error {
					return txn.Set(fmt.Appendf(nil, "v1/bench/%d", i), record)
				})
			})
		})
	}
}

func benchStore(b *testing.B) *Store {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchOps runs b.N calls of op over g goroutines; goroutine w makes the
// calls i ≡ w (mod g), so per-goroutine state indexed by i%g is its own.
func benchOps(b *testing.B, s *Store, g int, op func(i int) error) {
	var failed atomic.Bool
	batches0 := s.batches.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := w; i < b.N; i += g {
				if err := op(i); err != nil && !failed.Swap(true) {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(s.batches.Load()-batches0)/float64(b.N), "batches/op")
}

// BenchmarkDurableRead reads event pages — up to 100 records of ~300
// bytes after a cursor, as a job's events page does — from a log of 1,000
// records, from 8 goroutines. 1e9/ns-op is pages/s.
//
//	go test -run '^$' -bench DurableRead ./store/
func BenchmarkDurableRead(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	record := make([]byte, 300)
	var last uint64
	for range 10 {
		recs := make([][]byte, 100)
		for i := range recs {
			recs[i] = record
		}
		var err error
		if last, err = s.Append(ctx, "ev/read", last, recs...); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			after := next.Add(97) % 900
			recs, err := s.Read(ctx, "ev/read", after, 100, 1_500_000)
			if err != nil || len(recs) != 100 || recs[0].Seq != after+1 {
				b.Errorf("Read after %d: %d records %v", after, len(recs), err)
				return
			}
		}
	})
}
