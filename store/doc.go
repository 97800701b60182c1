// Package store is adhost's persistence: an embedded Badger database (the
// only importer of Badger in the module) plus an append-only JSONL usage
// sink. The run engine (package runtime) and the durable features
// (runtime/jobs, runtime/sessions, runtime/idempotency) never import it;
// they declare the small interfaces they need (runtime.UsageSink,
// durable.Store …) and the host wires a *Store in.
//
// # Keys
//
// Every key starts with a schema version, so a later layout can live beside
// this one and be migrated lazily. Fixed-width numbers are 8-byte big-endian
// so that byte order is numeric order and prefix iteration is chronological.
//
//	v1/meta/layout                         "1" — written on first open
//	v1/meta/rev                            BE8: the last revision issued (durable KV and leases)
//	v1/usage/<finishedAt ns BE8>/<runID>   runtime.UsageRecord JSON (wire-core §14.3)
//	v1/qual/<sha256 hex>/<created ns BE8>  qualification report JSON for one extension digest
//	v1/kv/<key>                            durable.KV: revision BE8 ‖ value
//	v1/log/<name> 0x00 <seq BE8>           durable.Logs: one record, its bytes as given
//	v1/logmeta/<name>                      durable.Logs: the log's last sequence, BE8
//	v1/lease/<name>                        durable.Leases: token BE8 ‖ expiry Unix ns BE8 ‖ owner
//
// A log's records follow its name and a 0 byte rather than a '/': names
// may hold '/' (durable.CheckKey), and with a '/' the records of log "a"
// and of log "a/b" would share a prefix. The features choose their key and
// log names under the durable primitives and document them in their
// packages: jobs/v1/… (runtime/jobs), sessions/v1/… (runtime/sessions),
// idempotency/v1/… (runtime/idempotency). Nothing else writes under v1/kv/,
// v1/log/ or v1/lease/.
//
// # The durable primitives
//
// *Store implements durable.Store (durable.go), and passes the conformance
// suite (durabletest) in memory and on disk. Reads (Get, List, Read, Last)
// are Badger read transactions. Every write goes to one committer
// goroutine, which alone writes these keys: it takes the first waiting
// operation and every other one already waiting, applies them in order in
// one Badger transaction — each reads what it checks (the key's revision,
// the log's last sequence, the lease's holder) and writes only if the check
// holds — and commits them together. Because nothing else writes these
// keys, a batch cannot conflict; a conflict would be retried
// (maxTxnRetries) and a batch that fails otherwise is retried one operation
// at a time, so a failure is reported to its own operation only. An
// operation whose context ends before it is applied is not applied: a
// caller never gets an error for a write that happened.
//
// Revisions come from one persisted counter (v1/meta/rev), written in the
// same transaction as the writes that used it. Badger's commit timestamps
// (item.Version()) were the other candidate, and were rejected: after a key
// is deleted and its tombstone compacted away, a restart resumes the
// timestamps from the largest version still stored, so a re-created key
// could be given a revision a stale holder still has. The counter only
// grows, across deletes and restarts. Fencing tokens are revisions too, so
// every acquisition of a lease has a larger token. Revisions are therefore
// global, not per key, like JetStream's per-bucket sequence.
//
// Bounds (durable.ErrTooLarge): a KV value, a log record, and all the
// records of one Append together are at most MaxValueBytes (64 MiB) on disk
// and MaxValueBytesInMemory (just under 1 MiB) in an InMemory store.
// Besides, one operation must fit one Badger transaction: values of 64 KiB
// and more go to the value log and count 24 bytes each, smaller ones count
// fully, and the sum must stay under Badger's batch limit (15% of the 16 MiB
// memtable, about 2.4 MB, and about 24,000 entries) — e.g. an Append of
// 10,000 small records is taken, one of 40,000 refused. DeleteLog removes a
// long log from its end in commits of 2,048 records, so a crash midway
// leaves a shorter log, never a gap. A full disk is reported as
// durable.ErrFull.
//
// # Durability: synced group commits
//
// An operation that returns nil survives kill -9 and loss of power to the
// process: the store opens Badger with SyncWrites, under which Badger
// syncs the memtable's write-ahead log before a transaction's Commit
// returns. Read in Badger v4.9.6 (db.go writeRequests and writeToLSM,
// value.go valueLog.write): the write goroutine hands every transaction
// waiting in its channel to one writeRequests call, which syncs the value
// log once for all of them but the write-ahead log once per transaction
// (writeToLSM calls SyncWAL for each request), one after the other. So
// Badger's own batching saves little: 64 concurrent committers still pay
// about one sync each. The committer above is the group commit: its batch
// is one transaction, so one write-ahead-log sync and one value-log sync
// serve all of its operations, and batches grow with the load while a lone
// operation waits for nothing but its own commit. A db.Sync() after
// unsynced commits would be cheaper still but is not safe: it syncs only
// the current memtable's log, and a commit that landed in a memtable
// rotated out meanwhile would be acknowledged unsynced. One gap remains,
// Badger's: a failed sync of the value log (values of 64 KiB and more) is
// logged by Badger, not returned; the write-ahead log's is returned.
//
// Measured (go test -run '^$' -bench DurableCommit -benchtime 4000x
// ./store/, 300-byte values, on the 2-core development machine, which
// other engineers' builds shared). Quiet (load average ~1): one synced
// commit takes about 0.12 ms (two msyncs); through the committer, creates
// and appends run at about 8,000/s from 1 goroutine (1 batch per
// operation), 25,000–30,000/s from 8 (0.25 batches per operation) and
// 60,000–90,000/s from 64 (0.03 batches per operation; strace counts 268
// msyncs for 4,001 creates, 0.07 per commit). The baseline, one synced
// Badger transaction per operation (BadgerTxn), stays at 9,000–13,000/s
// from 8 or 64 goroutines, with 4,208 msyncs for 4,001 commits (1.05 per
// commit). Loaded (load average 12–16): a sync takes ~2 ms, and from 64
// goroutines the committer still makes ~18,000 commits/s against the
// baseline's 400–1,600/s. The jobs feature's target, 500 jobs/s with about
// 6 events each, is some 3,000–4,000 commits/s from many concurrent jobs.
// Reads of 100-record pages (BenchmarkDurableRead, 8 goroutines) run at
// ~11,000 pages/s even under that load (target: 5,000).
//
// Usage records and qualification reports are synced too, as every Badger
// commit is, at no measurable cost (BenchmarkUsage/Store: 7–9 µs and
// 7–9 µs of CPU per record with and without SyncWrites: the writer already
// commits a batch at a time).
//
// # Lifecycle
//
// Open checks the directory before Badger touches it, creating it (mode
// 0700) if it does not exist. It refuses, naming the directory and the
// reason:
//
//   - one another process holds (ErrInUse): "store: data directory /x is in
//     use: is another adhost running? (pid 1234)". Badger flocks the
//     directory and writes its pid into LOCK; Open probes the flock itself
//     and reads the pid, so the operator never sees Badger's lock message.
//   - a foreign one (ErrForeign): a file; one holding Badger's files without
//     a MANIFEST (a damaged or half-copied database); another application's
//     Badger database (keys, but no v1/meta/layout), which is closed without
//     being written to. A directory without Badger's files is a new store
//     whatever else it holds: the host keeps its compiled-module cache, the
//     dev token and by default the usage JSONL in the same directory.
//   - an unsafe one (ErrUnsafe): a symbolic link, a directory writable by
//     group or others, or one owned by another user — each could let
//     someone else replace the database under the host.
//   - a layout this build does not know (v1/meta/layout other than "1").
//
// Open then starts three goroutines: the committer, the usage writer and
// the periodic value-log GC (every Options.GCInterval, 10 minutes by
// default: files at least half garbage are rewritten; CollectGarbage runs
// a pass on demand). Close writes every usage record queued before it,
// commits the durable operations already queued (later ones get
// durable.ErrClosed), stops the GC, waits for all three, then closes the
// database.
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
//
// # A second backend: NATS JetStream
//
// The durable primitives are phrased in what JetStream offers natively, so
// that a JetStream backend (for several hosts sharing state) implements
// durable.Store and no feature changes. Not built here; the mapping:
//
//   - durable.KV → one KV bucket per space (e.g. ADHOST_KV; a bucket per
//     feature if their limits differ). Get → kv.Get (Entry.Revision is the
//     bucket's stream sequence of the last write). Create → kv.Create,
//     which fails with ErrKeyExists when the key holds a value. Update →
//     kv.Update(key, value, rev), which fails on a wrong last revision.
//     Delete(rev) → kv.Delete(key, jetstream.LastRevision(rev)), and with
//     rev 0 a plain Delete. Revisions grow across delete and re-create
//     (a delete is a marker message with its own sequence), as here.
//     List(prefix, after, limit) → kv.ListKeys with a subject filter
//     ("prefix.>") then Get each, sorted and cut client-side: JetStream
//     lists keys unordered, so a page costs the whole prefix's keys.
//   - durable.Logs → one stream per log family (e.g. ADHOST_LOGS with
//     subjects "log.>"), one subject per log. The stream's sequence is
//     global, so each message carries its log sequence in a header (say
//     Adhost-Seq). Append(log, expectLast, recs…) reads the subject's last
//     message (direct get last_by_subj), checks its Adhost-Seq against
//     expectLast, and publishes with Nats-Expected-Last-Subject-Sequence
//     set to that message's stream sequence (0 for an empty log): a
//     concurrent Append in between makes the server refuse, which is
//     ErrSequence. Last → the same direct get. Read(after, limit,
//     maxBytes) → an ordered consumer filtered on the subject with
//     DeliverByStartSequence, or batch direct gets (nats-server 2.11+),
//     stopping at the bounds. DeleteLog → Purge with the subject filter.
//     JetStream cannot seek by the log's own sequence, only by the
//     stream's: the backend starts a Read at the stream sequence of the
//     cursor's record, which it keeps (the features' cursors are log
//     sequences; a small per-log index in KV, or one subject per record,
//     "log.<name>.<seq>", which makes the record at a sequence one direct
//     get, are the two ways to find it).
//   - durable.Leases → keys in a KV bucket with a TTL of its own (e.g.
//     ADHOST_LEASES). Acquire → Create when absent, or Update at the
//     revision read when the record is released, expired or the owner's;
//     the KV revision of the write is the fencing token (it grows with
//     every write of the key, like ours). Renew and Release → Update at the
//     token's revision, failing (ErrFenced) when someone wrote since.
//     Expiry is the record's own expiry time, compared with the clock; the
//     bucket's TTL only removes abandoned records.
//
// What does not map one to one:
//
//   - No multi-key transactions: one publish is one message. A
//     multi-record Append is an atomic batch publish (nats-server 2.12+,
//     allow_atomic on the stream, at most 1,000 messages by default), or
//     one message holding every record that the backend splits on Read.
//     Here an Append is one transaction. The features already avoid
//     multi-key transactions (package durable).
//   - Key characters: JetStream keys allow [-/_=.a-zA-Z0-9] with '.' as the
//     token separator; durable keys use '/' for levels, which the backend
//     maps to '.' (and a literal '.' in a key must be escaped, since "a.b"
//     and "a/b" would collide). Keys starting with '.' or ending with '.'
//     are invalid in JetStream.
//   - Size: messages are bounded by the server's max_payload (1 MiB by
//     default, 64 MiB at most), well under our MaxValueBytes; large job
//     records need max_payload raised or chunking into several messages.
//   - TTL: JetStream expires whole KV entries by the bucket's MaxAge (or a
//     per-message TTL on recent servers); leases here expire by their
//     recorded time, and retention of jobs and sessions is the features'
//     own sweep, the same on both backends.
//   - Revisions are per bucket, as ours are per store; the features only
//     rely on growth per key. A sequence gap (deleted or purged messages)
//     is normal in JetStream; durable.Logs' own sequences have none.
//   - Durability: JetStream acknowledges after the stream's replicas have
//     the message (R3 for safety) and syncs on its own interval unless
//     sync_interval is "always"; kill -9 of one server is covered by
//     replication rather than by a local fsync.
package store
