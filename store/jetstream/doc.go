// Package jetstream is the second durable.Store backend: NATS JetStream,
// for several adhost hosts sharing one view of jobs, sessions and
// idempotency keys. The features (runtime/jobs, runtime/sessions,
// runtime/idempotency) run on it unchanged; it passes the same
// conformance suite (durabletest) as the Badger store, against a server
// started in the test process (natstest).
//
// # What lives where
//
// Under a bucket prefix P (host.toml store.jetstream.bucket_prefix,
// default ADHOST), one per deployment:
//
//	KV buckets P_KV_0…3   durable.KV: one key per durable key, in the
//	                      bucket its hash picks
//	KV bucket P_LEASES    durable.Leases: holder, fencing token, expiry
//	streams P_LOGS_0…3    durable.Logs: subjects "P.log<i>.<name>.<seq>",
//	                      a log in the stream its name's hash picks
//
// Why shards: with replicas 1 and every write synced, a stream stores
// and syncs one message after another, while different streams sync at
// once. A job writes about a dozen keys and one log message per event;
// in one bucket and one stream those queued behind each other, and the
// KV stream's sync rate was the cluster's job rate (BenchmarkJobsCluster
// reports the busiest stream's writes per job: 9 of 15.5 in one bucket,
// 2.3 with four). The shard of a key or log is FNV-1a of its name, the
// same on every host; the counts are part of the layout, recorded in the
// first bucket's metadata: a host with other counts, or a store holding
// state in the unsharded P_KV or P_LOGS, is refused at Open rather than
// read as empty.
//
// Durable keys use '/' between levels; each level becomes one subject
// token (keys.go: '.' and '=' inside a level are escaped, an empty level
// has a token of its own), so a List of "jobs/v1/job/" is the subject
// filter "jobs.v1.job.>" on every shard, merged and sorted. Revisions are
// the sequences of the key's bucket stream: they grow with every write of
// a key, across delete and re-create, like the Badger store's counter
// (revisions of keys in different shards are unrelated, which durable.KV
// allows: a revision is only ever compared for its own key). Create, Update and Delete with a revision are
// JetStream's own compare-and-set (the expected last subject sequence),
// so two hosts racing on one revision get one success and one
// durable.ErrRevision from the server, not from a read-then-write here.
//
// Logs (logs.go) keep one message per Append, on the subject of its
// first record's log sequence: the record at a sequence is one direct
// get, a multi-record Append is one message (a frame) and so commits
// whole, and the per-log expected-last check is the server's
// expected-last-subject-sequence over the log's wildcard subject. An
// Append costs one publish when this process made the log's last append
// (a bounded cache of each log's last stream sequence; the server still
// checks), one lookup more otherwise. A page is one direct get of its
// records' literal subjects (a wildcard filter makes the server walk
// every subject of the log); a whole-log read is a batched direct get by
// filter.
//
// Measured on the loaded 2-core development machine, in-process server,
// replicas 1, every write synced (go test -run '^$' -bench . -benchtime
// 1000x ./store/jetstream/ and -bench SessionTurn ./host/): a session
// turn's three store operations p50 0.40 ms (Badger 0.35–4 ms with the
// load); a JSON session turn over HTTP 2.1 ms/op (Badger 3.4 ms/op);
// appends from 8 logs 0.14 ms each (Badger 0.04 ms); a 100-event page
// 2.3 ms (Badger 0.08 ms).
//
// Leases (kv.go) are compare-and-set writes of one record each; the
// fencing token of an acquisition is the revision of its own write, which
// grows with every acquisition; a release purges the record (its marker
// expires), so a lease per job does not stay in the bucket. Expiry is the record's
// time, compared with the clock of the host that reads it: hosts sharing
// a store need synchronised clocks (NTP), well within a lease.
//
// # Durability and availability
//
// A write returns nil once the server acknowledged it, which JetStream
// does after the stream's replicas have it. With replicas 1 that is one
// server's disk: start it with sync_interval "always" (tools/natsserver
// does, as natstest does) or a kill of the server can lose the last
// writes of its sync interval. With replicas 3 or 5 an acknowledged
// write is on a majority; reads then go to the stream leader (direct gets
// are turned off on the buckets and the stream, since a follower may
// answer with an older value and a revision must never go backwards),
// and pages are read one message at a time.
//
// Every operation is bounded by Options.Timeout (5 s) when its context
// has no earlier deadline. The connection reconnects for as long as the
// host runs; while it is down, operations fail at once or at the timeout
// with an ordinary error, which the features answer as their
// store-unavailable codes (JOB_STORE_ERROR, 503, retryable). Nothing is
// buffered while disconnected: a write the host reported as failed does
// not reach the server after the connection is back. A write in flight
// when the connection dropped may still have been applied: its outcome
// is uncertain, as the features' codes say.
//
// # What does not map one to one
//
//   - List reads every key under the prefix's complete levels, from the
//     four shards at once, then sorts and cuts: JetStream keeps keys in
//     write order. A page costs the whole prefix (fine at the features'
//     bounds: thousands of keys).
//   - Size: one value, record or multi-record Append is one message,
//     bounded by the server's max_payload (1 MiB by default; raise it to
//     the largest job record, max_job_bytes, or jobs with large requests
//     fail JOB_RECORD_LIMIT). Larger messages are durable.ErrTooLarge;
//     an account or server out of storage is durable.ErrFull.
//   - One subject per append means the server indexes every record's
//     subject (some tens of bytes of memory each) until the log is
//     deleted: bounded by the features' retention and capacity.
//   - A delete is a purge (the key's value goes at once) whose marker
//     expires after a minute (the bucket's LimitMarkerTTL, NATS 2.11 or
//     later), so the keys the features delete all the time — job queue
//     entries, cancel signals, expiry keys — do not pile up markers that
//     every List of their prefix would walk. Revisions stay monotonic
//     across re-creation either way (they are stream sequences). On an
//     older server the markers stay, with a warning at Open. Retention
//     of jobs and sessions is the features' own sweep, as on Badger.
package jetstream
