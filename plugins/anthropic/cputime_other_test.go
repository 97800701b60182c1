//go:build !unix

package main

import "time"

// cpuTime is unknown off unix (wasip1 vet builds): benchmarks then report 0.
func cpuTime() time.Duration { return 0 }
