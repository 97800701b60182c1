// Package runtime is the run engine of adhost: semantic validation,
// authorization, admission, the step and tool loop, events with sequences,
// the idle timer, cancellation, structured output and usage.
//
// It owns the protocol's behaviour and nothing about transport or
// persistence: it declares the small interfaces it needs (Provider, ToolSet,
// and the stores) and imports neither host nor store.
//
// # Lifecycle of a run
//
// Engine.Start validates the request in the order of wire-core §3.3,
// re-checks shutdown, authorizes the Principal, and takes an admission slot
// (no queue: a full host or subject is BUSY). Every failure up to here is a
// *protocol.Error for an HTTP error response. The run then has run.started
// committed and executes in its own goroutine under a context derived from
// the engine, not from the request: the host ends it with Run.Cancel (client
// gone), and Engine.Shutdown ends them all. Each run commits exactly one
// terminal event, last; it is run.cancelled exactly when the run's
// cancellation signal fired (Cancel, idle timeout, shutdown, output buffer
// overflow), else run.completed or run.failed. The admission slot is freed
// the moment the terminal event is committed; the usage record is delivered
// afterwards, bounded to 2 s.
//
// In ModeStream the host reads events with Run.Next from a bounded queue
// (1,024 events or 2,000,000 bytes; overflow cancels the run with
// OUTPUT_BUFFER_LIMIT, the terminal event always fits). Adjacent text deltas
// merge while the reader is busy, so a fast provider costs one event per
// read, not one per token. In ModeJSON there is no queue and Run.Wait
// returns the RunResult or the terminal *protocol.Error.
//
// # Extension seams
//
// RunStore/EventLog (durable jobs, idempotency replay: persist each event
// before delivery), ApprovalHook (host approvals; interactive approvals
// wrap it), and ToolExecutor (how one validated call runs; application
// tools implement it). See seams.go.
package runtime
