//go:build unix

package wasm

import (
	"syscall"
	"time"
)

// processUsage returns the process's CPU time (user + system) and its
// context switches (voluntary + involuntary) so far.
func processUsage() (cpu time.Duration, switches int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw + ru.Nivcsw)
}
