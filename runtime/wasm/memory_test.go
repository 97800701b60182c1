package wasm

import (
	"bufio"
	"bytes"
	"context"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// rssSlack is issue 9's bound: after any hostile case host RSS returns
// within 64 MiB of its start within 30 s.
const (
	rssSlack   = 64 << 20
	rssTimeout = 30 * time.Second
)

// rss reads the process's resident set size from /proc/self/status.
func rss(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}

// baseRSS is the RSS to come back to. The baseline alone is taken after a
// collection and a scavenge, so that garbage of earlier tests does not
// hide a leak; what comes after is measured as a real host would see it,
// without forcing anything.
func baseRSS(t testing.TB) int64 {
	t.Helper()
	if goruntime.GOOS != "linux" {
		// Elsewhere linear memory is wazero's default Go slice, whose old
		// copies wait for the collector (memory_other.go).
		t.Skip("linear memory is reserved only on Linux")
	}
	goruntime.GC()
	debug.FreeOSMemory()
	return rss(t)
}

// awaitRSS polls until RSS is within rssSlack of base and returns how
// long that took and the last reading.
func awaitRSS(t testing.TB, base int64) (time.Duration, int64) {
	t.Helper()
	start := time.Now()
	for {
		now := rss(t)
		if now <= base+rssSlack {
			return time.Since(start), now
		}
		if time.Since(start) > rssTimeout {
			t.Fatalf("RSS %d MiB still above start %d MiB + %d MiB after %v", now>>20, base>>20, rssSlack>>20, rssTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peakRSS samples RSS until stop is called and returns the highest reading.
func peakRSS(t testing.TB) (stop func() int64) {
	var peak atomic.Int64
	peak.Store(rss(t))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if r := rss(t); r > peak.Load() {
				peak.Store(r)
			}
		}
	})
	return func() int64 { close(done); wg.Wait(); return peak.Load() }
}

// TestMemoryHog: a Go guest allocating until its 64 MiB cap refuses fails
// its call and is discarded; another extension serves meanwhile; and host
// RSS is back within 64 MiB of its start without a collection.
func TestMemoryHog(t *testing.T) {
	// No watchdog: allocating is slow under -race on a busy machine, and
	// the point here is the memory cap.
	hog := loadGuest(t, "memhog", "memhog", "1.0.0", Options{ComputeLimit: time.Hour})
	good := loadProvider(t, Options{})
	hp := newProvider(t, hog, InstanceConfig{})
	gp := newProvider(t, good, InstanceConfig{})
	if out, err := hp.Complete(t.Context(), input("held"), &sink{}); err != nil || out.Text != "held=0" {
		t.Fatalf("memhog warm-up: %+v, %v", out, err)
	}
	base := baseRSS(t)
	peak := peakRSS(t)

	started, done := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := hp.Complete(t.Context(), input("hog"), &sink{onProgress: func() { once.Do(func() { close(started) }) }})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("hog ended before allocating: %v", err)
	}
	if out, err := gp.Complete(t.Context(), input("stream:ok"), &sink{}); err != nil || out.Text != "ok" {
		t.Errorf("another extension's call during the hog: %+v, %v", out, err)
	}
	if err := <-done; err == nil {
		t.Fatal("hog call succeeded")
	}
	top := peak()
	t.Logf("RSS start %d MiB, peak during the call %d MiB", base>>20, top>>20)
	took, now := awaitRSS(t, base)
	t.Logf("RSS %d MiB %v after the call", now>>20, took)
	// Take the peak only as a sign the test measures something: the guest
	// touched most of its 64 MiB.
	if top-base < 32<<20 {
		t.Errorf("peak RSS %d MiB over a start of %d MiB: the hog did not allocate", top>>20, base>>20)
	}
	// The hog's instance was discarded: every instance now holds nothing
	// (the pool hands out the most recently returned instance first).
	for range 3 {
		if out, err := hp.Complete(t.Context(), input("held"), &sink{}); err != nil || out.Text != "held=0" {
			t.Fatalf("after the hog: %+v, %v", out, err)
		}
	}
}

// growModule assembles a module whose memory starts at one page and has no
// declared maximum (so the cap is the manifest's memoryMiB), exporting
// grow(pages) -> memory.grow's result and fill(ptr, n), which writes every
// byte of the range (memory.fill).
func growModule(t testing.TB, memoryMiB int) Pin {
	t.Helper()
	fill := []byte{0, 0x20, 0, 0x41} // local.get 0; i32.const 0x5a
	fill = sleb(fill, 0x5a)
	fill = append(fill, 0x20, 1, 0xfc, 0x0b, 0, 0x0b) // local.get 1; memory.fill
	return asmModule{
		manifest: "id = \"grower\"\nname = \"Grower\"\nversion = \"1.0.0\"\nkind = \"tool\"\ncontractVersion = \"1.0\"\n\n[limits]\nmemoryMiB = " + strconv.Itoa(memoryMiB) + "\n",
		funcs: []asmFunc{
			{typ: 1, code: []byte{0, 0x20, 0, 0x40, 0, 0x0b}}, // local.get 0; memory.grow
			{typ: 2, code: fill},
		},
		exports: map[string]byte{"grow": 4, "fill": 5},
	}.build(t)
}

func memBase(t testing.TB, inst *instance) uintptr {
	t.Helper()
	b, ok := inst.mem.Read(0, 1)
	if !ok {
		t.Fatal("memory has no first byte")
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// TestMemoryGrowRaw: raw memory.grow succeeds up to the manifest's cap,
// in one step and in many, and returns -1 past it; contents and base
// survive growth; closing the instance gives the RSS back at once.
func TestMemoryGrowRaw(t *testing.T) {
	const capMiB = 256
	const capPages = capMiB * 16
	x, err := Load(t.Context(), growModule(t, capMiB), Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer x.Close(context.Background())
	ctx := t.Context()
	call := func(inst *instance, fn string, args ...uint64) int32 {
		t.Helper()
		res, err := inst.mod.ExportedFunction(fn).Call(ctx, args...)
		if err != nil {
			t.Fatalf("%s%v: %v", fn, args, err)
		}
		if len(res) == 0 {
			return 0
		}
		return int32(uint32(res[0]))
	}

	start := baseRSS(t)
	t.Run("one step", func(t *testing.T) {
		inst, err := x.newInstance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b0 := memBase(t, inst)
		if got := call(inst, "grow", capPages-1); got != 1 {
			t.Fatalf("grow(%d) = %d, want 1", capPages-1, got)
		}
		if got := call(inst, "grow", 1); got != -1 {
			t.Errorf("grow past the cap = %d, want -1", got)
		}
		if got := inst.mem.Size(); got != capMiB<<20 {
			t.Errorf("size = %d, want %d", got, capMiB<<20)
		}
		call(inst, "fill", 0, capMiB<<20)
		if goruntime.GOOS == "linux" && memBase(t, inst) != b0 {
			t.Error("growing moved the memory")
		}
		full := rss(t)
		if full-start < capMiB<<20*3/4 {
			t.Errorf("RSS %d MiB after filling %d MiB over a start of %d MiB", full>>20, capMiB, start>>20)
		}
		inst.close(ctx)
		t.Logf("RSS start %d MiB, filled %d MiB", start>>20, full>>20)
		took, now := awaitRSS(t, start)
		t.Logf("RSS %d MiB %v after close", now>>20, took)
	})
	t.Run("steps", func(t *testing.T) {
		inst, err := x.newInstance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer inst.close(ctx)
		b0 := memBase(t, inst)
		inst.mem.WriteByte(7, 42)
		const step = 64 // pages: 4 MiB
		pages := int32(1)
		for pages+step <= capPages {
			if got := call(inst, "grow", step); got != pages {
				t.Fatalf("grow(%d) at %d pages = %d", step, pages, got)
			}
			call(inst, "fill", uint64(pages)<<16, step<<16)
			pages += step
		}
		rest := capPages - pages
		if got := call(inst, "grow", uint64(rest)); got != pages {
			t.Fatalf("grow(%d) at %d pages = %d", rest, pages, got)
		}
		for _, n := range []uint64{1, step, 1 << 16} {
			if got := call(inst, "grow", n); got != -1 {
				t.Errorf("grow(%d) at the cap = %d, want -1", n, got)
			}
		}
		if b, _ := inst.mem.ReadByte(7); b != 42 {
			t.Errorf("byte 7 = %d after growth, want 42", b)
		}
		if goruntime.GOOS == "linux" && memBase(t, inst) != b0 {
			t.Error("growing moved the memory")
		}
		if !bytes.Equal(mustRead(t, inst, uint32(1)<<16, 16), bytes.Repeat([]byte{0x5a}, 16)) {
			t.Error("a filled page lost its contents")
		}
	})
	took, now := awaitRSS(t, start)
	t.Logf("RSS %d MiB %v after the last close", now>>20, took)
}

func mustRead(t testing.TB, inst *instance, off, n uint32) []byte {
	t.Helper()
	b, ok := inst.mem.Read(off, n)
	if !ok {
		t.Fatalf("read %d bytes at %d: out of range", n, off)
	}
	return b
}
