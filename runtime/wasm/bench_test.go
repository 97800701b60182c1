package wasm

import (
	"context"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"adhost/abi"
)

// Benchmarks of DESIGN.md §5 and issue targets, with the provider test
// guest (a Go guest like the fixture). Run:
//
//	go test -run '^$' -bench . -benchtime 20x ./runtime/wasm/

type nopSink struct{}

func (nopSink) Text(string)     {}
func (nopSink) Progress()       {}
func (nopSink) Usage(abi.Usage) {}

func benchLoad(b *testing.B, opts Options) *Extension {
	b.Helper()
	x, err := Load(b.Context(), pinOf(b, "provider", "hostile", "1.0.0"), opts)
	if err != nil {
		b.Fatal(err)
	}
	return x
}

// BenchmarkColdStart: Load (digest, compile, first instance, info) with an
// empty compilation cache and with a warm one. The warm case is the time to
// the first ready instance after a host restart.
func BenchmarkColdStart(b *testing.B) {
	b.Run("empty-cache", func(b *testing.B) {
		for b.Loop() {
			dir, _ := os.MkdirTemp("", "adhost-bench-cache-")
			x := benchLoad(b, Options{CacheDir: dir})
			x.Close(context.Background())
			os.RemoveAll(dir)
		}
	})
	b.Run("warm-cache", func(b *testing.B) {
		dir := b.TempDir() + "/cache"
		benchLoad(b, Options{CacheDir: dir}).Close(context.Background())
		for b.Loop() {
			x := benchLoad(b, Options{CacheDir: dir})
			x.Close(context.Background())
		}
	})
}

// BenchmarkInstantiate: creating one more instance (what a pool miss costs).
func BenchmarkInstantiate(b *testing.B) {
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	for b.Loop() {
		inst, err := x.newInstance(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		inst.close(b.Context())
	}
}

// BenchmarkAcquire: taking an instance from the warm pool and giving it
// back, with its p50.
func BenchmarkAcquire(b *testing.B) {
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		inst, l, err := x.pool.acquire(b.Context())
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		x.pool.release(b.Context(), inst, l, false)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/acquire")
}

// BenchmarkCall: one Complete round trip (marshal input, acquire, call,
// copy input and output, strict decode, release) for 1 KB and 100 KB of
// input; the guest skips its own JSON decoding on this path.
func BenchmarkCall(b *testing.B) {
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	p, err := x.Provider(InstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1 << 10, 100 << 10} {
		in := input("noop" + strings.Repeat("a", size))
		b.Run(sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := p.Complete(b.Context(), in, nopSink{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return strings.TrimSuffix(strings.TrimSuffix(time.Duration(n>>10).String(), "s"), "n") + "KB"
	}
	return "B"
}

// BenchmarkDeltas: a turn streaming 1,000 one-byte text deltas through
// emit; reports the host+guest cost per delta.
func BenchmarkDeltas(b *testing.B) {
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	p, err := x.Provider(InstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	in := input("deltas:1000")
	for b.Loop() {
		if _, err := p.Complete(b.Context(), in, nopSink{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/delta")
}

// BenchmarkEmit: the host side of one emit call (text delta to a sink),
// without the guest.
func BenchmarkEmit(b *testing.B) {
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	inst, l, err := x.pool.acquire(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer x.pool.release(b.Context(), inst, l, false)
	cs := &callState{x: x, inst: inst, op: abi.OpComplete, sink: nopSink{}, parent: b.Context(), ctx: b.Context()}
	ctx := context.WithValue(b.Context(), callKey{}, cs)
	inst.mem.Write(0, []byte("hello"))
	stack := make([]uint64, 3)
	for b.Loop() {
		stack[0], stack[1], stack[2] = uint64(abi.EmitText), 0, 5
		hostEmit(ctx, inst.mod, stack)
		if cs.streamed > 1<<20 {
			cs.streamed, cs.emitted = 0, 0
		}
	}
}

// BenchmarkInstanceMemory: host heap and linear memory per pooled
// instance (8 warm instances), and linear memory after recycling.
func BenchmarkInstanceMemory(b *testing.B) {
	for b.Loop() {
		x := benchLoad(b, Options{Cache: sharedCache, PoolSize: 8})
		goruntime.GC()
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		var insts []*instance
		for range 8 {
			inst, _, err := x.pool.acquire(b.Context()) // no cap: no lease
			if err != nil {
				b.Fatal(err)
			}
			insts = append(insts, inst)
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		var linear uint64
		for _, inst := range insts {
			linear += uint64(inst.mem.Size())
		}
		for _, inst := range insts {
			x.pool.release(b.Context(), inst, lease{}, false)
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/7/(1<<20), "host-MiB/instance")
		b.ReportMetric(float64(linear)/8/(1<<20), "linear-MiB/instance")
		x.Close(context.Background())
	}
}
