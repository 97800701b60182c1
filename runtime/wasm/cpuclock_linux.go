package wasm

import (
	goruntime "runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// threadClock returns a clock reading the CPU time consumed by the calling
// OS thread, readable from any goroutine. The caller must hold the thread
// with LockOSThread for as long as the clock is used.
//
// Linux exposes another thread's CPU clock through clock_gettime with a
// clock id built from its thread id (MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED) = ^tid<<3 | 6). If the clock cannot be read it falls back
// to wall time, which only makes the watchdog stricter under load. Whether
// the kernel offers thread CPU clocks at all is probed once per process;
// afterwards creating a clock costs one gettid per call.
func threadClock() func() int64 {
	if !threadClocks() {
		return wallClock
	}
	id := int32(^uint32(unix.Gettid())<<3 | 6)
	return func() int64 {
		var ts unix.Timespec
		if unix.ClockGettime(id, &ts) != nil {
			return wallClock()
		}
		return ts.Nano()
	}
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
