// Package host is the HTTP transport of adhost: the AgenticDriver 1.0
// request pipeline (wire-core §1.2) in front of the run engine.
//
// One handler evaluates every request in the order the spec prescribes —
// always-present headers, host state, Origin/CORS, /health, bearer
// authentication, version negotiation, exact-target routing, content type
// and encoding, the body bound, strict decoding — and then hands the run to
// runtime.Engine, answering with a JSON RunResult or an SSE event stream.
// Routing matches the raw request target exactly, query included, as
// upstream does, so a general-purpose router would only get in the way.
//
// Streams: the host obtains the first event before committing the 200
// status (so early failures are still HTTP errors), writes every event that
// is immediately available and flushes once per batch, sends a heartbeat
// comment every 15 s while idle, and cancels the run the moment the client
// goes away. A failure after the status was written aborts the connection:
// the client then sees an incomplete stream, never a synthetic event.
//
// Timeouts bound receiving a request (headers 10 s, whole request 30 s,
// keep-alive idle 5 s) and never the response: a run may stream for hours.
package host
