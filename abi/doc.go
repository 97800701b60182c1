// Package abi is the contract between the adhost host and its WebAssembly
// extensions (ABI v1): export and import names with their signatures, ops,
// statuses, emit kinds, error numbers and the JSON shapes each op reads and
// writes.
//
// It is standard library only and builds for both the host and wasip1, so the
// host (runtime/wasm) and the plugin SDK (sdk-plugin) share one definition.
// Versioning: the major is chosen by the marker export (plugin_abi_v1); minor
// additions are new host-function names, detected from a module's import
// table. A signature never changes within a major.
package abi
