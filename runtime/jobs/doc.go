// Package jobs is durable-jobs (wire-extensions §2): detached runs accepted
// into durable storage, dispatched by the workers of every host sharing
// the store, observed through their committed event logs, and never run
// twice.
//
// It is written in the primitives of runtime/durable only — per-key
// compare-and-set, ordered logs with an expected-last-sequence check,
// fenced leases — so the Badger store (one host) and the JetStream store
// (several hosts) carry it unchanged. There are no multi-key
// transactions, on purpose; instead every operation writes its keys in an
// order whose every prefix is a state some worker recovers from.
//
// # Layout
//
//	jobs/v1/key/<h>        subject+key claim: {id, fingerprint, created};
//	                       h is the SHA-256 hex of the length-prefixed
//	                       subject and key, so any client string fits
//	                       durable.CheckKey
//	jobs/v1/job/<id>       the job record (state, request, binding, the
//	                       worker that ran it and its lease token …), or
//	                       its tombstone after retention
//	jobs/v1/ev/<id>        the job's committed events, sequence = wire
//	                       sequence
//	jobs/v1/q/<id>         queue entry {subject, created}: present from
//	                       before the record exists until after it is
//	                       terminal — the shared set every worker scans
//	jobs/v1/run/<id>       the job's lease (durable.Leases): held by the
//	                       worker that dispatches, runs, recovers or ends it
//	jobs/v1/cx/<id>        cancel signal for the worker running the job
//	jobs/v1/exp/<ms>-<id>  terminal jobs' expiries, in time order: one
//	                       job's, or (id "b.<uuid>") a batch of the jobs
//	                       a worker settled within 20 ms (expiry.go)
//	jobs/v1/cap/h/<w>      capacity counter {jobs, live bytes} of worker
//	                       w (hash of its name); the total is the sum
//	jobs/v1/cap/s/<h>/<w>  capacity counter {jobs} of one subject (h:
//	                       SHA-256) and worker w
//	jobs/v1/lease          the maintenance lease (retention, sweeps)
//
// The log is the truth for a running job's cursor: the record's cursor is
// written only with a terminal state; readers on other hosts take the
// log's last sequence.
//
// # Workers, leases and fair dispatch
//
// Every host runs a worker. A worker lists the queue entries every poll
// interval or every 250 ms, whichever is longer (a listing reads every
// entry), and learns of its own submissions at once; it orders the queued
// jobs the same way on every host: by subject in byte order, and within a
// subject by creation time. A dispatch window takes rounds of one
// job per subject, starting after the subject this worker served last (the
// rotating start of §2.3), until its free slots are used. A candidate is
// taken by acquiring its per-job lease: exactly one worker gets it; the
// others see it held (until its expiry) and pass on. So each host is fair
// among subjects by itself, and a subject flooding the queue gets at most
// one job per round on each host while every other subject with queued
// work gets one too; there is no shared cursor to contend on.
//
// The lease holder renews it every lease/3 while the job runs. The lease
// holder's name is the host's persistent identity on the store (its
// presence id, or usage.host_id on Badger), so the same host restarted
// after kill -9 re-acquires its own leases at once, while a dead host's
// leases must expire first.
//
// # Order of writes, and why every crash point recovers
//
// Submit: (1) at once (one round trip): Create the key claim, reserve
// capacity (the two counters) and Create the queue entry under the new
// id; (2) Create the record (queued); (3) answer. A submission that finds
// the claim there already gives its reservation and entry back (a
// resubmission briefly holds a slot it does not keep) and answers the
// claimed job. A crash after (1) was never acknowledged: a resubmission
// that finds the claim with the same fingerprint but no record creates
// the record itself (the id is in the claim); otherwise the maintenance
// sweep deletes claims without a record once they are older than
// orphanAge, and a worker taking an entry without a record deletes it
// after the same age (younger ones may be a submission under way on
// another host). After (2) the job exists and has its entry, so some
// worker will take it.
//
// Dispatch: (1) Acquire the job's lease; (2) Get the record and the
// log's last sequence: a queued record with an empty log is dispatched,
// anything else is settled (below); (3) the run's first event,
// run.started, is appended with the expected last sequence 0: that append
// is the queued → running transition (of two workers that both think they
// hold the job exactly one commits it), and the record is not rewritten
// for it — a queued record whose log has events is a running job, which
// reads report as running with the log's cursor (one synced write less
// per job than a record rewrite); then every event is appended with the
// expected last sequence before the run may go on (the commit barrier: a
// committed tool.called precedes the tool's effect); the terminal event is
// appended, then the record becomes terminal, naming this worker and its
// token; (4) settle: the job's expiry joins the worker's next batch key
// (one synced write for the jobs settled within 20 ms; settling is off
// the client's path, the record being terminal already; a cancel or
// recovery at Open writes a key of its own at once), then Delete the
// queue entry and Release the lease. BUSY gives the lease back with the job still
// queued. (Records written running by earlier versions are read the same
// way.)
//
// A crash (or a partition longer than the lease) while the job runs leaves
// a running job (its log has events) whose lease lapses; the entry is
// still there, so a worker (the same host restarted, at once; another
// host, after expiry) acquires the lease, finds the log non-empty and
// interrupts it: it appends run.failed JOB_INTERRUPTED (outcome
// uncertain) after the log's last event (a synthetic run.started first
// when the log of a record written running is empty), and marks the
// record interrupted. A crash before run.started was committed leaves an
// empty log: the run never began (no provider call, no tool), so the job
// is still queued and runs once. It never runs it again. A crash
// between the terminal append and the record update leaves a log that
// already ends in a terminal event: the next taker adopts that event's
// state instead. A crash after the record is terminal but before the
// entry is gone: the next taker finds a terminal record and only settles.
// A job is never dispatched again once run.started may have been
// committed (an append whose outcome is unknown is looked up in the log
// by the next taker), so nothing runs twice.
//
// Fencing: the lease token orders takers, and the writes check it in
// effect. The record is only written by CAS on the revision this worker
// last wrote, and every append expects the log's last sequence; a taker
// that interrupts a job first appends to its log and then rewrites its
// record, so a worker that lost its lease (it stopped renewing: it aborts
// the run with JOB_LEASE_LOST) fails its next append (ErrSequence) or its
// next CAS (ErrRevision) and writes nothing more; of a stale worker and a
// new taker both starting a run, the first run.started appended wins and
// the other run stops before its first step. The
// one change another host may make to a running job's record is
// cancelRequested: a CAS refused by that is merged (the cancel adopted, the
// run cancelled) and written again.
//
// Cancel, from any host: a queued job is taken like a dispatch (its lease)
// and ended at once; if another worker holds it, or it runs, Cancel
// persists cancelRequested (CAS) and then writes the cancel signal; the
// running worker lists the signals every poll interval or 250 ms (whichever
// is longer) while it runs jobs and cancels the run. A crash between the
// two leaves cancelRequested, which the worker adopts at its next record
// write, and the client (not yet answered) cancels again. Ending a job that
// never ran (cancel, failed dispatch checks) rewrites the record with
// Ending set (a fence, and the mark that its log may be non-empty), appends
// the two synthetic events (run.started, then run.cancelled or run.failed)
// and makes the record terminal; a crash in between is a log ending in a
// terminal event, adopted by the next taker, or an empty log, and the job
// stays queued.
//
// Retention: the maintenance lease holder (one host at a time) lists the
// expiry keys in time order; for each one due, the records it names are
// replaced by their tombstones (CAS), their logs deleted, then the expiry
// key deleted (kept while one of them failed); a crash in between
// repeats the idempotent steps.
//
// # Capacity across hosts
//
// JOB_STORE_FULL is decided on shared counters kept as one key per worker
// (each written only by its worker, by compare-and-set, so hosts never
// contend on a hot key): the count is the sum over the workers' keys. A
// submission reserves one job on its subject's counter and one job plus its
// record's bytes (and liveReserve) on the total before its record is
// written, checking its own exact value plus the other workers' values:
// far from a limit as listed at most a poll interval or 250 ms ago
// (whichever is longer), and within 64 jobs (or a 16th of the limit; 1 MB
// or a 16th for bytes) of it, and before any refusal, as listed at that
// moment. So a limit holds exactly at its edge, except for submissions on
// several hosts racing within one listing's round trip (a bounded
// over-admission of at most one per racing host); there is never a
// refusal with room left. Concurrent changes in one process are combined
// into one write. Event bytes reach the total when the job ends (with the
// terminal record) and leave it at the tombstone (on the maintenance
// holder's key, which may go negative); while jobs run, the per-event check
// counts the total as last seen plus this worker's running jobs' appended
// bytes, so hosts may also exceed max_bytes by what their concurrently
// running jobs appended (at most workers × max_job_bytes per host) until
// those end. A crash between a counter change and the write it accounts for
// leaves the counters off by that one job: bounded by the crashes, never by
// the load. The first host to open a store without counters (one the
// single-owner worker wrote) builds them from the records under the
// reserved worker name "migrated".
//
// Reads and pages come from the store on every host: the record for the
// state, the log for the events.
package jobs
