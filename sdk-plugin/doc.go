// Package sdk is what an adhost plugin author imports: plain Go for a
// provider (Complete, optionally Inspect) or a tool set (List, Invoke), with
// the WebAssembly glue, buffers, errors and statuses of ABI v1 (package abi)
// done here.
//
// A plugin is a package main built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false
//
// that registers itself from init:
//
//	func main() {}
//
//	func init() {
//		sdk.SetInfo("echo", "1.0.0") // must match manifests/echo.toml
//		sdk.RegisterProvider(provider{})
//	}
//
// The host calls the module's plugin_call export once per operation; the
// SDK decodes the op's input, calls the registered value with a *Call (the
// handle for streaming, HTTP, logging, cancellation and configuration during
// that one operation), and encodes its result or error. The same logic runs
// natively under package sdktest, so adapters are unit-tested without wasm.
//
// # Cost on the hot path
//
// Guest CPU is expensive (Go compiled to wasm, instrumented with the
// host's checkpoints, runs several times slower than native; under the
// first host's close-on-context-done it was 5–24×). The per-event path therefore avoids reflection
// and allocation: EmitText and EmitTextBytes pass the caller's bytes to the
// host without copying, Response.NextEvent reuses one buffer, and the
// package jsonscan pulls fields out of event JSON without encoding/json.
// The op's input and result do not use reflection either (codec.go): as
// measured under close-on-context-done, encoding/json's decode of a one-message
// CompleteInput alone cost ~115 µs of guest CPU against ~27 µs for
// jsonscan, and the encode of a small CompleteOutput ~23 µs against ~3 µs.
// Only OpToolList, once per instance, still uses encoding/json. Buffers
// and the Call's per-request state are reused from one call to the next (a
// pooled instance serves many): a Call, and a Response with its Header and
// events, are valid only during their operation.
//
// # Panics
//
// The glue does not recover panics. In wasm a panic aborts the call with a
// trap; the host then discards the instance and reports a plugin failure
// (INTERNAL_ERROR). Recovering would keep a possibly corrupted instance
// (half-updated globals, leaked handles) in the pool, and would hide bugs
// that a trap makes loud.
package sdk
