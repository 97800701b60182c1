//go:build !linux

package wasm

import "time"

// threadClock falls back to wall time where no per-thread CPU clock is
// readable from another goroutine.
func threadClock() func() int64 { return wallClock }

func wallClock() int64 { return int64(time.Since(epoch)) }
