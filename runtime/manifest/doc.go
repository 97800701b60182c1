// Package manifest parses, validates, embeds and extracts extension
// manifests (manifests/<id>.toml).
//
// A manifest declares what an extension is (id, version, kind, contract
// version) and what it may do (network origins, credential slots, settings
// schema, resource limits). The build embeds the TOML text as the wasm custom
// section abi.CustomSectionManifest, so the single sha256 an operator pins in
// host.toml covers both the code and the permissions it was granted.
//
// Parsing is strict: an unknown key, a wrong type or an invalid value is an
// error naming the key (and the line when the TOML decoder knows it). Extract
// walks untrusted module bytes and never panics or allocates beyond the
// input's size.
package manifest
