// Package idempotency is the `idempotency` feature (wire-core §15,
// wire-extensions §8): a run carrying `idempotencyKey` is claimed once per
// (subject, key), its events are committed before they are delivered, and
// a later request with the same key and the same request replays the
// recorded outcome instead of running again. It is written on the
// durable.Store primitives and wraps the engine through
// runtime.StartOptions (DESIGN.md §8); the host does the HTTP part.
//
// # Records
//
// A key's record is named by the SHA-256 of the JSON array [subject, key]
// (so any client string fits durable.CheckKey, and two subjects never
// share a key) under "idempotency/v1/". It is two things of that name:
//
//   - the claim, a KV entry created with Create (so exactly one request
//     anywhere wins it): {v, fingerprint, state, owner, outcome, code}.
//     fingerprint is protocol.Fingerprint of the validated request (it
//     includes the key); state is running, finished or uncertain; owner
//     is the random id of the host process that claimed it; outcome and
//     code summarise the recorded terminal event.
//   - the compact event log, in durable.Logs: one record per event except
//     text.delta and run.progress, each the engine's own encoding behind
//     a one-byte tag ('e'); the run's result ('r': timestamp, then the
//     result as the JSON body encodes it), committed by the completion
//     hook before run.completed; and run.completed without its result
//     ('c'), so the result is stored once.
//
// # Outcomes of a request with a key (wire-core §15.2)
//
//   - New key: the claim is committed before the engine starts the run,
//     and so before any model work. A run that is then refused before
//     run.started (BUSY, a session check, a store failure) did nothing and
//     gives its key back.
//   - Same key, different fingerprint: IDEMPOTENCY_CONFLICT.
//   - Same key, run still going in this process: OPERATION_IN_PROGRESS.
//     This process's own table of running claims answers this; with
//     several hosts on one store (Options.Presence), so does an unfinished
//     claim whose owner is another host that is alive (its presence lease
//     is held): the run is going on there. Once that host is gone, the
//     claim answers as below.
//   - Same key, finished: the replay of the record.
//   - Same key, claimed but never finished (this process's run lost its
//     store, an earlier process crashed, or another process holds it): the
//     replay of what was recorded, ending in run.failed
//     OPERATION_UNCERTAIN. Such a claim is never taken over and never
//     re-run: the state is read, never repaired.
//
// The claim's state field is a summary for operators, written after the
// request is answered; a replay always reads the log, so a crash before
// the summary is written loses nothing.
//
// # Commit order and crash points
//
// Each event's Append returns only once the backend has committed it, and
// the engine delivers an event only after its Append returned (so a
// committed tool.called precedes the tool's effect and tool.completed
// precedes its output reaching the client); the result is committed by
// Complete before run.completed exists. A crash therefore leaves one of:
// no claim (nothing was shown to the client: a retry claims anew); a claim
// with a prefix of the events (replayed, then OPERATION_UNCERTAIN); the
// result without run.completed (replayed as completed, from the result);
// or the whole record.
//
// A store failure during the run stops it with OPERATION_STORE_ERROR, and
// a record that would grow past its bound with OPERATION_RECORD_LIMIT,
// both uncertain and not retryable; the terminal event that says so is
// stored too when the store takes it.
//
// # The record bound
//
// Options.MaxRecordBytes (host.toml idempotency.max_record_bytes, default
// 8,000,000) bounds the JSON of the events a run records plus its result,
// as a client sees them. The terminal event itself is stored beyond the
// bound (it is a few hundred bytes without its result), so a record
// always says how it ended. Keys are never expired or evicted; there is
// no entry bound because a durable store is bounded by its disk, and a
// bound on keys that are never evicted would only become a permanent
// refusal. A store that reports itself full (durable.ErrFull, ENOSPC) at
// the claim answers OPERATION_STORE_FULL, and nothing starts.
package idempotency
