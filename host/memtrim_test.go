package host

import "testing"

// TestIdleTrim: the heap is given back once, on the first quiet interval
// after a burst — not while the host keeps allocating, not after a burst
// too small to matter, and not again until another burst.
func TestIdleTrim(t *testing.T) {
	var total uint64
	frees := 0
	tr := &idleTrim{allocs: func() uint64 { return total }, free: func() { frees++ }}
	step := func(alloc uint64, wantTrim bool) {
		t.Helper()
		total += alloc
		if got := tr.tick(); got != wantTrim {
			t.Fatalf("after %d bytes: trimmed %v, want %v (frees %d)", alloc, got, wantTrim, frees)
		}
	}
	step(idleTrimQuiet-1, false) // quiet, but nothing to give back
	step(200<<20, false)         // busy
	step(200<<20, false)         // still busy
	step(idleTrimQuiet, false)   // at the quiet bound: still busy
	step(idleTrimQuiet-1, true)  // the first quiet interval after the burst
	step(0, false)               // idle: nothing new to give back
	step(idleTrimBurst/2, false) // a small burst
	step(0, false)               // quiet, but below the burst bound
	step(idleTrimBurst/2, false) // the bursts add up
	step(0, true)                // ... to one trim
	if frees != 2 {
		t.Fatalf("frees %d, want 2", frees)
	}
}

// TestIdleTrimReadsTheRuntime: the real counter moves with allocation.
func TestIdleTrimReadsTheRuntime(t *testing.T) {
	tr := newIdleTrim()
	before := tr.allocs()
	sink := make([][]byte, 0, 64)
	for range 64 {
		sink = append(sink, make([]byte, 64<<10))
	}
	if after := tr.allocs(); after-before < 64*64<<10 || len(sink) != 64 {
		t.Fatalf("allocs moved %d bytes, want ≥ %d", after-before, 64*64<<10)
	}
}
