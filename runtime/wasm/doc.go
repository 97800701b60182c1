// Package wasm runs adhost extensions: WebAssembly modules speaking ABI v1
// (package abi) under wazero. It is the only package of the repository that
// imports wazero.
//
// Load verifies a pinned module before any of its code runs (sha256 pin,
// embedded manifest, id/version, ABI marker, export signatures, import
// table against the manifest's permissions, WASI allow-list), compiles it
// with a private file-backed compilation cache, creates one instance and
// checks its info against the pin. The returned Extension then hands out
// runtime.Provider and runtime.ToolSet implementations bound to one
// provider instance's settings and secrets.
//
// The sandbox (DESIGN.md §3): one wazero runtime per extension with the
// memory cap of the manifest; every module instrumented with checkpoints
// (package checkpoint) so that a computing guest reaches the host often
// enough to be cancelled, stopped by the watchdog and preempted; no files,
// environment or arguments; real clocks, crypto random, a capped
// interruptible sleep; stdout/stderr into a capped, rate-limited log writer;
// a bounded pool of instances, each serving one call at a time and discarded
// after any trap, error, cancellation or memory growth past a high-water
// mark; a compute watchdog that stops a guest computing too long between
// host calls; outgoing HTTP only to declared origins (plus the operator's
// endpoint), no redirects, no private addresses unless the operator
// configured exactly that origin, credentials injected by the host and never
// visible to the guest.
//
// Errors returned by Provider and ToolSet are *protocol.Error values with
// the host's fixed public messages; the guest's own error messages, its
// stderr and upstream bodies never reach a client or a log line above debug
// level.
package wasm
