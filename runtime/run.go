package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"adhost/runtime/protocol"
)

// Run is one admitted run. Its goroutine executes the step loop; the host
// consumes it with Next (ModeStream) or Wait (ModeJSON) and may end it with
// Cancel at any time.
type Run struct {
	e       *Engine
	id      string
	subject string
	// principal is the credential the run started with: retrieval
	// evidence is re-authorized for it.
	principal *Principal
	req       *protocol.RunRequest
	plan      *plan
	mode      Mode
	startedAt time.Time // wall clock and monotonic epoch of the run

	// ctx is the run's lifetime, derived from the engine's base context,
	// never from the request. Its cause says why it ended (*stopCause).
	ctx    context.Context
	cancel context.CancelCauseFunc

	log EventLog // nil: not persisted
	// logCtx is context.WithoutCancel(logCtxOf), the context log appends
	// get: made once for each r.ctx rather than for every event (an
	// allocation an event).
	logCtx, logCtxOf context.Context
	// native is the continuation state the first step is given
	// (StartOptions.Native); finalNative what the last step returned.
	native, finalNative json.RawMessage
	onComplete          func(*protocol.RunResult, json.RawMessage) error
	needData            bool // events are encoded (someone reads Data)
	// logReadsData: a log reads events' Data (not only TypesOnly logs), so
	// a JSON-mode run commits its text.delta events for it.
	logReadsData bool
	// reservations are the run's units of capped extensions (Capacity),
	// taken at admission and released with the admission slot.
	reservations []Reservation
	// slot is the run's Scheduler slot (nil: counted by the engine);
	// queued says the run was accepted waiting for it (awaitAdmission).
	slot   Slot
	queued bool
	// budgets are the resource budgets checked after each model
	// response (checkBudgets).
	budgets []Budget

	// lastActive is the time of the last real progress, as a duration
	// since startedAt (read by the idle timer).
	lastActive atomic.Int64
	// idlePaused stops the idle clock while an interactive approval with
	// idlePolicy "pause" is awaited (wire-extensions §4.6).
	idlePaused atomic.Bool

	mu    sync.Mutex
	seq   int64
	q     []Event // committed, not yet delivered (ModeStream)
	qHead int
	// queuedText is the text of queued text.delta events plus the pending
	// delta: the "queued text" bound of wire-core §8.1. It counts the text
	// itself, not its JSON, so that a turn streaming no more than a
	// provider may (2,000,000 bytes, checked at the source) never overflows
	// the queue however late the reader is scheduled: OUTPUT_BUFFER_LIMIT is
	// for a reader that falls behind by more than that. queuedBytes is the
	// JSON of the other queued events, bounded alike: it bounds the memory
	// a stalled reader pins (tool outputs, results).
	queuedText  int
	queuedBytes int
	pending     []byte // text.delta not yet sequenced: adjacent deltas merge here
	pendingTS   time.Time
	terminal    bool // terminal event committed
	eof         bool // terminal event delivered by Next
	notify      chan struct{}
	idleTimer   *time.Timer

	// Owned by the run goroutine.
	toolPending bool
	acct        usageAccount
	callIDs     map[string]bool

	done       chan struct{}
	result     *protocol.RunResult
	err        *protocol.Error
	cancelled  bool // the terminal event is run.cancelled
	finishedAt time.Time
}

// stopCause is the cancellation cause of a run's context: the public error
// of its terminal event, and whether that event is run.cancelled (the
// cancellation signal fired) or run.failed (the run was aborted, e.g. by
// its event log).
type stopCause struct {
	err       *protocol.Error
	cancelled bool
}

func (c *stopCause) Error() string { return c.err.Error() }

var (
	// errRunFinished is the cause the run itself sets when its loop ends;
	// any other cause set first wins (context keeps the first cause).
	errRunFinished = errors.New("runtime: run finished")
	idleCause      = &stopCause{err: protocol.New(protocol.CodeIdleTimeout), cancelled: true}
	overflowCause  = &stopCause{err: protocol.New(protocol.CodeOutputBufferLimit), cancelled: true}
)

func newRun(e *Engine, p *Principal, req *protocol.RunRequest, pl *plan, mode Mode) *Run {
	r := &Run{
		e:         e,
		id:        newUUID(),
		subject:   p.Subject,
		principal: p,
		req:       req,
		plan:      pl,
		mode:      mode,
		startedAt: time.Now(),
		needData:  mode == ModeStream,
		notify:    make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancelCause(e.base)
	return r
}

// releaseSlot gives back the run's admission slot and its capacity
// reservations.
func (r *Run) releaseSlot() {
	// Reservations first: a waiting run admitted by the freed slot takes
	// its own at once.
	releaseAll(r.reservations)
	r.e.releaseAdmission(r.subject, r.slot)
	r.plan.cfg.inflight.Done()
}

// ID returns the run id (a lowercase UUID, the events' runId).
func (r *Run) ID() string { return r.id }

// Done is closed when the run has committed its terminal event and released
// its admission slot.
func (r *Run) Done() <-chan struct{} { return r.done }

// Cancel ends the run with run.cancelled. A *protocol.Error cause keeps its
// code (e.g. a later SESSION_DELETED); anything else, nil included, is
// CANCELLED. Cancelling an ended run does nothing.
func (r *Run) Cancel(cause error) {
	var pe *protocol.Error
	if !errors.As(cause, &pe) {
		pe = protocol.New(protocol.CodeCancelled)
		pe.Err = cause
	}
	r.cancel(&stopCause{err: pe, cancelled: true})
}

// Wait blocks until the run ends and returns its result, or its terminal
// error as a *protocol.Error (HTTP status via protocol.HTTPStatus). If ctx
// ends first it returns ctx.Err() and the run continues: the host cancels
// it explicitly.
func (r *Run) Wait(ctx context.Context) (*protocol.RunResult, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.result, nil
}

// Next returns the run's next event (ModeStream), blocking until one is
// committed or ctx ends. After the terminal event it returns io.EOF. Next
// must not be called concurrently.
func (r *Run) Next(ctx context.Context) (Event, error) {
	if r.mode != ModeStream {
		return Event{}, errors.New("runtime: Next on a run not started in ModeStream")
	}
	for {
		r.mu.Lock()
		if r.qHead == len(r.q) {
			r.flushPendingLocked()
		}
		if r.qHead < len(r.q) {
			ev := r.q[r.qHead]
			r.q[r.qHead] = Event{}
			r.qHead++
			switch {
			case r.qHead == len(r.q):
				r.q, r.qHead = r.q[:0], 0
			case r.qHead >= 256 && r.qHead*2 >= len(r.q):
				n := copy(r.q, r.q[r.qHead:])
				clear(r.q[n:])
				r.q, r.qHead = r.q[:n], 0
			}
			if ev.Type == EventTextDelta {
				r.queuedText -= ev.text
			} else {
				r.queuedBytes -= len(ev.Data)
			}
			if ev.Terminal() {
				r.eof = true
			}
			r.mu.Unlock()
			return ev, nil
		}
		eof := r.eof
		r.mu.Unlock()
		if eof {
			return Event{}, io.EOF
		}
		select {
		case <-r.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// begin arms the idle timer and commits run.started: the run is admitted.
// It fails only if the event log refuses run.started; the run has then
// emitted nothing and Start reports the error as an HTTP error.
func (r *Run) begin() error {
	r.touch()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(&payload{typ: EventRunStarted, ts: time.Now(), provider: r.req.Provider, model: r.req.Model})
	if r.seq == 0 {
		r.cancel(errRunFinished)
		if sc, ok := context.Cause(r.ctx).(*stopCause); ok {
			return sc.err
		}
		return protocol.New(protocol.CodeInternalError)
	}
	if r.plan.idle > 0 && !r.queued {
		r.idleTimer = time.AfterFunc(r.plan.idle, r.idleCheck)
	}
	return nil
}

// awaitAdmission is a queued run's wait for its slot: no step, no event
// and no idle clock until admitted (wire-extensions §11.1). A cancellation
// (the client went away) ends the wait at once, and finish's releaseSlot
// gives the queue place back. Once admitted the run takes its capacity
// reservations, as an immediately admitted run did in Start.
func (r *Run) awaitAdmission() error {
	select {
	case <-r.slot.Admitted():
	case <-r.ctx.Done():
		r.stage(StageQueue, r.startedAt, false)
		return context.Cause(r.ctx)
	}
	// The wait began with the run (its run.started, committed in Start).
	r.stage(StageQueue, r.startedAt, true)
	rs, err := admittedReservations(r.slot, r.plan)
	if err != nil {
		return err
	}
	if len(rs) > 0 {
		// Only the run goroutine reads r.ctx before the first step.
		r.reservations = rs
		r.ctx = WithReservations(r.ctx, rs...)
	}
	r.touch()
	r.mu.Lock()
	if r.plan.idle > 0 && !r.terminal {
		r.idleTimer = time.AfterFunc(r.plan.idle, r.idleCheck)
	}
	r.mu.Unlock()
	return nil
}

// execute is the run goroutine.
func (r *Run) execute() {
	if r.queued {
		if err := r.awaitAdmission(); err != nil {
			r.end(nil, err)
			return
		}
	}
	res, err := r.loop()
	if err == errTakenOver {
		return // another goroutine ended the run (callProvider)
	}
	r.end(res, err)
}

// end finishes the run and delivers its usage record; it runs once per run,
// on the run goroutine or on the goroutine that took the run over.
func (r *Run) end(res *protocol.RunResult, err error) {
	defer r.e.runs.Done()
	r.finish(res, err)
	r.deliverUsage()
}

// finish decides and commits the terminal event, frees the slot and
// publishes the outcome.
func (r *Run) finish(res *protocol.RunResult, err error) {
	r.cancel(errRunFinished)
	var (
		pe        *protocol.Error
		cancelled bool
	)
	if sc, ok := context.Cause(r.ctx).(*stopCause); ok {
		pe, cancelled, res = clone(sc.err), sc.cancelled, nil
	} else if err != nil {
		pe = clone(protocol.AsPublic(err))
	} else if res == nil {
		pe = protocol.New(protocol.CodeInternalError)
	}
	if pe != nil && r.toolPending {
		// wire-core §12.3: effects may have happened.
		pe.Uncertain, pe.Retryable = true, false
	}
	now := time.Now()
	p := &payload{ts: now}
	switch {
	case pe == nil:
		p.typ, p.result = EventRunCompleted, res
	case cancelled:
		info := pe.Info()
		p.typ, p.err = EventRunCancelled, &info
	default:
		info := pe.Info()
		p.typ, p.err = EventRunFailed, &info
	}
	r.logEnd(pe, p.typ, now)
	r.mu.Lock()
	r.emitLocked(p)
	if r.idleTimer != nil {
		r.idleTimer.Stop()
	}
	r.mu.Unlock()
	r.releaseSlot()
	r.result, r.err, r.cancelled, r.finishedAt = res, pe, cancelled, now
	close(r.done)
}

// logEnd writes the run's end line (outcome, code, steps, duration) and,
// for a failure of the host itself, a warning. Content never reaches the
// log. The private cause of a failure is logged at debug level only: a
// provider error may carry an upstream body, which an operator chasing a
// failure may need and a log shipped elsewhere should not hold.
func (r *Run) logEnd(pe *protocol.Error, typ string, now time.Time) {
	log := r.e.log
	var code string
	if pe != nil {
		code = string(pe.Code)
		if pe.Code == protocol.CodeInternalError {
			log.Warn("run failed", "runId", r.id, "provider", r.req.Provider, "code", code, "event", typ, "causeType", typeName(pe.Err))
		}
	}
	ctx := context.Background()
	if log.Enabled(ctx, slog.LevelInfo) {
		log.LogAttrs(ctx, slog.LevelInfo, "run ended", slog.String("runId", r.id), slog.String("outcome", typ),
			slog.String("code", code), slog.Int("steps", r.acct.started),
			slog.Float64("durationMs", float64(now.Sub(r.startedAt).Microseconds())/1000))
	}
	if pe != nil && pe.Err != nil && log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("run failure cause", "runId", r.id, "code", code, "cause", pe.Err.Error())
	}
}

func clone(pe *protocol.Error) *protocol.Error {
	c := *pe
	return &c
}

// touch records real progress for the idle timer (wire-core §13). What
// counts: the start of each step, visible text (a non-empty delta), a
// provider turn's completion, a tool's completion, and a progress report
// of the adapter or a tool that is shown to the client as run.progress.
// Progress reports arriving within progressInterval of the last one shown
// are throttled away and count for nothing: a guest reporting progress in
// a loop would otherwise keep a run alive without doing anything. So a
// stretch of nothing but progress keeps a run alive only under an idle
// interval longer than progressInterval. Queue waits, retry back-off,
// heartbeats, empty deltas and usage reports do not count.
func (r *Run) touch() {
	if r.plan.idle > 0 {
		r.lastActive.Store(int64(time.Since(r.startedAt)))
	}
}

// idleCheck runs when the idle interval may have elapsed. Progress does not
// reset the timer (that would cost a timer operation per text delta); it
// stamps lastActive, and the timer re-arms itself for the remainder.
func (r *Run) idleCheck() {
	elapsed := time.Since(r.startedAt) - time.Duration(r.lastActive.Load())
	if r.idlePaused.Load() {
		elapsed = 0 // paused: look again a full interval on
	} else if elapsed >= r.plan.idle {
		r.cancel(idleCause)
		return
	}
	r.mu.Lock()
	if !r.terminal {
		r.idleTimer.Reset(r.plan.idle - elapsed)
	}
	r.mu.Unlock()
}

// emit commits a non-delta event.
func (r *Run) emit(p *payload) {
	r.mu.Lock()
	r.emitLocked(p)
	r.mu.Unlock()
}

// emitLocked commits p after any pending text. Once the run is stopping,
// only run.started (a run cancelled before it began still starts) and the
// terminal event are committed: events racing with a cancellation are
// dropped.
func (r *Run) emitLocked(p *payload) {
	if r.terminal || (r.ctx.Err() != nil && !isTerminal(p.typ) && p.typ != EventRunStarted) {
		return
	}
	r.flushPendingLocked()
	r.commitLocked(p)
}

// emitDeltaLocked adds visible text. Adjacent deltas merge into one pending
// text.delta until an event of another type, the size cap, or a reader
// asking for the next event commits it.
func (r *Run) emitDeltaLocked(text string) {
	if r.terminal || r.ctx.Err() != nil || (!r.needData && !r.logReadsData) {
		return
	}
	if r.mode == ModeStream && r.queuedText+len(text) > maxQueuedBytes {
		// The reader is too slow: the text would exceed the queue bound.
		r.cancel(overflowCause)
		return
	}
	if len(r.pending) > 0 && len(r.pending)+len(text) > maxMergedDelta {
		r.flushPendingLocked()
		if r.ctx.Err() != nil {
			return
		}
	}
	if len(r.pending) == 0 {
		r.pendingTS = time.Now()
	}
	r.pending = append(r.pending, text...)
	if r.mode != ModeStream {
		return
	}
	r.queuedText += len(text)
	if r.queuedLocked() >= maxQueuedEvents {
		r.cancel(overflowCause)
	}
	r.signal()
}

func (r *Run) flushPendingLocked() {
	if len(r.pending) == 0 {
		return
	}
	p := &payload{typ: EventTextDelta, ts: r.pendingTS, text: string(r.pending)}
	r.pending = r.pending[:0]
	r.commitLocked(p)
}

// queuedLocked counts undelivered events, the pending delta included.
func (r *Run) queuedLocked() int {
	n := len(r.q) - r.qHead
	if len(r.pending) > 0 {
		n++
	}
	return n
}

// commitLocked gives p the next sequence number, persists it (EventLog) and
// delivers it (ModeStream queue). A text.delta always comes from pending,
// whose text is already counted in queuedText.
func (r *Run) commitLocked(p *payload) {
	term := isTerminal(p.typ)
	ev := Event{Type: p.typ, Sequence: r.seq + 1, RunID: r.id, At: p.ts, text: len(p.text)}
	if r.needData {
		ev.Data = encodeEvent(r.id, ev.Sequence, p)
	}
	stream := r.mode == ModeStream
	if r.log != nil {
		if r.logCtxOf != r.ctx {
			r.logCtx, r.logCtxOf = context.WithoutCancel(r.ctx), r.ctx
		}
		if err := r.log.Append(r.logCtx, ev); err != nil {
			if !term {
				// Not persisted, so not delivered: the terminal event
				// takes this sequence number.
				r.cancel(&stopCause{err: protocol.AsPublic(err), cancelled: false})
				return
			}
			r.e.log.Warn("event log append failed for terminal event", "runId", r.id, "code", string(protocol.CodeOf(err)))
		}
	}
	r.seq = ev.Sequence
	if term {
		r.terminal = true
	}
	if !stream {
		return
	}
	r.q = append(r.q, ev)
	if p.typ != EventTextDelta {
		r.queuedBytes += len(ev.Data)
	}
	if !term && (r.queuedLocked() >= maxQueuedEvents || r.queuedBytes > maxQueuedBytes) {
		r.cancel(overflowCause)
	}
	r.signal()
}

func (r *Run) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}
