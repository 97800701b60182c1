package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"adhost/runtime/protocol"
)

// Protocol defaults and maxima (wire-core §8.1).
const (
	DefaultMaxSteps        = 8
	MaxSteps               = 64
	DefaultMaxOutputTokens = 4096
	MaxOutputTokens        = 65536
	DefaultMaxConcurrent   = 32
	DefaultMaxPerSubject   = 4
	// MaxConcurrentLimit bounds the concurrent runs an operator may
	// configure. Each running run can hold a goroutine, an extension
	// instance (several MiB) and an upstream connection; 10,000 is far
	// above what one host serves and keeps a typo from promising more.
	MaxConcurrentLimit = 10000

	maxToolCallsPerStep = 32
	maxToolOutputBytes  = 1_000_000
	maxProviderResult   = 2_000_000 // bytes of JSON of one turn, streamed text included
	maxToolCallIDLen    = 256

	// maxEventBytes bounds one event's JSON so that its SSE frame lines
	// stay within the 2,000,000 bytes clients accept (wire-core §5.6).
	maxEventBytes = 2_000_000 - 64

	maxQueuedEvents = 1024
	maxQueuedBytes  = 2_000_000
	maxMergedDelta  = 64 << 10 // merged text.delta stays far below the 2 MB frame bound

	progressInterval = time.Second
	usageSinkTimeout = 2 * time.Second
)

// Limits are the host's run limits (host.toml [limits]). They only lower the
// protocol maxima; zero means "no host limit".
type Limits struct {
	MaxSteps        int
	MaxOutputTokens int
	// IdleTimeout is the host inactivity policy; 0 = none. The effective
	// interval of a run is the smaller positive value of this and the
	// request's idleTimeoutMs (wire-core §13).
	IdleTimeout time.Duration
}

// UsageSink receives one prompt-free usage record per executed run. Calls
// are bounded to 2 s; an error or a timeout is logged and never changes the
// run's outcome.
type UsageSink interface {
	RecordUsage(ctx context.Context, rec *UsageRecord) error
}

// Options configure an Engine. Zero values are documented per field.
type Options struct {
	// Providers are the configured instances, in host configuration order.
	Providers []*ProviderInstance
	// Tools are the host tools. Their input schemas are compiled by New.
	Tools  []*Tool
	Limits Limits
	// MaxConcurrent and MaxPerSubject bound running runs (wire-core §8.2).
	// Zero means the defaults 32 and 4. Any other value is honoured as
	// given: MaxConcurrent in 1..MaxConcurrentLimit, MaxPerSubject in
	// 1..MaxConcurrent; New refuses a value out of range rather than
	// changing it.
	MaxConcurrent, MaxPerSubject int
	// MaxPerAccount, SubjectLimits, AccountLimits, QueueTotal and
	// QueueSubject (the per-subject queue bound) are the rest of the AdmissionPolicy; they need a
	// Scheduler (New refuses them without one). Zero: none.
	MaxPerAccount                int
	SubjectLimits, AccountLimits map[string]int
	QueueTotal, QueueSubject     int
	// Scheduler admits runs with the policy above; nil: the engine counts
	// slots itself (no queue). It is the engine's for life; Reconfigure
	// only changes its policy.
	Scheduler Scheduler
	// Budgets gives each run its resource budgets; nil: none. The
	// engine's for life, like the usage sink.
	Budgets BudgetPolicy
	// UsageSink may be nil (no usage records).
	UsageSink UsageSink
	// Context serves `attachments` and `outputArtifact` (context-inputs,
	// draft-artifacts); nil: both are unknown fields. The engine's for
	// life.
	Context ContextInputs
	// HostID names this host in usage records; empty: a random UUID per
	// Engine.
	HostID string
	// Logger; nil discards.
	Logger *slog.Logger

	// ApprovalHook approves tools that require approval; nil: such tools
	// fail closed with APPROVAL_REQUIRED.
	ApprovalHook ApprovalHook
	// Reviewer serves runs carrying `approvals` (interactive-approvals);
	// nil: such runs are APPROVAL_UNAVAILABLE. The engine's for life.
	Reviewer Reviewer
	// ApplicationTools serves runs carrying `applicationTools`; nil: such
	// runs are APPLICATION_TOOLS_UNAVAILABLE. The engine's for life.
	ApplicationTools ApplicationTools
	// RunStore persists events before delivery; nil: none.
	RunStore RunStore
	// IdempotencyKeys accepts requests with an idempotencyKey: the host
	// has an operation store and the runtime/idempotency wrapper around
	// Start claims and replays keys. False: a key is
	// IDEMPOTENCY_UNAVAILABLE (wire-core §15.1).
	IdempotencyKeys bool
}

// Mode selects how a run's outcome is consumed.
type Mode int

const (
	// ModeJSON: the caller waits for the result with Run.Wait. No event
	// queue is kept.
	ModeJSON Mode = iota + 1
	// ModeStream: the caller reads events with Run.Next from a bounded
	// queue (wire-core §8.1, OUTPUT_BUFFER_LIMIT).
	ModeStream
)

// Engine validates, admits and executes runs. It is safe for concurrent
// use.
type Engine struct {
	// cfg is the configuration new runs validate against; Reconfigure
	// replaces it whole, and a run keeps the one it was admitted under.
	cfg atomic.Pointer[engineConfig]
	// maxRunning and maxSubject are the admission limits, guarded by mu
	// (with the counters they bound).
	maxRunning int
	maxSubject int
	// sched, when set, holds the slots instead of running/perSubject.
	sched     Scheduler
	budgets   BudgetPolicy
	usageSink UsageSink
	contexts  ContextInputs
	hostID    string
	log       *slog.Logger
	approval  ApprovalHook
	reviewer  Reviewer
	apps      ApplicationTools
	store     RunStore
	idemKeys  bool

	// base is the parent of every run context: runs outlive the request
	// that started them, and Shutdown cancels them all through it.
	base       context.Context
	cancelBase context.CancelCauseFunc

	mu         sync.Mutex
	shutting   bool
	running    int
	perSubject map[string]int

	runs  sync.WaitGroup // run goroutines, usage delivery included
	calls sync.WaitGroup // provider and tool calls the engine may have stopped waiting for

	// work hands a started run to an idle run goroutine (runWorker).
	work chan *Run
}

// hostTool is a Tool with its input (and output) schema compiled once.
type hostTool struct {
	tool   *Tool
	schema validator
	output validator // nil: the tool declares no output schema
	exec   ToolExecutor
	// app: an application tool defined by the run (wire-extensions §5),
	// executed by Options.ApplicationTools.
	app bool
}

// engineConfig is what Reconfigure may change: the provider instances,
// the host tools and the run limits. It is immutable once published.
type engineConfig struct {
	providers    map[string]*ProviderInstance
	providerList []*ProviderInstance
	tools        map[string]*hostTool
	limits       Limits
	// inflight counts the runs admitted under this configuration, so a
	// replaced configuration's extensions are closed only once its runs
	// are done (Reconfigure's drained channel).
	inflight sync.WaitGroup
}

// New checks opts and compiles every tool input schema.
func New(opts Options) (*Engine, error) {
	e := &Engine{
		// The admission limits are defaults an operator may raise
		// (wire-extensions §11.1): honoured as given, never lowered.
		maxRunning: orDefault(opts.MaxConcurrent, DefaultMaxConcurrent),
		maxSubject: orDefault(opts.MaxPerSubject, DefaultMaxPerSubject),
		usageSink:  opts.UsageSink,
		contexts:   opts.Context,
		hostID:     opts.HostID,
		log:        opts.Logger,
		approval:   opts.ApprovalHook,
		reviewer:   opts.Reviewer,
		apps:       opts.ApplicationTools,
		store:      opts.RunStore,
		idemKeys:   opts.IdempotencyKeys,
		perSubject: make(map[string]int),
		work:       make(chan *Run),
		sched:      opts.Scheduler,
		budgets:    opts.Budgets,
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.hostID == "" {
		e.hostID = newUUID()
	}
	if err := checkAdmission(e.maxRunning, e.maxSubject); err != nil {
		return nil, err
	}
	pol, err := admissionPolicy(&opts)
	if err != nil {
		return nil, err
	}
	if e.sched != nil {
		e.sched.SetPolicy(pol)
	}
	c, err := newEngineConfig(&opts)
	if err != nil {
		return nil, err
	}
	e.watchCapacity(c)
	e.cfg.Store(c)
	e.base, e.cancelBase = context.WithCancelCause(context.Background())
	return e, nil
}

// checkAdmission refuses admission limits out of range (never lowers one).
func checkAdmission(maxRunning, maxSubject int) error {
	switch {
	case maxRunning < 1 || maxRunning > MaxConcurrentLimit:
		return fmt.Errorf("runtime: MaxConcurrent %d out of range 1..%d", maxRunning, MaxConcurrentLimit)
	case maxSubject < 1 || maxSubject > maxRunning:
		return fmt.Errorf("runtime: MaxPerSubject %d out of range 1..%d (MaxConcurrent)", maxSubject, maxRunning)
	}
	return nil
}

// MaxQueue bounds each of the queue sizes (wire-core §8.1).
const MaxQueue = 100000

// admissionPolicy checks the scheduler part of opts.
func admissionPolicy(opts *Options) (AdmissionPolicy, error) {
	p := AdmissionPolicy{
		MaxConcurrent:   orDefault(opts.MaxConcurrent, DefaultMaxConcurrent),
		MaxPerSubject:   orDefault(opts.MaxPerSubject, DefaultMaxPerSubject),
		MaxPerAccount:   opts.MaxPerAccount,
		Subjects:        opts.SubjectLimits,
		Accounts:        opts.AccountLimits,
		QueueTotal:      opts.QueueTotal,
		QueuePerSubject: opts.QueueSubject,
	}
	inRange := func(v, lo, hi int) bool { return v >= lo && v <= hi }
	switch {
	case opts.Scheduler == nil && (p.MaxPerAccount != 0 || len(p.Subjects) > 0 || len(p.Accounts) > 0 || p.QueueTotal != 0 || p.QueuePerSubject != 0):
		return p, errors.New("runtime: account limits, overrides and the queue need a Scheduler")
	case p.MaxPerAccount != 0 && !inRange(p.MaxPerAccount, 1, p.MaxConcurrent):
		return p, fmt.Errorf("runtime: MaxPerAccount %d out of range 1..%d (MaxConcurrent)", p.MaxPerAccount, p.MaxConcurrent)
	case (p.QueueTotal == 0) != (p.QueuePerSubject == 0):
		return p, errors.New("runtime: QueueTotal and QueuePerSubject are set together")
	case p.QueueTotal != 0 && (!inRange(p.QueueTotal, 1, MaxQueue) || !inRange(p.QueuePerSubject, 1, p.QueueTotal)):
		return p, fmt.Errorf("runtime: queue %d/%d out of range 1..%d, per subject ≤ total", p.QueueTotal, p.QueuePerSubject, MaxQueue)
	}
	for _, m := range []map[string]int{p.Subjects, p.Accounts} {
		for k, v := range m {
			if !inRange(v, 1, p.MaxConcurrent) {
				return p, fmt.Errorf("runtime: limit %d of %q out of range 1..%d (MaxConcurrent)", v, k, p.MaxConcurrent)
			}
		}
	}
	return p, nil
}

// newEngineConfig checks the providers, tools and limits of opts and
// compiles every tool's schemas.
func newEngineConfig(opts *Options) (*engineConfig, error) {
	c := &engineConfig{
		providers: make(map[string]*ProviderInstance, len(opts.Providers)),
		tools:     make(map[string]*hostTool, len(opts.Tools)),
		limits:    opts.Limits,
	}
	if opts.Limits.MaxSteps < 0 || opts.Limits.MaxOutputTokens < 0 || opts.Limits.IdleTimeout < 0 {
		return nil, errors.New("runtime: negative limit")
	}
	for _, p := range opts.Providers {
		switch {
		case p == nil || p.ID == "":
			return nil, errors.New("runtime: provider instance without id")
		case p.Provider == nil:
			return nil, fmt.Errorf("runtime: provider %q has no Provider", p.ID)
		case c.providers[p.ID] != nil:
			return nil, fmt.Errorf("runtime: duplicate provider %q", p.ID)
		}
		c.providers[p.ID] = p
		c.providerList = append(c.providerList, p)
	}
	for _, t := range opts.Tools {
		switch {
		case t == nil || t.Def.Name == "":
			return nil, errors.New("runtime: tool without name")
		case t.Set == nil:
			return nil, fmt.Errorf("runtime: tool %q has no ToolSet", t.Def.Name)
		case c.tools[t.Def.Name] != nil:
			return nil, fmt.Errorf("runtime: duplicate tool %q", t.Def.Name)
		}
		raw := t.Def.InputSchema
		if len(raw) == 0 {
			raw = []byte(`{"type":"object"}`)
		}
		s, err := compileSchema(raw)
		if err != nil {
			return nil, fmt.Errorf("runtime: tool %q input schema: %w", t.Def.Name, err)
		}
		ht := &hostTool{tool: t, schema: s, exec: toolSetExecutor{t.Set}}
		if len(t.Def.OutputSchema) > 0 {
			if ht.output, err = compileSchema(t.Def.OutputSchema); err != nil {
				return nil, fmt.Errorf("runtime: tool %q output schema: %w", t.Def.Name, err)
			}
		}
		c.tools[t.Def.Name] = ht
	}
	return c, nil
}

// Reconfigure switches new runs to the providers, tools, limits and
// admission limits of opts, atomically: a run validated after it returns
// sees only the new configuration, and a run admitted before keeps the
// provider instances, tools and limits it was admitted with until it ends.
// The other fields of opts (usage sink, host id, hooks, run store,
// idempotency) are the engine's for life and are ignored. Running runs
// count against the new admission limits; lowering them admits nothing
// new until enough have ended, and preempts nothing.
//
// drained is closed once every run admitted under the replaced
// configuration has ended: only then may the caller close what only that
// configuration used (extensions).
func (e *Engine) Reconfigure(opts Options) (drained <-chan struct{}, err error) {
	maxRunning := orDefault(opts.MaxConcurrent, DefaultMaxConcurrent)
	maxSubject := orDefault(opts.MaxPerSubject, DefaultMaxPerSubject)
	if err := checkAdmission(maxRunning, maxSubject); err != nil {
		return nil, err
	}
	opts.Scheduler = e.sched
	pol, err := admissionPolicy(&opts)
	if err != nil {
		return nil, err
	}
	c, err := newEngineConfig(&opts)
	if err != nil {
		return nil, err
	}
	e.watchCapacity(c)
	// Under mu, so a run is admitted either under the old configuration
	// (and counted in its inflight before the swap completes) or validated
	// against the new one.
	e.mu.Lock()
	old := e.cfg.Swap(c)
	e.maxRunning, e.maxSubject = maxRunning, maxSubject
	if e.sched != nil {
		e.sched.SetPolicy(pol)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		old.inflight.Wait()
		close(done)
	}()
	return done, nil
}

// features are the /v1/protocol features this engine implements, in the
// upstream order (wire-core §2.3). Extensions are added here only once they
// work.
var features = []string{
	"json-results",
	"event-stream",
	"cancel-on-disconnect",
	"optional-idle-timeout",
	"required-capabilities",
	"optional-events",
	"provider-discovery",
}

// Features returns the implemented protocol features in spec order.
func (e *Engine) Features() []string {
	f := append([]string(nil), features...)
	if e.contexts != nil {
		f = append(f, "context-inputs", "draft-artifacts")
	}
	return f
}

// Providers returns the configured instances in configuration order.
func (e *Engine) Providers() []*ProviderInstance {
	return append([]*ProviderInstance(nil), e.cfg.Load().providerList...)
}

// Start validates req (wire-core §3.3), re-checks shutdown, authorizes p,
// takes an admission slot and starts the run in its own goroutine. Every
// error returned is a *protocol.Error to be sent as an HTTP error, except a
// programming error (bad mode), which the host reports as INTERNAL_ERROR.
//
// ctx bounds only Start itself: the run's lifetime is the engine's, and the
// host ends it with Run.Cancel (e.g. on client disconnect).
func (e *Engine) Start(ctx context.Context, p *Principal, req *protocol.RunRequest, mode Mode) (*Run, error) {
	return e.StartWith(ctx, p, req, mode, StartOptions{})
}

// StartWith is Start with the per-run additions of a feature package that
// wraps it (StartOptions).
func (e *Engine) StartWith(ctx context.Context, p *Principal, req *protocol.RunRequest, mode Mode, opts StartOptions) (*Run, error) {
	if mode != ModeJSON && mode != ModeStream {
		return nil, fmt.Errorf("runtime: invalid mode %d", mode)
	}
	var (
		pl   *plan
		slot Slot
	)
	for {
		var err error
		if pl, err = e.validate(req); err != nil {
			return nil, err
		}
		if e.isShuttingDown() {
			return nil, protocol.New(protocol.CodeHostShuttingDown)
		}
		if err := authorize(p, req, pl); err != nil {
			return nil, err
		}
		if err := streamRequired(req, mode); err != nil {
			return nil, err
		}
		pl.bindGrants(p)
		slot, err = e.admit(p.Subject, pl, opts.Queue)
		if err == errStaleConfig {
			continue // Reconfigure ran since validate: validate again
		}
		if err != nil {
			return nil, err
		}
		break
	}
	// A run that must wait is accepted now and gets its reservations
	// once admitted (Run.awaitAdmission, admittedReservations); the others
	// have them now, so a full extension is BUSY before any stream, or —
	// with a CapacityScheduler and a queue — the run waits for a unit in
	// the queue like a run over a cap.
	queued := slot != nil && !isClosed(slot.Admitted())
	var rs []Reservation
	if !queued {
		var err error
		if rs, err = admittedReservations(slot, pl); err != nil {
			e.releaseAdmission(p.Subject, slot)
			pl.cfg.inflight.Done()
			e.runs.Done()
			return nil, err
		}
	}
	// From here the run's context exists and must be cancelled on every
	// path, or the engine's base context would keep it forever.
	r := newRun(e, p, req, pl, mode)
	r.slot, r.queued = slot, queued
	if e.budgets != nil {
		r.budgets = e.budgets.Budgets(p.Subject, pl.inst.AccountID)
	}
	if opts.RunID != "" {
		r.id = opts.RunID
	}
	if len(rs) > 0 {
		r.reservations = rs
		r.ctx = WithReservations(r.ctx, rs...)
	}
	if e.store != nil {
		lg, err := e.store.OpenRun(ctx, RunInfo{
			RunID: r.id, Subject: r.subject, Provider: req.Provider, Model: req.Model, StartedAt: r.startedAt,
		})
		if err != nil {
			r.cancel(errRunFinished)
			r.releaseSlot()
			e.runs.Done()
			return nil, protocol.AsPublic(err)
		}
		r.log = lg
	}
	r.applyOptions(&opts)
	if err := r.begin(); err != nil {
		r.releaseSlot()
		e.runs.Done()
		return nil, err
	}
	e.dispatch(r)
	return r, nil
}

// Validate runs the checks Start runs before admission — semantic
// validation (wire-core §3.3), the shutdown check and authorization —
// without starting anything. Durable jobs validate a submission with it
// and again before dispatch. Its errors are *protocol.Error.
func (e *Engine) Validate(p *Principal, req *protocol.RunRequest) error {
	pl, err := e.validate(req)
	if err != nil {
		return err
	}
	if e.isShuttingDown() {
		return protocol.New(protocol.CodeHostShuttingDown)
	}
	return authorize(p, req, pl)
}

// Admissible answers as synchronous admission would for a new foreground
// run of subject on provider (wire-core §15.2: an idempotent replay runs
// nothing, takes no slot and waits for none, yet answers as its run
// would): HOST_SHUTTING_DOWN once shutdown began; BUSY when the host's,
// the subject's or the provider instance's account's cap is full and
// there is no queue; QUEUE_FULL when the run would have to wait and the
// queue (total or the subject's share) is full; nil when the run would
// start or wait. Only the caps count, not the extensions' instance caps:
// those bound instances, and a replay uses none. An unknown provider
// (validation has already refused it) answers for the subject alone.
func (e *Engine) Admissible(subject, provider string) error {
	var account string
	if inst := e.cfg.Load().providers[provider]; inst != nil {
		account = inst.AccountID
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutting {
		return protocol.New(protocol.CodeHostShuttingDown)
	}
	if e.sched != nil {
		return e.sched.Admissible(subject, account, true)
	}
	if e.running >= e.maxRunning || e.perSubject[subject] >= e.maxSubject {
		return protocol.New(protocol.CodeBusy)
	}
	return nil
}

// AcquireSlot takes a run slot of subject for a call that is not a run
// but shares the run slots: retrieval endpoints (wire-extensions §1.5).
// Only the host's and the subject's caps count (§11.1: no account, no
// extension units), and the call never waits in the queue: BUSY when
// either is full, HOST_SHUTTING_DOWN once shutdown began. release gives
// the slot back; it is safe to call more than once.
func (e *Engine) AcquireSlot(subject string) (release func(), err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutting {
		return nil, protocol.New(protocol.CodeHostShuttingDown)
	}
	if e.sched != nil {
		slot, err := e.sched.Admit(subject, "", false)
		if err != nil {
			return nil, err
		}
		return sync.OnceFunc(slot.Release), nil
	}
	if e.running >= e.maxRunning || e.perSubject[subject] >= e.maxSubject {
		return nil, protocol.New(protocol.CodeBusy)
	}
	e.running++
	e.perSubject[subject]++
	return sync.OnceFunc(func() { e.release(subject) }), nil
}

// CapacityScheduler is a Scheduler that admits a run together with its
// units of capped extensions (Capacity), so that a run waiting for a full
// extension waits in the admission queue — before any step, with its idle
// clock stopped, in the fair order — and is never refused BUSY after it
// was accepted (DESIGN.md §3). runtime/scheduling implements it. With a
// plain Scheduler a queued run reserves its units only once admitted,
// and a full extension then fails it.
type CapacityScheduler interface {
	Scheduler
	// AdmitWith is Admit for a run whose units reserve takes. reserve is
	// called with the scheduler's lock held, whenever the run fits the
	// caps; a BUSY error means "not now". The Slot returned implements
	// ReservedSlot.
	AdmitWith(subject, account string, queue bool, reserve func() ([]Reservation, error)) (Slot, error)
	// Recheck says a Capacity has a unit again that it refused: waiting
	// runs are tried again. It must not block on the scheduler's lock
	// (it is called by whoever gives the unit back).
	Recheck()
}

// ReservedSlot is a Slot that took the run's extension units with it.
type ReservedSlot interface {
	Slot
	// Reservations hands over the units, once admitted: a non-BUSY
	// failure of reserve at a queued run's admission (the extension was
	// closed) is the run's failure.
	Reservations() ([]Reservation, error)
}

// CapacityNotifier is a Capacity that can say when a unit it refused is
// free again. The engine registers its CapacityScheduler's Recheck with
// every provider and tool set of its configuration that implements it;
// notify must be called without the Capacity's own locks held.
type CapacityNotifier interface {
	NotifyFree(notify func())
}

// admittedReservations returns an admitted run's extension units: those
// its slot took (ReservedSlot), or those it takes now.
func admittedReservations(slot Slot, pl *plan) ([]Reservation, error) {
	if rs, ok := slot.(ReservedSlot); ok {
		return rs.Reservations()
	}
	return pl.reserve()
}

// watchCapacity registers the scheduler's Recheck with every capped
// provider and tool set of c.
func (e *Engine) watchCapacity(c *engineConfig) {
	cs, ok := e.sched.(CapacityScheduler)
	if !ok {
		return
	}
	for _, p := range c.providerList {
		if n, ok := p.Provider.(CapacityNotifier); ok {
			n.NotifyFree(cs.Recheck)
		}
	}
	for _, t := range c.tools {
		if n, ok := t.tool.Set.(CapacityNotifier); ok {
			n.NotifyFree(cs.Recheck)
		}
	}
}

// dispatch runs r on an idle run goroutine, or on a new one when none is
// idle. Run goroutines are reused because a provider turn runs on them: a
// fresh goroutine grows its stack (copying it) on every run — measured at
// about 2 % of a host's CPU time with a wasm provider — while a reused one
// keeps the stack it grew. There are never more of them than runs that
// were in flight at once (idle ones wait for the next run), and all exit
// when the engine shuts down.
func (e *Engine) dispatch(r *Run) {
	select {
	case e.work <- r:
	default:
		go e.runWorker(r)
	}
}

func (e *Engine) runWorker(r *Run) {
	for {
		r.execute()
		r = nil // not kept alive while idle
		select {
		case r = <-e.work:
		case <-e.base.Done():
			return
		}
	}
}

func (e *Engine) isShuttingDown() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.shutting
}

// admit takes a slot (no queue: a full host or subject is BUSY) — with a
// CapacityScheduler together with the run's extension units — and
// registers the run with the shutdown wait group under the same lock as the
// shutdown flag, so no run starts once Shutdown waits.
//
// The run is counted in the inflight group of cfg, the configuration it
// was validated against — under mu, which Reconfigure holds to swap the
// configuration, so a replaced configuration never gains a run after its
// drain began: errStaleConfig then asks the caller to validate again.
//
// With a Scheduler the slot is the scheduler's (queue: the run may wait
// for it); without one the slot is counted here and the returned Slot is
// nil.
func (e *Engine) admit(subject string, pl *plan, queue bool) (Slot, error) {
	cfg, account := pl.cfg, pl.inst.AccountID
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutting {
		return nil, protocol.New(protocol.CodeHostShuttingDown)
	}
	if cfg != e.cfg.Load() {
		return nil, errStaleConfig
	}
	var slot Slot
	if cs, ok := e.sched.(CapacityScheduler); ok {
		var err error
		if slot, err = cs.AdmitWith(subject, account, queue, pl.reserve); err != nil {
			return nil, err
		}
	} else if e.sched != nil {
		var err error
		if slot, err = e.sched.Admit(subject, account, queue); err != nil {
			return nil, err
		}
	} else {
		if e.running >= e.maxRunning || e.perSubject[subject] >= e.maxSubject {
			return nil, protocol.New(protocol.CodeBusy)
		}
		e.running++
		e.perSubject[subject]++
	}
	e.runs.Add(1)
	cfg.inflight.Add(1)
	return slot, nil
}

// releaseAdmission gives back what admit took: the scheduler's slot, or
// the engine's own count.
func (e *Engine) releaseAdmission(subject string, slot Slot) {
	if slot != nil {
		slot.Release()
		return
	}
	e.release(subject)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// errStaleConfig: the configuration changed between validation and
// admission.
var errStaleConfig = errors.New("runtime: configuration replaced")

func (e *Engine) release(subject string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running--
	if n := e.perSubject[subject] - 1; n > 0 {
		e.perSubject[subject] = n
	} else {
		delete(e.perSubject, subject)
	}
}

// Running returns the number of runs holding an admission slot.
func (e *Engine) Running() int {
	if e.sched != nil {
		return e.sched.Stats().Running
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// shutdownCause ends every running run when the host shuts down.
var shutdownCause = &stopCause{err: protocol.New(protocol.CodeCancelled), cancelled: true}

// Shutdown stops admission (HOST_SHUTTING_DOWN), cancels every running run
// (each still emits its terminal event and delivers its usage record) and
// waits for them, and then for provider and tool calls the runs stopped
// waiting for, until ctx is done.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.shutting = true
	e.mu.Unlock()
	e.cancelBase(shutdownCause)
	done := make(chan struct{})
	go func() {
		e.runs.Wait()
		e.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newUUID returns a random (version 4) UUID in lowercase.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// AdmissionStats is a snapshot of the engine's admission.
type AdmissionStats struct {
	Running, MaxConcurrent, MaxPerSubject int
	// Subjects is the number of subjects with a running run.
	Subjects int
	// Queued counts runs waiting in the admission queue.
	Queued int
}

// Admission reports the engine's admission state (for status pages).
func (e *Engine) Admission() AdmissionStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sched != nil {
		st := e.sched.Stats()
		return AdmissionStats{Running: st.Running, MaxConcurrent: e.maxRunning, MaxPerSubject: e.maxSubject, Subjects: st.Subjects, Queued: st.Queued}
	}
	return AdmissionStats{Running: e.running, MaxConcurrent: e.maxRunning, MaxPerSubject: e.maxSubject, Subjects: len(e.perSubject)}
}
