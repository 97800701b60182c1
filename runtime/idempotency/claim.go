package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Record tags: the first byte of every stored log record.
const (
	// tagEvent: an event as the engine encoded it, byte for byte.
	tagEvent = 'e'
	// tagResult: the run's result, committed by Complete before
	// run.completed: a 24-byte wire timestamp, then the result as the
	// JSON-mode body encodes it.
	tagResult = 'r'
	// tagCompleted: run.completed without its result (the envelope up to
	// `,"result":`): the result is the tagResult record's, so it is stored
	// once.
	tagCompleted = 'c'
)

// timestampLen is the length of a wire timestamp (wire-core §5.1).
const timestampLen = len("2006-01-02T15:04:05.000Z")

var resultMember = []byte(`,"result":`)

// Claim is a key this process claimed and runs. It is the run's event log
// (runtime.EventLog, in StartOptions.Log) and its completion hook
// (Complete, in StartOptions.Complete); the caller ends it with Finish
// once it has answered the request.
type Claim struct {
	k    *Keys
	name string
	fp   string
	rev  uint64 // the claim's revision (from Create)

	mu   sync.Mutex
	last uint64 // the log's last sequence
	used int    // bytes counted against Keys.max
	// broken: an append failed, so last may be stale (the backend may
	// have committed what it did not acknowledge).
	broken  bool
	started bool // run.started is committed (or, deferred, accepted)
	// deferred: nothing the run emits is sent before its answer (a JSON
	// run), so events that have no effect outside the run wait in pending
	// for the next commit that must happen (see Append).
	deferred bool
	pending  [][]byte
	result   []byte // the committed result (tagResult), nil before
	ended    bool   // the terminal event was handled
	served   bool   // Finish was called
	state    string // the claim's final state, once ended
	outcome  string
	code     string
}

var _ runtime.EventLog = (*Claim)(nil)

// Append commits ev before the engine delivers it (the commit barrier of
// wire-core §15.3): every event but text.delta and run.progress. A
// non-terminal event that would take the record past its bound fails with
// OPERATION_RECORD_LIMIT, and a store failure with OPERATION_STORE_ERROR,
// both uncertain once the run has started: the engine then stops the run
// with that error. The terminal event is stored beyond the bound, so that
// a record always says how its run ended.
//
// A JSON-mode run delivers no event to anyone: its client sees only the
// answer. There run.started, step.started, usage.reported and
// tool.completed are held and committed together with the next record
// that must be committed at once — a tool.called (before the tool runs),
// any other event, the result (before the answer) or the terminal event —
// in one Append, so a JSON run pays one commit where a stream pays one per
// event. A crash loses only held events nobody saw.
func (c *Claim) Append(ctx context.Context, ev runtime.Event) error {
	switch ev.Type {
	case runtime.EventTextDelta, runtime.EventRunProgress:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Terminal() {
		return c.end(ctx, ev)
	}
	if c.ended {
		return c.fail(errors.New("idempotency: event after the terminal event"))
	}
	if c.used+len(ev.Data) > c.k.max {
		return c.fail(durable.ErrTooLarge)
	}
	if c.deferred && holdable[ev.Type] {
		c.pending = append(c.pending, record(tagEvent, nil, ev.Data))
	} else if err := c.append(ctx, tagEvent, nil, ev.Data); err != nil {
		return c.fail(err)
	}
	c.used += len(ev.Data)
	if ev.Type == runtime.EventRunStarted {
		c.started = true
	}
	return nil
}

// holdable are the events a JSON-mode run may commit late: none of them
// precedes an effect outside the run.
var holdable = map[string]bool{
	runtime.EventRunStarted:    true,
	runtime.EventStepStarted:   true,
	runtime.EventUsageReported: true,
	runtime.EventToolCompleted: true,
}

// Complete commits the run's result before run.completed is committed and
// before any success response: a run whose result cannot be recorded
// fails (OPERATION_RECORD_LIMIT or OPERATION_STORE_ERROR, uncertain)
// instead of succeeding unrecorded. It is StartOptions.Complete.
func (c *Claim) Complete(res *protocol.RunResult, _ json.RawMessage) error {
	rb, err := protocol.AppendRunResult(nil, res, false)
	if err != nil {
		return protocol.Wrap(protocol.CodeInternalError, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return c.fail(errors.New("idempotency: completion after the terminal event"))
	}
	if c.used+len(rb) > c.k.max {
		return c.fail(durable.ErrTooLarge)
	}
	ts := appendTimestamp(make([]byte, 0, timestampLen), time.Now())
	if err := c.append(context.Background(), tagResult, ts, rb); err != nil {
		return c.fail(err)
	}
	c.used += len(rb)
	c.result = rb
	return nil
}

// end stores the terminal event and settles the claim's state.
func (c *Claim) end(ctx context.Context, ev runtime.Event) error {
	if c.ended {
		return nil
	}
	c.ended = true
	if c.broken {
		if last, err := c.k.store.Last(ctx, c.name); err == nil {
			c.last = last
		}
	}
	var err error
	if env, ok := c.envelope(ev); ok {
		if !c.deferred {
			err = c.append(ctx, tagCompleted, nil, env)
		}
		// A JSON run's run.completed was never sent: its replay is
		// rebuilt from the result, at the result's time.
	} else {
		err = c.append(ctx, tagEvent, nil, ev.Data)
	}
	switch {
	case err == nil:
		c.state, c.outcome = stateFinished, ev.Type
		if ev.Type != runtime.EventRunCompleted {
			if s, e, ok := member(ev.Data, "error"); ok {
				c.code, _ = memberString(ev.Data[s:e], "code")
			}
		}
	case c.result != nil:
		// The result is recorded: a replay completes the run from it.
		c.state, c.outcome = stateFinished, runtime.EventRunCompleted
	default:
		c.state = stateUncertain
	}
	c.k.forget(c)
	if c.served {
		c.settle(ctx)
	}
	if err != nil {
		return c.fail(err)
	}
	return nil
}

// envelope returns run.completed without its result when the event
// carries exactly the committed result (as the event encodes it: with
// HTML escaping), so the result is stored once.
func (c *Claim) envelope(ev runtime.Event) ([]byte, bool) {
	if ev.Type != runtime.EventRunCompleted || c.result == nil {
		return nil, false
	}
	var esc bytes.Buffer
	esc.Grow(len(c.result) + len(resultMember) + 1)
	esc.Write(resultMember)
	json.HTMLEscape(&esc, c.result)
	esc.WriteByte('}')
	if !bytes.HasSuffix(ev.Data, esc.Bytes()) {
		return nil, false
	}
	return ev.Data[:len(ev.Data)-esc.Len()], true
}

// Finish is called once the request is answered. A run that never started
// (refused before run.started: BUSY, a session check, a store failure)
// gives its key back, as no work was done; otherwise the claim's final
// state is written once the run has ended.
func (c *Claim) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.served = true
	ctx := context.Background()
	switch {
	case !c.started && !c.ended:
		// The log is deleted first: a crash in between leaves a claim
		// without events, which replays as uncertain.
		err := c.k.store.DeleteLog(ctx, c.name)
		if err == nil {
			err = c.k.store.Delete(ctx, c.name, c.rev)
		}
		if err != nil {
			c.k.log.Warn("idempotency: giving back a claim that never started failed; it replays as uncertain", "code", string(protocol.CodeOperationStoreError))
		}
		c.ended = true
		c.k.forget(c)
	case c.ended:
		c.settle(ctx)
	}
}

// settle writes the claim's final state. It is a summary for operators:
// replays read the record itself, so a failure here loses nothing.
func (c *Claim) settle(ctx context.Context) {
	if c.state == "" {
		return
	}
	val, _ := json.Marshal(claimRecord{V: 1, Fingerprint: c.fp, State: c.state, Owner: c.k.owner, Outcome: c.outcome, Code: c.code})
	if _, err := c.k.store.Update(ctx, c.name, val, c.rev); err != nil {
		c.k.log.Warn("idempotency: recording a claim's final state failed", "state", c.state)
	}
}

// append commits the held records and one more: tag, head, body.
func (c *Claim) append(ctx context.Context, tag byte, head, body []byte) error {
	recs := append(c.pending, record(tag, head, body))
	c.pending = nil
	last, err := c.k.store.Append(ctx, c.name, c.last, recs...)
	if err != nil {
		c.broken = true
		return err
	}
	c.last = last
	return nil
}

func record(tag byte, head, body []byte) []byte {
	rec := make([]byte, 0, 1+len(head)+len(body))
	rec = append(rec, tag)
	rec = append(rec, head...)
	return append(rec, body...)
}

// fail maps a store error to the run's public error: OPERATION_RECORD_LIMIT
// for a record over its bound, OPERATION_STORE_ERROR otherwise. Once the
// run has started its effects are uncertain; before, nothing ran (the
// claim is given back) and the error says so.
func (c *Claim) fail(err error) *protocol.Error {
	code := protocol.CodeOperationStoreError
	if errors.Is(err, durable.ErrTooLarge) {
		code = protocol.CodeOperationRecordLimit
	}
	pe := protocol.Wrap(code, err)
	pe.Retryable = false
	pe.Uncertain = c.started
	return pe
}
