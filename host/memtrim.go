package host

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// idleTrim gives a host's freed heap back to the operating system once the
// host falls idle after a burst of work.
//
// Why: the Go runtime keeps the pages of a collected heap for reuse, and
// returns them only gradually, down to about the heap goal — twice the
// live heap at the default GOGC. A busy host's live heap is mostly
// bounded caches (Badger's block and index caches and memtables, about
// 120 MiB once a store has filled them), so after a burst its RSS stayed
// near 2.2× that for good: a 10-minute soak read 132 → 259 MiB minutes
// after its last run. An idle host allocates too little to collect more
// often than the runtime's forced collection every two minutes, so nothing
// else brings it down. The pool's reaper frees memory the same way when it
// closes instances (pool.go); this covers the heap of everything else.
//
// The signal is the process's own allocation rate (runtime/metrics'
// cumulative heap allocations), not the engine's run count: jobs,
// retrieval, ingestion and sessions allocate as well, and short runs
// between two samples would not be seen running. A trim costs one full
// collection (tens of milliseconds of CPU for a heap of this size) and
// happens at most once per burst, only after a whole quiet interval.
type idleTrim struct {
	// allocs reads the cumulative bytes allocated on the heap.
	allocs func() uint64
	// free returns the freed heap to the OS (debug.FreeOSMemory).
	free func()

	last    uint64 // allocs at the previous tick
	pending uint64 // allocated since the last trim
}

// Trim thresholds: a tick that allocated less than idleTrimQuiet is quiet;
// a trim needs at least idleTrimBurst allocated since the previous one (a
// host that did little has little to give back). An idle host still
// allocates: about 0.4 MiB in ten seconds on its own, and a Prometheus
// scraper polling /metrics twice a second (the soak's settle loop does)
// a few MiB more — at 1 MiB the soak's host never counted as quiet. A
// busy one allocates far more (a fixture run ~15 KiB, so 8 MiB is about
// 55 runs a second); a host just below that rate trims at most once per
// idleTrimBurst allocated, every minute or so, for one collection each.
const (
	idleTrimEvery = 10 * time.Second
	idleTrimQuiet = 8 << 20
	idleTrimBurst = 64 << 20
)

func newIdleTrim() *idleTrim {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	t := &idleTrim{
		allocs: func() uint64 {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return 0
			}
			return sample[0].Value.Uint64()
		},
		free: debug.FreeOSMemory,
	}
	t.last = t.allocs()
	return t
}

// tick samples the allocation counter and trims when the interval since
// the previous tick was quiet after a burst. It reports whether it
// trimmed.
func (t *idleTrim) tick() bool {
	now := t.allocs()
	delta := now - t.last
	t.last = now
	t.pending += delta
	if delta >= idleTrimQuiet || t.pending < idleTrimBurst {
		return false
	}
	t.pending = 0
	t.free()
	return true
}

// run ticks every idleTrimEvery until ctx ends.
func (t *idleTrim) run(ctx context.Context) {
	tk := time.NewTicker(idleTrimEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			t.tick()
		}
	}
}
