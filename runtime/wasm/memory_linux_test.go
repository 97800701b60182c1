package wasm

import (
	"bufio"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// mapped reports whether addr lies in a mapping of /proc/self/maps.
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rng, _, _ := strings.Cut(sc.Text(), " ")
		var lo, hi uintptr
		if _, err := fmt.Sscanf(rng, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestReservedMemory(t *testing.T) {
	const max = 64 << 20
	lm := reserveMemory(nil, max)
	r, ok := lm.(*reservedMemory)
	if !ok {
		t.Fatalf("reserveMemory = %T, want a reservation", lm)
	}
	b := r.Reallocate(64 << 10)
	if len(b) != 64<<10 {
		t.Fatalf("len = %d", len(b))
	}
	copy(b, "contents")
	base := addrOf(b)
	for _, size := range []uint64{1 << 20, 16 << 20, max, 1 << 20} {
		b = r.Reallocate(size)
		if uint64(len(b)) != size || addrOf(b) != base || string(b[:8]) != "contents" {
			t.Fatalf("Reallocate(%d): len %d, moved %v, contents %q", size, len(b), addrOf(b) != base, b[:8])
		}
	}
	b = r.Reallocate(max)
	b[max-1] = 1 // the whole maximum is writable
	if got := r.Reallocate(max + 64<<10); got != nil {
		t.Errorf("Reallocate past the maximum = %d bytes, want nil", len(got))
	}
	if !mapped(t, base) {
		t.Fatal("reservation not in /proc/self/maps")
	}
	r.Free()
	if mapped(t, base) {
		t.Error("Free left the reservation mapped")
	}
	if got := r.Reallocate(64 << 10); got != nil {
		t.Error("Reallocate after Free succeeded")
	}
	r.Free() // idempotent
}

// TestReservedMemoryFreeDuringCall: a memory freed while its instance is
// in a call (proc_exit closes the module from inside it) gives its pages
// back but stays mapped, readable, until the instance is unreachable.
func TestReservedMemoryFreeDuringCall(t *testing.T) {
	const size = 32 << 20
	inst := &instance{}
	inst.cur.Store(&callState{})
	r := reserveMemory(inst, size).(*reservedMemory)
	b := r.Reallocate(size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	base := addrOf(b)
	before := rss(t)
	r.Free()
	after := rss(t)
	if !mapped(t, base) || b[0] != 0 || b[size-4096] != 0 {
		t.Fatal("memory freed during a call is not mapped and zero")
	}
	if before-after < size/2 {
		t.Errorf("RSS %d MiB before Free, %d MiB after: pages not released", before>>20, after>>20)
	}
	// The unmapping waits for a collection, which only a test forces.
	deadline := time.Now().Add(10 * time.Second)
	for mapped(t, base) {
		if time.Now().After(deadline) {
			t.Fatal("reservation still mapped after its instance became unreachable")
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHeapMemory(t *testing.T) {
	h := &heapMemory{max: 4 << 16}
	b := h.Reallocate(1 << 16)
	copy(b, "contents")
	if b = h.Reallocate(3 << 16); len(b) != 3<<16 || string(b[:8]) != "contents" {
		t.Errorf("Reallocate: len %d, %q", len(b), b[:8])
	}
	if h.Reallocate(5<<16) != nil {
		t.Error("Reallocate past the maximum succeeded")
	}
}
