// Package sessions is the conversation-sessions feature (wire-extensions
// §3): the /v1/sessions/create|read|delete operations and the turns of runs
// carrying `session: {id, revision}`, on the durable.KV primitives.
//
// # Records
//
// One KV key per session, "sessions/v1/<id>", holding a JSON record: the
// binding {subject, provider instance, {hostId, accountId}, model} fixed at
// create, the mode, the session's own revision, its state
// (ready/running/interrupted), timestamps, the visible history, the
// instructions and — native mode only — the adapter's opaque continuation
// state. The native state never leaves this package except as
// StartOptions.Native for the next turn: it is in no snapshot, result,
// event or log line.
//
// Every state change is a compare-and-set Update on the key's KV revision,
// so two turns racing on one session cannot both begin: the loser re-reads
// and answers SESSION_BUSY (or SESSION_REVISION_CONFLICT once the winner
// committed). A turn is: CAS ready→running (Begin), then either the commit
// in StartOptions.Complete (history appended, native state stored,
// revision+1, ready, before run.completed is committed), or, at the run's
// terminal event, running→interrupted when model work had started
// (step.started was seen) or running→ready when it had not. The commit
// happens before run.completed is sent, so a cancellation that lands
// between the two leaves the turn committed while the client sees
// run.cancelled; a read shows the new revision. A delete cancels the
// turn's run first and then removes the record, so the turn ends as
// run.cancelled SESSION_DELETED at whatever step it was.
//
// # Persistence: a deliberate difference from the reference
//
// The reference keeps sessions in memory and loses them on restart. Here
// they are in the host's durable store, so an acknowledged revision
// survives kill -9 and a session's revision never goes backwards. A turn
// that was running when the process died cannot be finished or proven
// unstarted, so New turns every record still `running` into `interrupted`
// (its idle retention starting then): the application reads the visible
// history and creates a replacement session, as after any interrupted
// turn. Recovery needs no lease: one host owns the store directory.
//
// # Retention and capacity
//
// Idle retention runs from create or from the end of the last turn and is
// suspended while a turn runs (expiresAt absent); read does not extend it.
// Expired sessions are removed by a timer armed for the earliest expiry
// and, on access, treated as missing. max_entries counts the records in
// the store (SESSION_CAPACITY at create, after removing expired ones).
//
// # Limits
//
// The size a record is checked against (max_record_bytes) is the encoded
// JSON of the visible history, plus that of the instructions, plus the
// native state's bytes. Visible messages are bounded by max_messages,
// each message by 100,000 UTF-16 units, and the messages handed to the
// provider by 2048 (the engine hands it the visible history; a native
// turn's tool exchanges are inside the adapter's native state, which the
// byte bound covers). A turn is refused before it starts when its user
// message and an empty reply would not fit; a reply that does not fit
// fails the turn with SESSION_CONTEXT_LIMIT (and, model work having
// happened, the session becomes interrupted). Nothing is truncated.
//
// # Error choices
//
// The `session` run option is a member of the run request, so a malformed
// one is the run request's schema failure, INVALID_REQUEST; the bodies of
// the session endpoints fail with INVALID_SESSION. The endpoints check the
// operation grant before looking the session up, then the provider grant
// of the session's provider; a run checks as §3.2 orders (lookup, then
// grants). Store failures are INTERNAL_ERROR (the spec has no session
// store code); a value over the backend's bound is SESSION_CONTEXT_LIMIT.
package sessions
