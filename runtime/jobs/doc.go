// Package jobs is durable-jobs (wire-extensions §2): detached runs accepted
// into durable storage, dispatched by a single-owner worker, observed
// through their committed event logs, and never run twice.
//
// It is written in the primitives of runtime/durable only — per-key
// compare-and-set, ordered logs with an expected-last-sequence check,
// fenced leases — so the Badger store and a later JetStream backend both
// carry it unchanged. There are no multi-key transactions, on purpose;
// instead every operation writes its keys in an order whose every prefix
// is a state the next owner recovers from.
//
// # Layout
//
//	jobs/v1/lease          the worker lease (one owner per store)
//	jobs/v1/key/<h>        subject+key claim: {id, fingerprint}; h is the
//	                       SHA-256 hex of the length-prefixed subject and key,
//	                       so any client string fits durable.CheckKey
//	jobs/v1/job/<id>       the job record (state, request, binding …), or
//	                       its tombstone after retention
//	jobs/v1/ev/<id>        the job's committed events, sequence = wire
//	                       sequence
//
// The log is the truth for a job's cursor: the record's cursor is written
// only with a terminal state, and a running job's cursor is the log's last
// sequence (kept in memory by the owner, read from the log at takeover).
//
// # Order of writes, and why every crash point recovers
//
// Submit: (1) Create the key claim, (2) Create the record (queued),
// (3) answer. A crash after (1) leaves a claim without a record: it was
// never acknowledged, and the takeover scan deletes it; a resubmission
// that finds it with the same fingerprint before then creates the
// record itself (the id is in the claim). After (2) the job exists and
// will run.
//
// Dispatch: the record goes queued → running (CAS) when the engine commits
// run.started, before run.started itself is appended; then every event is
// appended with the expected last sequence before the run may go on (the
// commit barrier: a committed tool.called precedes the tool's effect);
// the terminal event is appended, then the record becomes terminal. A
// crash while running leaves a running record: the next owner appends
// run.failed JOB_INTERRUPTED (outcome uncertain), with a synthetic
// run.started first when the log is empty, and marks it interrupted — it
// is never run again. A crash between the terminal append and the record
// update leaves a log that already ends in a terminal event: the next owner
// adopts that event's state instead. A job is never put back in the queue
// once run.started may have been committed, so nothing runs twice.
//
// Cancel and failed dispatch checks of a queued job rewrite the record
// unchanged (a fence: an owner that lost the store fails this CAS and
// stops), append the two synthetic events (run.started, then run.cancelled
// or run.failed), and update the record last; a crash in between is again
// a log ending in a terminal event, adopted at takeover. The takeover
// rewrites every queued record for the same reason. Cancel of a running job
// persists cancelRequested, then cancels the run.
//
// Retention: the record is replaced by its tombstone (CAS) first, the log
// deleted second; the takeover scan deletes the logs of all tombstones
// again (idempotent), so a crash in between leaks nothing.
//
// Fencing: the owner holds the lease and renews it every lease/3. A new
// owner's takeover rewrites every running record and appends to every
// running log, so an old owner that lost its lease fails its next CAS or
// its next append (ErrRevision/ErrSequence → JOB_LEASE_LOST) and stops.
// The lease owner is the host's persistent identity (usage.host_id), so
// the same host restarted after kill -9 takes over at once.
//
// The owner keeps an in-memory index (states, per-subject queues, counts,
// bytes) built by the takeover scan; it is authoritative because only the
// owner writes.
package jobs
