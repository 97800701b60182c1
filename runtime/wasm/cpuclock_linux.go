package wasm

import (
	goruntime "runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// threadClockID returns the id of the calling OS thread's CPU clock, which
// any goroutine can read with readClock, or 0 when thread clocks are not
// available (readClock then reads wall time, which only makes the
// watchdog stricter under load). The caller must hold its thread with
// LockOSThread for as long as the id is used.
//
// Linux exposes another thread's CPU clock through clock_gettime with a
// clock id built from its thread id (MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED) = ^tid<<3 | 6), which is never 0. Whether the kernel
// offers thread CPU clocks at all is probed once per process; afterwards
// an id costs one gettid.
func threadClockID() int32 {
	if !threadClocks() {
		return 0
	}
	return int32(^uint32(unix.Gettid())<<3 | 6)
}

// readClock reads clock id (from threadClockID) in nanoseconds.
func readClock(id int32) int64 {
	if id == 0 {
		return wallClock()
	}
	var ts unix.Timespec
	if unix.ClockGettime(id, &ts) != nil {
		return wallClock()
	}
	return ts.Nano()
}

// threadClocks reports whether the calling thread's CPU clock can be read
// through its thread clock id (probed once).
var threadClocks = sync.OnceValue(func() bool {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var ts unix.Timespec
	return unix.ClockGettime(int32(^uint32(unix.Gettid())<<3|6), &ts) == nil
})

func wallClock() int64 { return int64(time.Since(epoch)) }
