// Command conformance-tools is a tool extension with one tool,
// conformance_lookup ({"value": n} → {"receipt": n}), the host tool of the
// conformance:tools scenario (wire-core §16). It has no network and no
// state.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath
// -buildvcs=false ./plugins/conformance-tools (manifest:
// manifests/conformance-tools.toml).
package main
