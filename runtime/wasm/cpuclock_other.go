//go:build !linux

package wasm

import "time"

// threadClockID reports that no per-thread CPU clock is readable from
// another goroutine here: readClock falls back to wall time.
func threadClockID() int32 { return 0 }

func readClock(int32) int64 { return wallClock() }

func wallClock() int64 { return int64(time.Since(epoch)) }
