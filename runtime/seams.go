package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// The interfaces in this file are the engine's extension seams. The core
// protocol does not need them to do anything; later features plug in here
// without changing the step loop:
//
//   - RunStore / EventLog: durable jobs and idempotency replay persist each
//     event before it is delivered (wire-extensions §2.3 "event commit
//     barrier", §8 "committed before it is sent").
//   - ApprovalHook: the host-level approval callback; interactive approvals
//     (wire-extensions §4) wrap it with approval.* events.
//   - ToolExecutor: how one validated call runs. Host tools run through a
//     ToolSet; application tools (wire-extensions §5) will implement it by
//     emitting tool.execution.requested and awaiting the submitted result.

// RunInfo describes an admitted run to a RunStore.
type RunInfo struct {
	RunID     string
	Subject   string
	Provider  string
	Model     string
	StartedAt time.Time
}

// RunStore opens the event log of a run. The engine calls OpenRun once per
// admitted run, before run.started is emitted. An error refuses the run
// (Start returns it; a *protocol.Error keeps its code). Nil RunStore: events
// are not persisted.
type RunStore interface {
	OpenRun(ctx context.Context, info RunInfo) (EventLog, error)
}

// EventLog receives every committed event of one run, in sequence order,
// before the engine delivers it (queues it for Run.Next). Append is called
// with the run's internal lock held, so it must not call back into the Run.
//
// An Append error on a non-terminal event stops the run: its terminal event
// is run.failed carrying the error (a *protocol.Error keeps its code and
// outcome; anything else becomes INTERNAL_ERROR). The terminal event is
// appended too; its error is only logged.
type EventLog interface {
	Append(ctx context.Context, ev Event) error
}

// ApprovalRequest is a tool call that needs approval (Tool.RequiresApproval).
type ApprovalRequest struct {
	RunID    string
	Subject  string
	Provider string
	Call     abi.ToolCall
}

// ApprovalHook decides host-level approvals. It fails closed: false or an
// error is APPROVAL_REQUIRED, and without a hook every tool that requires
// approval fails with APPROVAL_REQUIRED.
type ApprovalHook interface {
	ApproveToolCall(ctx context.Context, req *ApprovalRequest) (bool, error)
}

// ApprovalFunc adapts a function to ApprovalHook.
type ApprovalFunc func(ctx context.Context, req *ApprovalRequest) (bool, error)

// ApproveToolCall calls f.
func (f ApprovalFunc) ApproveToolCall(ctx context.Context, req *ApprovalRequest) (bool, error) {
	return f(ctx, req)
}

// ToolExecution is one validated, approved call handed to a ToolExecutor.
type ToolExecution struct {
	RunID   string
	Subject string
	Call    abi.ToolCall // arguments are compact JSON and must not be modified
	// Progress reports real progress of the call (re-arms the idle timer;
	// throttled run.progress with phase "tool").
	Progress func()
	// Provider is the run's provider instance (the application-tools
	// endpoints check the submitter's grant for it).
	Provider string
	// Emit commits an event of the run carrying one payload field, as
	// Review.Emit (tool.execution.requested with "execution").
	Emit func(typ, field string, value json.RawMessage) bool
	// CheckOutput validates an output against the tool's declared output
	// schema (nil: none declared), for an executor that must answer the
	// submitter of an output before handing it to the engine.
	CheckOutput func(output json.RawMessage) error
}

// ToolExecutor runs one tool call and returns its output (any JSON value;
// the engine validates it and bounds it to 1,000,000 bytes). Every error is
// reported as TOOL_OUTCOME_UNCERTAIN: the call was dispatched, so effects
// may have happened. It must return promptly once ctx is done; the engine
// stops waiting at cancellation either way.
type ToolExecutor interface {
	ExecuteTool(ctx context.Context, x *ToolExecution) (json.RawMessage, error)
}

// toolSetExecutor runs host tools through their extension's ToolSet.
type toolSetExecutor struct{ set ToolSet }

func (t toolSetExecutor) ExecuteTool(ctx context.Context, x *ToolExecution) (json.RawMessage, error) {
	return t.set.Invoke(WithToolSubject(ctx, x.Subject), x.Call, x.Progress)
}

type toolSubjectKey struct{}

// WithToolSubject returns ctx carrying the subject of a tool call, as the
// engine passes it to a ToolSet (for callers outside the engine, and
// tests).
func WithToolSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, toolSubjectKey{}, subject)
}

// ToolSubject returns the subject of the run whose tool call ctx belongs
// to ("" outside one). A ToolSet that keeps per-subject state (the kv
// namespace of a tool extension) takes the subject from here, never from
// the call's arguments: the host, not the model, decides whose it is.
func ToolSubject(ctx context.Context) string {
	s, _ := ctx.Value(toolSubjectKey{}).(string)
	return s
}

// ContextInputs is the selected-context seam (wire-context.md);
// runtime/attachments implements it. Nil in Options: `attachments` and
// `outputArtifact` are unknown fields (INVALID_REQUEST, wire-core §2.3).
type ContextInputs interface {
	// Parse checks the strict schema of the run's attachments and
	// outputArtifact (INVALID_REQUEST); nil when it carries neither.
	Parse(req *protocol.RunRequest) (RunContext, error)
}

// RunContext is one run's selected context, from validation to result.
type RunContext interface {
	// Items is the number of attachments items (0 for `[]`).
	Items() int
	// Directive is the context directive appended to the instructions
	// ("" when there are no items).
	Directive() string
	// Check runs the inline preflight, the per-item resolver and modality
	// checks against the model's enabled media types, and the artifact
	// checks (wire-context §3.1 steps 4–6). Errors are *protocol.Error.
	Check(mediaTypes []string) error
	// Assemble resolves and budgets the context after run.started and
	// before the first step (wire-context §4).
	Assemble(ctx context.Context, exec ContextExec) (*ContextSet, error)
	// Artifact builds result.artifacts from the final text and validated
	// output (nil: no outputArtifact); ARTIFACT_TOO_LARGE over its bound.
	Artifact(text string, output json.RawMessage, set *ContextSet) (json.RawMessage, error)
	// Retrieval is the run's decoded `retrieval` option: nil without
	// one, and until CheckRetrieval has decoded it.
	Retrieval() EvidencePlan
	// CheckRetrieval is steps 2–3 of wire-core §3.3 for a run carrying
	// `retrieval`: RETRIEVAL_UNAVAILABLE without a retrieval service, the
	// option's schema, and attachments + limit ≤ 16 (INVALID_RETRIEVAL).
	CheckRetrieval() error
	// Reauthorize re-checks the evidence of a run about to be shown again
	// (an idempotent replay, a completed job's events) against recorded,
	// its recorded result (nil: it did not complete): references are
	// resolved again and their digests compared, retrieval evidence is
	// re-authorized without embedding. Errors are *protocol.Error.
	Reauthorize(ctx context.Context, exec ContextExec, recorded *protocol.RunResult) error
}

// ReauthorizeEvidence is the evidence step of an idempotent replay
// (wire-context §11.3: after the fingerprint, session and in-progress
// checks, before anything is replayed) and of a completed job's event
// read (§11.2, wire-extensions §2.4), for p, the credential asking now.
// runID is the recorded run's id and recorded its result (nil: the run
// did not complete). A request with neither references nor retrieval
// passes at once: inline content is the caller's own.
func (e *Engine) ReauthorizeEvidence(ctx context.Context, p *Principal, req *protocol.RunRequest, runID string, recorded *protocol.RunResult) error {
	if e.contexts == nil || !EvidenceBearing(req) {
		return nil
	}
	rc, err := e.contexts.Parse(req)
	if err != nil || rc == nil {
		return protocol.AsPublic(err)
	}
	if err := rc.CheckRetrieval(); err != nil {
		return protocol.AsPublic(err)
	}
	return rc.Reauthorize(ctx, ContextExec{RunID: runID, Subject: p.Subject, Principal: p}, recorded)
}

// EvidenceBearing reports whether req carries evidence the host resolves
// for the caller — retrieval, or a reference attachment — which a replay
// or a job's event read must re-authorize (a cheap scan; the items are
// not decoded).
func EvidenceBearing(req *protocol.RunRequest) bool {
	return len(req.Retrieval) > 0 || bytes.Contains(req.Attachments, []byte(`"reference"`))
}

// ContextExec is what context assembly knows of its run.
type ContextExec struct {
	RunID, Subject string
	// Principal is the credential the run was started with: retrieval
	// checks its corpus grant again with the evidence, and references are
	// read with its grants. Nil outside a run (tests).
	Principal *Principal
	// Touch is activity: it re-arms the run's idle timer.
	Touch func()
	// Progress reports real retrieval progress: activity, shown as
	// run.progress with phase "context" (throttled like the others). Nil:
	// Touch only.
	Progress func()
}

// PhaseContext is the run.progress phase of retrieval and context
// resolution (wire-extensions §1.4).
const PhaseContext = "context"

// Evidence is the retrieval seam (wire-extensions §6.3, DESIGN.md §8):
// runtime/retrieval implements it. The engine does not hold it itself:
// retrieved passages join the run's context list after its attachments
// and share its budgets, manifest and presentation (wire-context §4,
// §11.4), so the ContextInputs service holds it and a run's RunContext
// carries the decoded option.
type Evidence interface {
	// Plan decodes a run's `retrieval` member with the strict schema of
	// §6.3 (INVALID_RETRIEVAL); input is the run's input, the query when
	// the option names none.
	Plan(raw json.RawMessage, input string) (EvidencePlan, error)
}

// EvidencePlan is one run's decoded `retrieval` option.
type EvidencePlan interface {
	// Corpus is the corpus searched; the token needs retrieval.search
	// for it (FORBIDDEN, with the other grants).
	Corpus() string
	// Limit is the most passages the search may return (the option's
	// limit, default 8): attachments plus Limit must not exceed 16.
	Limit() int
	// Retrieve searches for exec.Principal after admission (§6.3). No
	// hit is NO_RETRIEVAL_EVIDENCE; scope failures are CONTEXT_NOT_FOUND.
	Retrieve(ctx context.Context, exec ContextExec) (*EvidenceSet, error)
	// Recheck re-authorizes a recorded RetrievalResult (result.retrieval
	// of a completed run) for p as EvidenceSet.Recheck does, for an
	// idempotent replay or a job's event read.
	Recheck(ctx context.Context, p *Principal, recorded json.RawMessage) error
}

// EvidenceSet is what a run's search found.
type EvidenceSet struct {
	// Passages are the hits in rank order.
	Passages []Passage
	// Result is the full RetrievalResult, compact JSON: result.retrieval.
	Result json.RawMessage
	// Recheck re-authorizes the evidence for p — the corpus grant, each
	// source still visible, at the same revision and document digest —
	// without embedding anything: CONTEXT_NOT_FOUND, CONTEXT_CHANGED or
	// FORBIDDEN. The engine calls it before every model step and before
	// run.completed is recorded.
	Recheck func(ctx context.Context, p *Principal) error
}

// Passage is one retrieved chunk as context: a text/plain item whose
// source is the hit's source with its id replaced by the chunk id.
type Passage struct {
	ChunkID, Revision string
	// Source is that ContextSource, compact JSON (id = ChunkID,
	// location.documentId = the application's source id).
	Source json.RawMessage
	Text   string
}

// ContextSet is a run's assembled context.
type ContextSet struct {
	// Block is appended to the final user message (wire-context §6.2).
	Block string
	// Parts are the attached files with their labels (§6.3).
	Parts []abi.Part
	// Sources is result.sources, compact JSON; nil without context.
	Sources json.RawMessage
	// SourceIDs are the ids of Sources in order.
	SourceIDs []string
	// Evidence is what the run's retrieval found (nil without the
	// option): result.retrieval and the re-authorization of its passages.
	Evidence *EvidenceSet
	// Release releases resolver leases, once; nil: none.
	Release func()
}

// Capacity is implemented by a Provider or ToolSet whose calls draw on a
// bounded resource: a wasm extension with an operator cap on its
// instances. The engine reserves one unit per admitted run for the run's
// provider and for each distinct tool set the run may call, at admission
// and before run.started, so that a full resource answers BUSY there and an
// admitted run never waits on a limit nobody named (DESIGN.md §3). The
// reservations are attached to the run's context (ReservationsFrom) and
// released when the run ends.
type Capacity interface {
	// Reserve takes one unit, or returns a *protocol.Error (BUSY when the
	// resource is full).
	Reserve() (Reservation, error)
}

// Reservation is one admitted run's unit of a Capacity.
type Reservation interface {
	// Release ends the run's claim; it is called once, when the run ends.
	// Work of the run still in flight may keep the unit until it returns.
	Release()
}

type reservationsKey struct{}

// WithReservations returns ctx carrying rs, as the engine's run context
// does (for executors outside the engine, and tests).
func WithReservations(ctx context.Context, rs ...Reservation) context.Context {
	return context.WithValue(ctx, reservationsKey{}, rs)
}

// ReservationsFrom returns the reservations the engine holds for the run
// whose context (or a context derived from it) ctx is.
func ReservationsFrom(ctx context.Context) []Reservation {
	rs, _ := ctx.Value(reservationsKey{}).([]Reservation)
	return rs
}

// reserve takes the run's reservations: its provider's and those of the
// distinct tool sets of its tools. On a refusal it releases what it took.
func (pl *plan) reserve() ([]Reservation, error) {
	var rs []Reservation
	take := func(v any) error {
		c, ok := v.(Capacity)
		if !ok {
			return nil
		}
		r, err := c.Reserve()
		if err != nil {
			return err
		}
		rs = append(rs, r)
		return nil
	}
	err := take(pl.inst.Provider)
	for i, t := range pl.tools {
		if err != nil {
			break
		}
		if slices.ContainsFunc(pl.tools[:i], func(u *hostTool) bool { return u.tool.Set == t.tool.Set }) {
			continue
		}
		err = take(t.tool.Set)
	}
	if err != nil {
		releaseAll(rs)
		return nil, protocol.AsPublic(err)
	}
	return rs, nil
}

func releaseAll(rs []Reservation) {
	for _, r := range rs {
		r.Release()
	}
}

// StartOptions are what a feature package wrapping Engine.Start adds to one
// run (DESIGN.md §8): durable jobs and idempotency persist its events
// through Log, conversation sessions hand it the adapter's continuation
// state and commit the turn in Complete. The zero value adds nothing, and
// a run started with it pays nothing for the features.
type StartOptions struct {
	// Log receives every event of the run before it is delivered, with
	// the semantics of EventLog; with Options.RunStore set as well, the
	// store's log appends first. Run IDs are known to Log from the
	// run.started event it receives first.
	Log EventLog
	// Native is the adapter's private continuation state returned by the
	// last turn of a native session; the run's first step is given it.
	Native json.RawMessage
	// Complete is called on the run's goroutine once the final step has
	// succeeded and its result is validated, before run.completed is
	// committed, with that result and the adapter's final continuation
	// state. It may add extension fields to res (RunResult.Session). An
	// error fails the run instead (a *protocol.Error keeps its code). It is
	// not called for a run that fails or is cancelled.
	Complete func(res *protocol.RunResult, native json.RawMessage) error
	// RunID, when set, is the run's id (a lowercase UUID) instead of a
	// new one: a durable job announces its runId at submission, before
	// the run exists. The caller guarantees it is unique.
	RunID string
	// Queue lets the run wait in the admission queue (when the host has
	// one) instead of being refused BUSY. Foreground runs set it; durable
	// jobs leave it unset, so a job never waits in the queue and stays
	// queued in its own store instead (wire-extensions §11.1 trySubmit).
	// A queued run commits run.started at once and starts its first step,
	// and its idle clock, only once admitted.
	Queue bool
}

// applyOptions attaches opts to a newly admitted run.
func (r *Run) applyOptions(opts *StartOptions) {
	if opts.Log != nil {
		r.log = JoinLogs(r.log, opts.Log)
		if readsData(opts.Log) {
			r.needData = true // a log stores the encoded events
		}
	}
	r.logReadsData = r.log != nil && readsData(r.log)
	r.native = opts.Native
	r.onComplete = opts.Complete
}

// TypesOnly marks an EventLog that reads only an event's Type, Sequence
// and RunID, never its Data — telemetry's, which turns events into spans.
// Such a log does not make the engine encode the events of a JSON-mode run:
// encoding every event of a run nobody streams cost more than the spans.
// Nor is it sent a JSON-mode run's text.delta events, which carry nothing
// but text: gathering and committing them only for such a log cost a
// traced run three allocations and an append (its sequence numbers then
// count the events it is sent).
type TypesOnly interface {
	EventLog
	TypesOnly()
}

// readsData reports whether l, or any log it joins, reads Event.Data.
func readsData(l EventLog) bool {
	switch l := l.(type) {
	case TypesOnly:
		return false
	case teeLog:
		return slices.ContainsFunc(l, readsData)
	}
	return true
}

// JoinLogs returns an EventLog that appends to each non-nil log in order;
// the first error stops the append and is returned (so a later log never
// sees an event an earlier one refused). Nil when all are nil.
func JoinLogs(logs ...EventLog) EventLog {
	// One log (a run with no other) is returned as it is, without
	// building a teeLog for it: every traced run joins one.
	var one EventLog
	n := 0
	for _, l := range logs {
		if l != nil {
			one = l
			n++
		}
	}
	if n <= 1 {
		return one
	}
	out := make(teeLog, 0, n)
	for _, l := range logs {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

type teeLog []EventLog

func (t teeLog) Append(ctx context.Context, ev Event) error {
	for _, l := range t {
		if err := l.Append(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// Stage tells each log of t that is a StageLog.
func (t teeLog) Stage(s Stage, start, end time.Time, ok bool) {
	for _, l := range t {
		if sl, isStage := l.(StageLog); isStage {
			sl.Stage(s, start, end, ok)
		}
	}
}

// Stage is a part of a run before its first step that no event of the
// wire marks: its wait for admission, its selected context's resolution.
type Stage uint8

const (
	// StageQueue is a queued run's wait for admission, from its
	// run.started until it was admitted (or stopped waiting). A run
	// admitted at once has none.
	StageQueue Stage = iota + 1
	// StageContext is the resolution of a run's selected context
	// (attachments, references, retrieval: wire-context §4), after
	// admission and before the first step.started. A run without
	// context has none.
	StageContext
)

// StageLog is an EventLog that is also told of a run's Stages, each once
// and when it is over, on the run's goroutine, before the events that
// follow it — telemetry's, whose queue and context spans (wire-extensions
// §11.2) are these stages. Other logs (a job's, a stream's) never see
// them: they are not events, and nothing of them is persisted or sent.
type StageLog interface {
	EventLog
	// Stage reports that stage s lasted from start to end; ok is false
	// when it ended the run instead (a cancelled wait, a context that
	// failed to resolve).
	Stage(s Stage, start, end time.Time, ok bool)
}

// stage reports a Stage to r's log, when it is a StageLog.
func (r *Run) stage(s Stage, start time.Time, ok bool) {
	if sl, isStage := r.log.(StageLog); isStage {
		sl.Stage(s, start, time.Now(), ok)
	}
}

// Native returns the continuation state the adapter returned with the
// run's last completed step (nil when it returned none). It is private to
// the host: never put it in an event, a result or a log line. Valid once
// Done is closed.
func (r *Run) Native() json.RawMessage {
	<-r.done
	return r.finalNative
}

// AdmissionPolicy is what a Scheduler enforces (wire-extensions §11.1): the
// global and per-subject caps, the optional per-account cap shared by the
// provider instances bound to one account, overrides that replace the
// subject or account default (the global cap always holds), and the
// optional bounded waiting queue.
type AdmissionPolicy struct {
	MaxConcurrent, MaxPerSubject int
	// MaxPerAccount caps the runs of one account; 0: none.
	MaxPerAccount int
	// Subjects and Accounts map a subject or account id to its cap,
	// replacing MaxPerSubject or MaxPerAccount for it.
	Subjects, Accounts map[string]int
	// QueueTotal and QueuePerSubject bound the waiting runs; QueueTotal 0:
	// no queue, a full host is BUSY.
	QueueTotal, QueuePerSubject int
}

// Scheduler admits runs into execution slots; runtime/scheduling
// implements it with a fair queue. Without one (Options.Scheduler nil) the
// engine counts slots itself and has no queue, account caps or overrides.
// A Scheduler must not call back into the engine.
type Scheduler interface {
	// SetPolicy replaces the limits (a configuration reload). Runs
	// holding slots keep them; waiting runs are admitted as the new
	// limits allow.
	SetPolicy(AdmissionPolicy)
	// Admit asks for a slot for a run of subject on account ("" when the
	// provider instance names none). A free slot is held at once; with
	// queue set and a queue configured a run that cannot start waits
	// (Slot.Admitted); otherwise BUSY, or QUEUE_FULL when the queue is
	// full, as a *protocol.Error.
	Admit(subject, account string, queue bool) (Slot, error)
	// Admissible answers as Admit would, taking nothing.
	Admissible(subject, account string, queue bool) error
	// Stats is a snapshot for status pages and metrics.
	Stats() SchedulerStats
}

// Slot is one run's place: waiting, then admitted.
type Slot interface {
	// Admitted is closed once the slot is held.
	Admitted() <-chan struct{}
	// Release gives the slot back, or leaves the queue if it is still
	// waiting. It is called exactly once.
	Release()
}

// SchedulerStats is a snapshot of a Scheduler.
type SchedulerStats struct {
	// Running counts held slots, Queued waiting runs, Subjects the
	// subjects holding a slot.
	Running, Queued, Subjects int
}

// Budget is one resource policy's per-run limits (wire-extensions §11.1).
// They are observed from the usage providers report, not billing
// guarantees: a provider that reports too little is not stopped.
type Budget struct {
	// MaxTokens bounds reported input + output tokens over all steps;
	// 0: none.
	MaxTokens int64
	// MaxCostUSD bounds reported costUsd over all steps; 0: none.
	MaxCostUSD float64
	// RejectUnknown stops the run (RESOURCE_USAGE_UNKNOWN) at the first
	// response after which a limited total cannot be established; unset,
	// such a total is checked over what was reported.
	RejectUnknown bool
}

// BudgetPolicy gives the budgets a run of subject on account ("" when the
// provider instance names none) must stay within, all of them at once; it
// is asked once per run, at acceptance. Options.Budgets nil: no budgets.
type BudgetPolicy interface {
	Budgets(subject, account string) []Budget
}

// checkBudgets runs after each model response, before its tools or the
// next step: RESOURCE_LIMIT once a total is over a budget,
// RESOURCE_USAGE_UNKNOWN when a budget rejects a total that some response
// did not report.
func (r *Run) checkBudgets() error {
	a := &r.acct
	known := func(i int) bool { return a.reported[i] == a.completed && !a.overflow[i] }
	tokens := a.ints[fInput] + a.ints[fOutput]
	tokensKnown := known(fInput) && known(fOutput)
	cost, costKnown := a.floats[0], known(fCost)
	for _, b := range r.budgets {
		if b.MaxTokens > 0 {
			if b.RejectUnknown && !tokensKnown {
				return protocol.New(protocol.CodeResourceUsageUnknown)
			}
			if tokens > b.MaxTokens || a.overflow[fInput] || a.overflow[fOutput] {
				return protocol.New(protocol.CodeResourceLimit)
			}
		}
		if b.MaxCostUSD > 0 {
			if b.RejectUnknown && !costKnown {
				return protocol.New(protocol.CodeResourceUsageUnknown)
			}
			if cost > b.MaxCostUSD || a.overflow[fCost] {
				return protocol.New(protocol.CodeResourceLimit)
			}
		}
	}
	return nil
}

// ApprovalPolicy is a run's decoded `approvals` option (wire-extensions
// §4.1).
type ApprovalPolicy struct {
	// IdlePause is idlePolicy "pause": the run's idle clock stops while a
	// decision is awaited and restarts in full once it settles.
	IdlePause bool
	// ExpiresAfter is expiresAfterMs; 0: the request never expires.
	ExpiresAfter time.Duration
}

// ReviewOutcome is how an interactive review ended.
type ReviewOutcome int

const (
	// ReviewApproved: run the reviewed call once.
	ReviewApproved ReviewOutcome = iota + 1
	// ReviewDenied: the run fails with APPROVAL_DENIED.
	ReviewDenied
	// ReviewCancelled: the reviewer cancelled the run (run.cancelled
	// CANCELLED).
	ReviewCancelled
	// ReviewExpired: the run fails with APPROVAL_EXPIRED.
	ReviewExpired
)

// Review is one gated call awaiting an interactive decision.
type Review struct {
	RunID, Subject, Provider string
	Call                     abi.ToolCall // a copy; arguments are compact JSON
	Policy                   ApprovalPolicy
	// Emit commits an event of the run carrying one payload field (raw
	// compact JSON): approval.requested with "approval", approval.resolved
	// with "resolution". It reports false when the run is stopping and the
	// event was dropped.
	Emit func(typ, field string, value json.RawMessage) bool
}

// Reviewer is the interactive-approvals seam (wire-extensions §4);
// runtime/approvals implements it. Nil in Options: a run carrying
// `approvals` is APPROVAL_UNAVAILABLE.
type Reviewer interface {
	// Policy decodes a run's `approvals` object: INVALID_REQUEST when it
	// does not match the schema, APPROVAL_POLICY for a pause the host
	// forbids (both *protocol.Error).
	Policy(raw json.RawMessage) (*ApprovalPolicy, error)
	// Review registers the pending approval, emits approval.requested,
	// waits for the decision, expiry or ctx, and emits approval.resolved.
	// It is called only after the host ApprovalHook (if any) allowed the
	// call. An error (a *protocol.Error: APPROVAL_CAPACITY,
	// APPROVAL_AUDIT_FAILED; or ctx's) fails the run and the tool does not
	// run: only ReviewApproved with a nil error lets it run.
	Review(ctx context.Context, rv *Review) (ReviewOutcome, error)
}

// ApplicationTool is one decoded applicationTools definition
// (wire-extensions §5.1).
type ApplicationTool struct {
	Def abi.ToolDef // name, description, input and output schema
	// RequiresApproval is the definition's own flag.
	RequiresApproval bool
	// Size is the definition's JSON size in bytes (TOOL_DEFINITION_LIMIT
	// above 128,000).
	Size int
}

// ApplicationTools is the application-tools seam (wire-extensions §5);
// runtime/apptools implements it. Nil in Options: a run carrying
// `applicationTools` is APPLICATION_TOOLS_UNAVAILABLE. Its ExecuteTool
// runs one call of an application tool: it must emit
// tool.execution.requested (ToolExecution.Emit) only once the ticket can be
// answered, and wait for the submitted result.
type ApplicationTools interface {
	// Definitions decodes a run's applicationTools array; a schema
	// failure is INVALID_REQUEST. The engine checks the rest in the order
	// of wire-core §3.3 (conflicts, selection, size, schemas).
	Definitions(raw json.RawMessage) ([]ApplicationTool, error)
	// RequireApproval is the host default of the review requirement
	// (wire-extensions §5.2); a definition or grant can only add review.
	RequireApproval() bool
	ToolExecutor
}

// NotDispatched marks an executor's error raised before the call reached
// anyone who could act on it (TOOL_EXECUTOR_CAPACITY): the run fails with
// err's own code and a certain outcome, instead of
// TOOL_OUTCOME_UNCERTAIN.
func NotDispatched(err *protocol.Error) error { return notDispatched{err} }

type notDispatched struct{ err *protocol.Error }

func (n notDispatched) Error() string { return n.err.Error() }
func (n notDispatched) Unwrap() error { return n.err }

// NewID returns a random version 4 UUID in lowercase, as run ids are.
// Features hand out their ids (approvals, tool executions) from it: an
// unguessable id is no way into another subject's run.
func NewID() string { return newUUID() }
