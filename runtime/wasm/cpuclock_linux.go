package wasm

import (
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
// to wall time, which only makes the watchdog stricter under load.
func threadClock() func() int64 {
	id := int32(^uint32(unix.Gettid())<<3 | 6)
	var ts unix.Timespec
	if unix.ClockGettime(id, &ts) != nil {
		return wallClock
	}
	return func() int64 {
		var ts unix.Timespec
		if unix.ClockGettime(id, &ts) != nil {
			return wallClock()
		}
		return ts.Nano()
	}
}

func wallClock() int64 { return int64(time.Since(epoch)) }
