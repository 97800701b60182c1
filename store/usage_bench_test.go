//go:build unix

package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/store"
)

// BenchmarkUsage records usage records from 8 goroutines, as concurrent
// runs do, into each sink, and waits for them to be written. ns/op is the
// wall time per record; cpu-ns/op the process's CPU time per record (user
// and system, the sink's own goroutines and Badger's included), the cost
// a busy host pays for it.
func BenchmarkUsage(b *testing.B) {
	b.Run("Store", func(b *testing.B) {
		s, err := store.Open(b.TempDir(), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchUsage(b, s, func() { s.Close() })
	})
	b.Run("JSONL", func(b *testing.B) {
		j, err := store.OpenJSONL(filepath.Join(b.TempDir(), "usage.jsonl"), store.JSONLOptions{})
		if err != nil {
			b.Fatal(err)
		}
		benchUsage(b, j, func() { j.Close() })
	})
}

func benchUsage(b *testing.B, sink runtime.UsageSink, close func()) {
	recs := make([]*runtime.UsageRecord, b.N)
	now := time.Now()
	for i := range recs {
		recs[i] = record(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), now.Add(time.Duration(i)))
	}
	var next atomic.Int64
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := sink.RecordUsage(context.Background(), recs[next.Add(1)-1]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	close() // writes what is queued
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
