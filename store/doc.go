// Package store is adhost's persistence: an embedded Badger database (the
// only importer of Badger in the module) plus an append-only JSONL usage
// sink. The run engine (package runtime) never imports it; it declares the
// small interfaces it needs (runtime.UsageSink, runtime.RunStore …) and the
// host wires a *Store in.
//
// # Keys
//
// Every key starts with a schema version, so a later layout can live beside
// this one and be migrated lazily. Fixed-width numbers are 8-byte big-endian
// so that byte order is numeric order and prefix iteration is chronological.
//
//	v1/meta/layout                         "1" — written on first open
//	v1/usage/<finishedAt ns BE8>/<runID>   runtime.UsageRecord JSON (wire-core §14.3)
//	v1/qual/<sha256 hex>/<created ns BE8>  qualification report JSON for one extension digest
//
// Reserved for the features that come next (same scheme, not written yet):
//
//	v1/run/<runID>                         run metadata (durable jobs)
//	v1/ev/<runID>/<seq BE8>                committed events, replayed by sequence
//	v1/idem/<subject>/<key>                idempotency claims and compact outcomes (TTL)
//	v1/sess/<sessionID>                    conversation sessions and revisions
//	v1/appr/<runID>/<callID>               approval decisions
//	v1/kv/<extension>/<subject>/<key>      per-extension, per-subject tool storage
//	v1/ret/<corpus>/…                      retrieval corpora
//
// # Lifecycle
//
// Open creates the directory (mode 0700) and starts one goroutine that runs
// Badger's value-log GC periodically; Close stops it and waits for it before
// closing the database. Writes are durable at Badger's default (the value
// log is synced by Badger's own policy); a host crash may lose the last
// writes, never corrupt earlier ones.
//
// # JSONL usage sink
//
// JSONL appends one usage record per line to a file opened with O_APPEND
// (mode 0600). Each record is written with a single write call under a
// mutex and followed by fsync, so a record that RecordUsage acknowledged
// survives a crash; a usage record is written once per run, so the fsync is
// cheap next to the run itself. A failed write is returned to the engine,
// which logs it and never changes the run's outcome.
package store
