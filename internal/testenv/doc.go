// Package testenv builds WebAssembly plugins for tests, so that `go test`
// needs no prebuilt files: BuildPlugin compiles a package for wasip1 with
// the repository's reproducible flags, embeds its manifest, and caches the
// result for the rest of the test binary.
package testenv
