//go:build race

package main

// raceEnabled skips the wasm integration tests under the race detector:
// compiling a Go guest with an instrumented wazero takes about ten times
// longer, and the host's own races are runtime/wasm's tests' business.
const raceEnabled = true
