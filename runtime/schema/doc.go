// Package schema compiles and applies the JSON Schemas a run carries: the
// request's outputSchema (wire-core §9) and tool input schemas.
//
// It wraps github.com/santhosh-tekuri/jsonschema/v6 with the configuration
// DESIGN §7 makes mandatory, because the library's defaults are wrong for a
// host that compiles schemas from untrusted requests:
//
//   - The library's default loader reads file:// references from local disk.
//     Every compile here uses a loader that refuses every external reference
//     (ExternalRefError); only the JSON Schema meta-schemas, which the
//     library embeds, resolve without I/O.
//   - Without "$schema" the library picks its newest draft; upstream uses
//     draft-07, so draft-07 is the default. Only the draft-07 and 2020-12
//     meta-schema URIs are accepted (one trailing '#' ignored); draft-04,
//     draft-06, 2019-09 and anything else are INVALID_SCHEMA, as are
//     asynchronous schemas ("$async": true), which upstream refuses.
//   - "format" is never asserted (upstream validates no formats), although
//     the library asserts it for draft-07 by default.
//   - Each schema gets a fresh compiler, so an "$id" declared by one
//     request is never visible to another.
//
// A compiled *Schema is immutable and safe for concurrent use. Validation
// errors list the failing schema keyword locations, sorted, and never an
// instance value.
package schema
