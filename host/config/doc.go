// Package config loads host.toml, the operator's configuration of an adhost
// host (spec host-config.md §2).
//
// The lifecycle follows Caddy's: decode strictly, report every problem, then
// let the caller provision. Load = Decode + Validate:
//
//   - Decode is strict: a syntax error, a wrong type or an unknown key is an
//     error naming the key and its line ("host.toml:12: unknown key
//     \"providers.modle\""). Missing tables and keys take the defaults of
//     host-config.md §2 (listen 127.0.0.1:7433, store "data", limits at the
//     protocol maxima and defaults, no usage sink). Relative paths are
//     resolved against the directory of host.toml, without ~ or environment
//     expansion.
//   - Validate checks what needs no I/O and returns all problems joined with
//     errors.Join, each as "FILE:LINE: key.path[i]: reason": ids and their
//     uniqueness, pins ("id@version" references), limits that may only lower
//     the protocol maxima, TLS for non-loopback listeners (TLS_REQUIRED),
//     exact allowed origins, the shape of secret references and grants.
//   - ResolveTokens and SecretRef.Resolve do the I/O: read environment
//     variables and secret files (refusing files readable by group or
//     others), and check token length and distinctness.
//
// Extension digests, manifests and settings schemas are checked by the
// extension loader (runtime/wasm), not here: config never reads modules.
//
// [tokens.grants] (sessions, jobs, approve_tools, application_tools,
// retrieval) is decoded and shape-checked so that a configuration written
// for a later release is not silently misread, but those features are not
// implemented yet and the grants have no effect.
//
// SetPin edits the sha256 of one [[extensions]] entry in place, keeping
// comments and layout; `adhost plugins pin --write` uses it.
package config
