package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// loop is the step loop of wire-core §12. It returns the result of the
// final step or the error that ends the run; finish turns either into the
// terminal event (a cancellation cause set meanwhile wins).
func (r *Run) loop() (*protocol.RunResult, error) {
	pl := r.plan
	msgs := make([]abi.Message, 0, len(r.req.History)+1)
	for _, h := range r.req.History {
		msgs = append(msgs, abi.Message{Role: h.Role, Content: h.Content})
	}
	msgs = append(msgs, abi.Message{Role: abi.RoleUser, Content: r.req.Input})
	if rc := pl.context; rc != nil && (rc.Items() > 0 || rc.Retrieval() != nil) {
		// The selected context, after run.started and admission and
		// before the first step (wire-context §4), retrieval's search
		// first; the augmented user turn stays in msgs, so its files are
		// re-sent on every step.
		began := time.Now()
		set, err := rc.Assemble(r.ctx, ContextExec{RunID: r.id, Subject: r.subject, Principal: r.principal,
			Touch: r.touch, Progress: r.contextProgress()})
		r.stage(StageContext, began, err == nil)
		if err != nil {
			return nil, err
		}
		pl.contextSet = set
		if set.Release != nil {
			defer set.Release()
		}
		last := &msgs[len(msgs)-1]
		last.Content += set.Block
		last.Parts = set.Parts
	}
	// native is the adapter's private continuation state, handed from one
	// turn to the next and never shown in an event or the result.
	// A native session's turn starts from the state of its last turn.
	native := r.native

	for step := 1; ; step++ {
		if err := r.ctx.Err(); err != nil {
			return nil, context.Cause(r.ctx)
		}
		if err := r.recheckEvidence(); err != nil {
			return nil, err
		}
		r.acct.started++
		r.emit(&payload{typ: EventStepStarted, ts: time.Now(), step: step})
		r.touch()
		in := &abi.CompleteInput{
			Model:           r.req.Model,
			Instructions:    pl.instructions,
			Messages:        msgs[:len(msgs):len(msgs)], // later appends never touch what the provider saw
			Tools:           pl.toolDefs,
			MaxOutputTokens: pl.maxOutputTokens,
			OutputSchema:    r.req.OutputSchema,
			Native:          native,
			Step:            step,
			// Nobody reads deltas of a JSON run; without an idle timeout
			// they are not progress either.
			Buffered: r.mode == ModeJSON && pl.idle == 0,
		}
		out, t, err := r.callWithRetries(in)
		if err != nil {
			return nil, err
		}
		native = out.Native
		r.finalNative = native
		r.acct.completed++
		u := out.Usage
		if u == nil {
			u = t.usage
		}
		if u != nil {
			nu := normalizeUsage(u)
			r.acct.add(&nu)
			r.emit(&payload{typ: EventUsageReported, ts: time.Now(), step: step, usage: &nu})
		}
		if t.streamedLen == 0 && out.Text != "" {
			// The adapter did not stream: the whole step text, once.
			r.mu.Lock()
			r.emitDeltaLocked(out.Text)
			r.flushPendingLocked()
			r.mu.Unlock()
		}
		r.touch() // provider turn completion is progress
		if len(r.budgets) > 0 {
			if err := r.checkBudgets(); err != nil {
				return nil, err
			}
		}

		if len(out.ToolCalls) == 0 {
			return r.complete(step, out)
		}
		if step >= pl.maxSteps {
			return nil, protocol.New(protocol.CodeStepLimit)
		}
		if len(out.ToolCalls) > maxToolCallsPerStep {
			return nil, protocol.New(protocol.CodeToolLimit)
		}
		calls, err := r.validateCalls(out.ToolCalls)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, abi.Message{Role: abi.RoleAssistant, Content: out.Text, ToolCalls: calls})
		for _, c := range calls {
			output, err := r.runTool(c)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, abi.Message{Role: abi.RoleTool, Content: string(output), ToolCallID: c.ID, Name: c.Name})
		}
	}
}

// complete builds the result of the final step, validating structured
// output (wire-core §9).
func (r *Run) complete(step int, out *abi.CompleteOutput) (*protocol.RunResult, error) {
	res := &protocol.RunResult{
		RunID:        r.id,
		Provider:     r.req.Provider,
		Model:        r.req.Model,
		Text:         out.Text,
		Usage:        r.acct.totals(),
		Steps:        step,
		FinishReason: out.FinishReason,
	}
	if res.FinishReason == "" {
		res.FinishReason = "stop"
	}
	if r.plan.output != nil {
		v, err := compactJSON([]byte(out.Text))
		if err != nil {
			return nil, protocol.Wrap(protocol.CodeInvalidOutput, err)
		}
		if err := r.plan.output.ValidateJSON(v); err != nil {
			return nil, protocol.Wrap(protocol.CodeInvalidOutput, err)
		}
		res.Output = v
	}
	if rc := r.plan.context; rc != nil {
		// After output validation, immediately before run.completed
		// (wire-context §9): the evidence is re-authorized first, and the
		// artifact built after it.
		if err := r.recheckEvidence(); err != nil {
			return nil, err
		}
		if set := r.plan.contextSet; set != nil {
			res.Sources = set.Sources
			if set.Evidence != nil {
				res.Retrieval = set.Evidence.Result
			}
		}
		art, err := rc.Artifact(res.Text, res.Output, r.plan.contextSet)
		if err != nil {
			return nil, err
		}
		res.Artifacts = art
	}
	// run.completed carries the text, and the parsed output beside it:
	// keep the event (and the JSON body) within what clients accept.
	if 256+len(res.RunID)+len(res.Provider)+len(res.Model)+jsonStringLen(res.Text)+len(res.Output)+len(res.Sources)+len(res.Artifacts)+len(res.Retrieval) > maxEventBytes {
		return nil, protocol.New(protocol.CodeResponseTooLarge)
	}
	if r.onComplete != nil {
		if err := r.onComplete(res, out.Native); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// turnSink is the TurnSink of one provider turn. Its state is guarded by
// the run's mutex, which also orders its events with the step's own: once
// the engine stops waiting for the turn (closed), late callbacks are
// dropped.
type turnSink struct {
	r         *Run
	canStream bool
	abort     context.CancelCauseFunc

	closed       bool
	violation    string
	streamedLen  int
	streamed     maphash.Hash // of the streamed text, compared with the final text
	progressed   bool
	lastProgress time.Time
	usage        *abi.Usage
}

func (t *turnSink) Text(delta string) {
	if delta == "" {
		return // not visible, not progress
	}
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed {
		return
	}
	if !t.canStream {
		t.violateLocked("text streamed without the textStreaming capability")
		return
	}
	t.streamedLen += len(delta)
	if t.streamedLen > maxProviderResult {
		t.violateLocked("streamed text exceeds 2,000,000 bytes")
		return
	}
	t.streamed.WriteString(delta)
	r.touch()
	r.emitDeltaLocked(delta)
}

func (t *turnSink) Progress() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed {
		return
	}
	now := time.Now()
	if t.progressed && now.Sub(t.lastProgress) < progressInterval {
		return // throttled away: not activity either (see touch)
	}
	t.progressed, t.lastProgress = true, now
	r.touch()
	r.emitLocked(&payload{typ: EventRunProgress, ts: now, phase: PhaseModel})
}

func (t *turnSink) Usage(u abi.Usage) {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !t.closed {
		t.usage = &u
	}
}

func (t *turnSink) violateLocked(reason string) {
	t.closed = true
	t.violation = reason
	t.abort(errInvalidTurn)
}

var errInvalidTurn = errors.New("runtime: provider broke the streaming contract")

// callProvider runs one model turn on the run goroutine. The engine must
// stop waiting at cancellation even if the provider ignores its context
// (wire-core §13): when the turn's context ends while the provider still
// runs, a goroutine started by context.AfterFunc takes the run over — it
// ends the run exactly as this goroutine would have (terminal event, slot,
// usage) — and the run goroutine, once the provider returns, only accounts
// for the call and exits (errTakenOver). Calling the provider directly
// instead of on a goroutine of its own saves a goroutine, its stack growth
// and a channel hand-off on every turn.
func (r *Run) callProvider(in *abi.CompleteInput) (*abi.CompleteOutput, *turnSink, error) {
	inst := r.plan.inst
	tctx, abort := context.WithCancelCause(r.ctx)
	defer abort(nil)
	t := &turnSink{r: r, canStream: inst.Capabilities["textStreaming"], abort: abort}
	r.e.calls.Add(1)
	defer r.e.calls.Done()
	stop := context.AfterFunc(tctx, func() {
		stopped, err := r.endTurn(t)
		if !stopped {
			// Only reachable when the provider ended the run goroutine
			// (runtime.Goexit): abort(nil) ran without stop.
			err = errPanic
		}
		r.end(nil, err)
	})
	out, err := completeTurn(tctx, inst.Provider, in, t)
	if !stop() {
		// The turn's context ended first and the run was taken over.
		return nil, t, errTakenOver
	}
	if stopped, err := r.endTurn(t); stopped {
		return nil, t, err
	}
	if err != nil {
		return nil, t, err
	}
	if err := r.checkTurn(out, t); err != nil {
		return nil, t, err
	}
	return out, t, nil
}

// completeTurn calls the provider; a panic is errPanic.
func completeTurn(ctx context.Context, p Provider, in *abi.CompleteInput, t *turnSink) (out *abi.CompleteOutput, err error) {
	defer func() {
		if recover() != nil {
			out, err = nil, errPanic
		}
	}()
	return p.Complete(ctx, in, t)
}

// endTurn closes t: later callbacks are dropped. stopped reports that the
// turn ended the run — cancelled, or a streaming violation — and err why.
func (r *Run) endTurn(t *turnSink) (stopped bool, err error) {
	r.mu.Lock()
	t.closed = true
	violation := t.violation
	r.mu.Unlock()
	if r.ctx.Err() != nil {
		return true, context.Cause(r.ctx)
	}
	if violation != "" {
		return true, invalidResult(violation)
	}
	return false, nil
}

// errTakenOver tells the run goroutine that another goroutine has ended the
// run while the provider ignored its cancelled context.
var errTakenOver = errors.New("runtime: run taken over after cancellation")

// Retry defaults (wire-core §15.4).
const (
	defaultRetryBase = 500 * time.Millisecond
	defaultRetryMax  = 30 * time.Second
)

// callWithRetries is callProvider with the request's opt-in retries
// (wire-core §15.4; validation admitted maxAttempts > 1 only for adapters
// with safeRetries). Only RATE_LIMITED before anything was streamed is
// retried, with the same input; the delay doubles from baseDelayMs and
// retrying stops when the next wait would exceed maxDelayMs. Waiting is not
// progress: the idle timer keeps running.
func (r *Run) callWithRetries(in *abi.CompleteInput) (*abi.CompleteOutput, *turnSink, error) {
	attempts, delay, maxDelay := 1, defaultRetryBase, defaultRetryMax
	if rt := r.req.Retry; rt != nil {
		attempts = rt.MaxAttempts
		if rt.BaseDelayMs != nil {
			delay = time.Duration(*rt.BaseDelayMs) * time.Millisecond
		}
		if rt.MaxDelayMs != nil {
			maxDelay = time.Duration(*rt.MaxDelayMs) * time.Millisecond
		}
	}
	for attempt := 1; ; attempt++ {
		out, t, err := r.callProvider(in)
		if err == nil || err == errTakenOver || attempt >= attempts || r.ctx.Err() != nil ||
			protocol.CodeOf(err) != protocol.CodeRateLimited || t.streamedLen > 0 || t.progressed {
			return out, t, err
		}
		// The upstream's Retry-After is a minimum; a wait past maxDelay
		// ends the retries.
		wait := delay
		if pe, ok := err.(*protocol.Error); ok && pe.RetryAfter > wait {
			wait = pe.RetryAfter
		}
		if wait > maxDelay {
			return out, t, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-r.ctx.Done():
			timer.Stop()
			return nil, t, context.Cause(r.ctx)
		}
		delay *= 2
	}
}

var errPanic = errors.New("runtime: provider or tool panicked")

func invalidResult(reason string) error {
	return protocol.Wrap(protocol.CodeInvalidProviderResult, errors.New(reason))
}

// checkTurn enforces the adapter obligations of wire-extensions §10.3.
func (r *Run) checkTurn(out *abi.CompleteOutput, t *turnSink) error {
	switch {
	case out == nil:
		return invalidResult("no output")
	case out.FinishReason != "" && out.FinishReason != "stop" && out.FinishReason != "length":
		return invalidResult("unknown finishReason")
	case len(out.ToolCalls) > 0 && !r.plan.inst.Capabilities["tools"]:
		return invalidResult("tool calls without the tools capability")
	case turnSize(out) > maxProviderResult:
		return invalidResult("result exceeds 2,000,000 bytes")
	case len(out.Native) > 0 && !json.Valid(out.Native):
		return invalidResult("native state is not JSON")
	}
	if t.streamedLen > 0 {
		var h maphash.Hash
		h.SetSeed(t.streamed.Seed())
		h.WriteString(out.Text)
		if len(out.Text) != t.streamedLen || h.Sum64() != t.streamed.Sum64() {
			return invalidResult("streamed text differs from the final text")
		}
	}
	return nil
}

// turnSize is the size of out encoded as JSON (close upper bound).
func turnSize(out *abi.CompleteOutput) int {
	n := 64 + jsonStringLen(out.Text) + len(out.Native) + len(out.FinishReason)
	for _, c := range out.ToolCalls {
		n += 40 + jsonStringLen(c.ID) + jsonStringLen(c.Name) + len(c.Arguments)
	}
	if out.Usage != nil {
		n += 256
	}
	return n
}

// validateCalls validates a whole batch before any call runs
// (wire-core §12.1): any failure aborts the run with zero tool effects.
func (r *Run) validateCalls(calls []abi.ToolCall) ([]abi.ToolCall, error) {
	if r.callIDs == nil {
		r.callIDs = make(map[string]bool, len(calls))
	}
	batch := make(map[string]bool, len(calls))
	valid := make([]abi.ToolCall, len(calls))
	for i, c := range calls {
		ht := r.plan.toolByName[c.Name]
		if ht == nil {
			return nil, protocol.New(protocol.CodeToolNotAllowed)
		}
		if c.ID == "" || utf16Len(c.ID) > maxToolCallIDLen || r.callIDs[c.ID] || batch[c.ID] {
			return nil, protocol.New(protocol.CodeInvalidToolCall)
		}
		batch[c.ID] = true
		args, err := compactJSON(c.Arguments)
		if err != nil || len(args) == 0 || args[0] != '{' {
			return nil, protocol.New(protocol.CodeInvalidToolArguments)
		}
		if err := ht.schema.ValidateJSON(args); err != nil {
			return nil, protocol.Wrap(protocol.CodeInvalidToolArguments, err)
		}
		valid[i] = abi.ToolCall{ID: c.ID, Name: c.Name, Arguments: args}
	}
	for id := range batch {
		r.callIDs[id] = true
	}
	return valid, nil
}

// toolOp is one dispatched tool call; closed (under the run's mutex) once
// the engine stops waiting for it.
type toolOp struct {
	r            *Run
	closed       bool
	progressed   bool
	lastProgress time.Time
}

func (o *toolOp) progress() {
	r := o.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if o.closed {
		return
	}
	now := time.Now()
	if o.progressed && now.Sub(o.lastProgress) < progressInterval {
		return // throttled away: not activity either (see touch)
	}
	o.progressed, o.lastProgress = true, now
	r.touch()
	r.emitLocked(&payload{typ: EventRunProgress, ts: now, phase: PhaseTool})
}

type toolResult struct {
	out json.RawMessage
	err error
}

// runTool runs one validated call (wire-core §12.2) and returns its compact
// output.
func (r *Run) runTool(c abi.ToolCall) (json.RawMessage, error) {
	ht := r.plan.toolByName[c.Name]
	r.emit(&payload{typ: EventToolCalled, ts: time.Now(), call: &c})
	if ht.tool.RequiresApproval {
		if err := r.review(c); err != nil {
			return nil, err
		}
	}
	if r.ctx.Err() != nil {
		return nil, context.Cause(r.ctx)
	}

	r.toolPending = true // dispatched: from here on the outcome is uncertain
	op := &toolOp{r: r}
	// The executor gets its own copy: the recorded call stays immutable
	// whatever the tool does with its arguments.
	xc := abi.ToolCall{ID: c.ID, Name: c.Name, Arguments: append(json.RawMessage(nil), c.Arguments...)}
	x := &ToolExecution{RunID: r.id, Subject: r.subject, Call: xc, Progress: op.progress, Provider: r.req.Provider, Emit: r.emitExt}
	if ht.output != nil {
		x.CheckOutput = func(out json.RawMessage) error { return ht.output.ValidateJSON(out) }
	}
	ch := make(chan toolResult, 1)
	r.e.calls.Add(1)
	go func() {
		defer r.e.calls.Done()
		res := toolResult{err: errPanic}
		defer func() {
			if recover() != nil {
				res = toolResult{err: errPanic}
			}
			ch <- res
		}()
		out, err := ht.exec.ExecuteTool(r.ctx, x)
		res = toolResult{out: out, err: err}
	}()
	var res toolResult
	select {
	case res = <-ch:
	case <-r.ctx.Done():
	}
	r.mu.Lock()
	op.closed = true
	r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil, context.Cause(r.ctx)
	}
	if res.err != nil {
		var nd notDispatched
		if errors.As(res.err, &nd) {
			r.toolPending = false // refused before anyone could act on it
			return nil, nd.err
		}
		return nil, uncertain(res.err)
	}
	out, err := compactJSON(res.out)
	if err != nil {
		return nil, uncertain(err)
	}
	if len(out) > maxToolOutputBytes {
		return nil, uncertain(fmt.Errorf("tool output of %d bytes exceeds %d", len(out), maxToolOutputBytes))
	}
	if ht.output != nil {
		// An output the tool's declared schema refuses is no confirmed
		// output: the call may have acted, so the outcome is uncertain.
		if err := ht.output.ValidateJSON(out); err != nil {
			return nil, uncertain(err)
		}
	}
	r.toolPending = false
	r.emit(&payload{typ: EventToolCompleted, ts: time.Now(), callID: c.ID, output: out})
	r.touch()
	return out, nil
}

// uncertain is the error of a dispatched tool that did not confirm a valid
// output (wire-core §12.3).
func uncertain(cause error) *protocol.Error {
	pe := protocol.Wrap(protocol.CodeToolOutcomeUncertain, cause)
	pe.Uncertain, pe.Retryable = true, false
	return pe
}

// review gates a call that requires approval (wire-core §12.2 step 2,
// wire-extensions §4.1), failing closed: the host hook, when there is one,
// must allow it first; then a run with an interactive policy waits for a
// decision. Without either, APPROVAL_REQUIRED. Only a nil return lets the
// tool run.
func (r *Run) review(c abi.ToolCall) error {
	if r.e.approval != nil && !r.approve(c) {
		return protocol.New(protocol.CodeApprovalRequired)
	}
	pol := r.plan.approvals
	if pol == nil || r.e.reviewer == nil {
		if r.e.approval != nil {
			return nil // the host hook allowed it, and nobody else is asked
		}
		return protocol.New(protocol.CodeApprovalRequired)
	}
	if pol.IdlePause {
		r.idlePaused.Store(true)
		defer func() {
			// The full interval restarts once the decision settles.
			r.touch()
			r.idlePaused.Store(false)
		}()
	}
	c.Arguments = append(json.RawMessage(nil), c.Arguments...)
	out, err := r.e.reviewer.Review(r.ctx, &Review{
		RunID: r.id, Subject: r.subject, Provider: r.req.Provider, Call: c, Policy: *pol, Emit: r.emitExt,
	})
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx) // a cancellation wins over the review's outcome
	}
	if err != nil {
		return protocol.AsPublic(err)
	}
	switch out {
	case ReviewApproved:
		return nil
	case ReviewDenied:
		return protocol.New(protocol.CodeApprovalDenied)
	case ReviewExpired:
		return protocol.New(protocol.CodeApprovalExpired)
	case ReviewCancelled:
		r.Cancel(nil) // run.cancelled CANCELLED
		return context.Cause(r.ctx)
	}
	return protocol.New(protocol.CodeApprovalRequired)
}

// emitExt commits an extension event carrying one payload field of
// compact JSON; false when the run is stopping and it was dropped.
func (r *Run) emitExt(typ, field string, value json.RawMessage) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.seq
	r.emitLocked(&payload{typ: typ, ts: time.Now(), extField: field, ext: value})
	return r.seq > before
}

// approve asks the host approval hook; no hook, false or an error deny.
func (r *Run) approve(c abi.ToolCall) bool {
	if r.e.approval == nil {
		return false
	}
	c.Arguments = append(json.RawMessage(nil), c.Arguments...)
	ok, err := r.e.approval.ApproveToolCall(r.ctx, &ApprovalRequest{
		RunID: r.id, Subject: r.subject, Provider: r.req.Provider, Call: c,
	})
	return err == nil && ok
}

// utf16Len is the JavaScript length of s.
func utf16Len(s string) int {
	n := 0
	for _, c := range s {
		if c >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// recheckEvidence re-authorizes the run's retrieval evidence (its corpus
// grant, each source's visibility, revision and digest) before a model
// step and before run.completed (wire-extensions §6.3). Runs without
// retrieval pay one nil check.
func (r *Run) recheckEvidence() error {
	set := r.plan.contextSet
	if set == nil || set.Evidence == nil || set.Evidence.Recheck == nil {
		return nil
	}
	if err := set.Evidence.Recheck(r.ctx, r.principal); err != nil {
		if r.ctx.Err() != nil {
			return context.Cause(r.ctx)
		}
		return protocol.AsPublic(err)
	}
	return nil
}

// contextProgress is the Progress of context assembly: run.progress with
// phase "context", throttled to one a second like a tool's (a report
// inside the interval is neither shown nor activity).
func (r *Run) contextProgress() func() {
	var last time.Time
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		now := time.Now()
		if !last.IsZero() && now.Sub(last) < progressInterval {
			return
		}
		last = now
		r.touch()
		r.emitLocked(&payload{typ: EventRunProgress, ts: now, phase: PhaseContext})
	}
}
