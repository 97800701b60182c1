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
// Open creates the directory (mode 0700) and starts two goroutines: one
// runs Badger's value-log GC periodically, one writes usage records. Close
// writes every usage record queued before it, stops both and waits for
// them, then closes the database. Writes are durable at Badger's default
// (the value log is synced by Badger's own policy); a host crash may lose
// the last writes, never corrupt earlier ones.
//
// # Usage records are written in batches
//
// A usage record is written once per run, and on a gateway's fast runs
// one transaction, or one write and fsync, per record cost a tenth of the
// host's CPU. So Store.RecordUsage and JSONL.RecordUsage only check the
// record and queue it (runtime.AsyncUsageSink: the engine calls them on the
// run's goroutine, without a goroutine of its own). One writer per sink
// waits about 2 ms after the first record of a batch, so that the records
// of runs finishing meanwhile join it, then commits up to 256 records in
// one Badger transaction, or appends them to the file with one write call
// followed by one fsync.
//
// The queue holds 4096 records. When it is full the writer is behind (a
// slow disk); RecordUsage then waits for room, bounded by its context (the
// engine's 2 s). A record still not queued is dropped: it is logged at
// warning level with the count of records the sink has dropped so far,
// and the error (*UsageDroppedError) is returned to the engine, which logs
// it too. The run's outcome never changes (wire-core §14.3). A failed
// write is logged by the writer with the number of records it held.
//
// Close, and so a graceful shutdown, loses nothing: it waits for the
// writer to write everything queued. A crash (or a kill) loses at most
// what was queued and not yet written: the records of the last few
// milliseconds, one batch interval. Store.Usage and JSONL.Flush first wait
// for what was queued before them, so a caller reads what it recorded.
//
// # JSONL usage sink
//
// JSONL appends one usage record per line to a file opened with O_APPEND
// (mode 0600). Each batch is one write call, followed by fsync, so a line
// is never interleaved with another and a batch in the file survives a
// power loss. A failed write is logged and never changes a run's outcome.
package store
