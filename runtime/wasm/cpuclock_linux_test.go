package wasm

import (
	goruntime "runtime"
	"testing"
	"time"
)

// TestThreadClockCountsComputeNotWaiting checks what the compute watchdog
// relies on: the clock of a thread advances while it computes and stays
// (nearly) still while it sleeps, as read from another goroutine.
func TestThreadClockCountsComputeNotWaiting(t *testing.T) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	id := threadClockID()
	clock := func() int64 { return readClock(id) }

	read := make(chan int64)
	other := func() int64 { // read from a different goroutine and thread
		go func() { read <- clock() }()
		return <-read
	}

	before := other()
	time.Sleep(50 * time.Millisecond)
	if slept := time.Duration(other() - before); slept > 20*time.Millisecond {
		t.Errorf("thread clock advanced %v while sleeping 50ms", slept)
	}

	start, deadline := clock(), time.Now().Add(20*time.Second)
	x := 0
	for time.Duration(clock()-start) < 10*time.Millisecond {
		for i := range 100_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread clock did not advance by 10ms of compute within 20s")
		}
	}
	_ = x
}
