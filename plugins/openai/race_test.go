//go:build race

package main

// raceEnabled skips the wasm tests under the race detector: wazero's
// compiler and interpreter run an order of magnitude slower instrumented,
// and the wasm host side has its own race tests in runtime/wasm.
const raceEnabled = true
