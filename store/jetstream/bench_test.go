package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"adhost/runtime/durable"
	"adhost/store"
	"adhost/store/jetstream/natstest"
)

// backends opens each backend for a benchmark: the Badger store on disk
// (synced commits) and JetStream on an in-process server (loopback,
// replicas 1, every write synced).
func backends(b *testing.B) map[string]durable.Store {
	b.Helper()
	bs, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bs.Close() })
	return map[string]durable.Store{"badger": bs, "jetstream": open(b, natstest.Start(b, ""))}
}

// BenchmarkSessionContinue is the store's part of one session turn, as
// runtime/sessions writes it: read the record, compare-and-set it to
// running, compare-and-set the committed turn (about 2 KB of history).
// p50-ms is the median of one turn's three operations.
//
//	go test -run '^$' -bench SessionContinue -benchtime 2000x ./store/jetstream/
func BenchmarkSessionContinue(b *testing.B) {
	value := make([]byte, 2048)
	for name, st := range backends(b) {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			key := fmt.Sprintf("sessions/v1/bench-%d", time.Now().UnixNano())
			if _, err := st.Create(ctx, key, value); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				e, err := st.Get(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				r, err := st.Update(ctx, key, value, e.Revision)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.Update(ctx, key, value, r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// BenchmarkJobEvents is a job's event traffic: appends of ~300-byte
// events with the expected last sequence, from 8 jobs at once, then its
// pages of 100 read back.
func BenchmarkJobEvents(b *testing.B) {
	ev := make([]byte, 300)
	for name, st := range backends(b) {
		b.Run(name+"/append", func(b *testing.B) {
			ctx := context.Background()
			b.SetParallelism(4) // 2 cores × 4: 8 jobs appending
			var n int64
			b.RunParallel(func(pb *testing.PB) {
				log := fmt.Sprintf("jobs/v1/ev/bench-%d-%d", time.Now().UnixNano(), n)
				n++
				last := uint64(0)
				for pb.Next() {
					var err error
					if last, err = st.Append(ctx, log, last, ev); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(name+"/page", func(b *testing.B) {
			ctx := context.Background()
			log := fmt.Sprintf("jobs/v1/ev/page-%d", time.Now().UnixNano())
			for i := range 1000 {
				if _, err := st.Append(ctx, log, uint64(i), ev); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				recs, err := st.Read(ctx, log, uint64(i%9)*100, 100, 1_500_000)
				if err != nil || len(recs) != 100 {
					b.Fatalf("%d %v", len(recs), err)
				}
			}
		})
	}
}
