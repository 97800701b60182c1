package wasm

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"hash/maphash"
	"math"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/wasm/checkpoint"
)

// instance is one guest module instance. It serves one call at a time.
type instance struct {
	x         *Extension
	mod       api.Module
	call      api.Function
	mem       api.Memory
	stack     []uint64
	highWater uint32
	// depth is the checkpoint rewriter's depth high-water mark
	// (checkpoint.DepthExport), looked up once: an instance whose calls
	// went deep keeps the native stack they grew (see deepDiscard).
	depth api.Global
	// cur is the call in progress (for nanosleep, which gets no context).
	cur atomic.Pointer[callState]
	// handles are the open requests of the call in progress, and meta is
	// http_start's decoded meta. They live here rather than in the
	// callState so that they are allocated once per instance: an instance
	// serves one call at a time, and run closes every handle when a call
	// ends.
	handles handleTable
	meta    startRequest
}

// callState is everything the host functions need during one ExportCall.
// It is reached from the context wazero passes to host functions.
type callState struct {
	x    *Extension
	inst *instance
	op   abi.Op

	parent context.Context // the caller's context: its end is cancellation
	ctx    context.Context // parent + watchdog; aborts HTTP
	cancel context.CancelCauseFunc

	input  []byte
	config []byte
	output []byte
	sink   runtime.TurnSink // OpComplete
	onProg func()           // OpToolInvoke
	net    *netPolicy       // nil: no network for this binding
	// kv and subject are the binding's kv namespace (nil: none) and the
	// subject of the run whose tool call this is ("": none), kv.go.
	kv      *kvSpace
	subject string
	// procPol and procs are the binding's process policy (nil: none) and
	// the call's open processes; binaryRefused records that a pinned
	// binary no longer matched its digest (process.go).
	procPol       *procPolicy
	procs         procTable
	binaryRefused bool

	// netWaited records that the host function in progress sent a
	// request to the network (httpStart), which is a real wait.
	netWaited bool
	// Watchdog bookkeeping (see watchdog): waiting > 0 while the guest is
	// inside a host function that may block (enterWait); waits counts
	// those calls, each of which restarts the compute count.
	waiting       atomic.Int32
	waits         atomic.Uint64
	watchdogFired atomic.Bool
	// clock is the CPU clock of the OS thread running the guest (see
	// threadClockID); it changes when a waiting host function lets the
	// goroutine move to another thread (enterWait).
	clock atomic.Int32

	trap      error  // set by a host function right before it traps
	violation string // first ABI misuse of this call (invalid result)
	// noCredential records that a request went out without a credential
	// the operator configured but the host could not resolve (an unset
	// environment variable, an empty file): the host, not the guest, then
	// knows why the call failed (AUTH_REQUIRED).
	noCredential bool
	// secrets are the values injected into the call's requests, which
	// its results and events must not carry (redact.go).
	secrets secretSet

	streamed     int // bytes of text streamed
	emitted      int // payload bytes emitted, every kind
	streamedHash maphash.Hash
}

type callKey struct{}

func callOf(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}

// enter and exit bracket a host function that does not wait (http_head;
// the others in hostfuncs.go need no bracket at all). Its time counts as
// guest compute: a guest looping on config() or emit holds a core exactly
// like one looping on its own, so the watchdog must see it. They record
// nothing and cost nothing.
func (cs *callState) enter() {}
func (cs *callState) exit()  {}

// enterWait and exitWait bracket a host function that may block (network
// I/O, a sleep). A wait that really happened — exitWait(true): a request
// went to the network, a read brought new bytes or a new event, a sleep of
// at least minSleepWait — ends the stretch of compute the watchdog
// bounds. One that returned at once (a bad handle, a closed body read
// again, a close, a nanosecond sleep) does not: a guest calling such a
// function in a loop holds a core like one spinning on its own, and timing
// the call instead would let an OS preemption inside it pass for a wait.
//
// While it waits the goroutine is unpinned from its OS thread: a goroutine
// blocked while locked to a thread makes the Go scheduler park that thread
// and hand its P to another, then wake it again for the wake-up — two
// context switches per wait, which cost more than a whole vendor turn of
// guest compute. exitWait pins the goroutine again, to whatever thread it
// now runs on, and records that thread's clock for the watchdog.
func (cs *callState) enterWait() {
	cs.waiting.Add(1)
	goruntime.UnlockOSThread()
}

func (cs *callState) exitWait(waited bool) {
	goruntime.LockOSThread()
	cs.clock.Store(threadClockID())
	if waited {
		cs.waits.Add(1)
	}
	cs.waiting.Add(-1)
}

// minSleepWait is the shortest guest sleep that counts as waiting for the
// watchdog: a guest sleeping a millisecond at a time yields its core.
const minSleepWait = time.Millisecond

// cancelled reports whether the caller cancelled the call.
func (cs *callState) cancelled() bool { return cs.parent.Err() != nil }

func (cs *callState) violate(format string, args ...any) {
	if cs.violation == "" {
		cs.violation = fmt.Sprintf(format, args...)
	}
}

// trapWith records err and aborts the guest call. wazero turns the panic
// into an error returned from the call; the instance is then discarded.
func (cs *callState) trapWith(err error) {
	if cs != nil && cs.trap == nil {
		cs.trap = err
	}
	panic(err)
}

var epoch = time.Now()

// now is a monotonic clock in nanoseconds.

// newInstance instantiates the compiled module with the sandbox's module
// configuration and runs its _initialize under the watchdog.
func (x *Extension) newInstance(ctx context.Context) (*instance, error) {
	start := time.Now()
	inst := &instance{x: x, stack: make([]uint64, 1)}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called below, under the watchdog
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(inst.nanosleep).
		WithRandSource(crand.Reader).
		WithStdout(&guestWriter{x: x, stream: "stdout"}).
		WithStderr(&guestWriter{x: x, stream: "stderr"})
	mod, err := x.rt.InstantiateModule(inst.withLinearMemory(ctx), x.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInstantiate, oneLine(err))
	}
	inst.mod = mod
	inst.call = mod.ExportedFunction(abi.ExportCall)
	inst.mem = mod.Memory()
	inst.depth = mod.ExportedGlobal(checkpoint.DepthExport)
	if inst.call == nil || inst.mem == nil {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("%w: missing %s or memory", ErrInstantiate, abi.ExportCall)
	}
	init := mod.ExportedFunction(abi.ExportInitialize)
	res := x.run(ctx, inst, &callState{op: 0}, init)
	if res.err != nil || res.cancelled {
		_ = mod.Close(context.WithoutCancel(ctx))
		cause := res.err
		if cause == nil {
			cause = context.Cause(ctx)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInstantiate, abi.ExportInitialize, cause)
	}
	hw := uint64(inst.mem.Size()) + 16<<20
	if x.opts.HighWaterMiB > 0 {
		hw = uint64(x.opts.HighWaterMiB) << 20
	}
	inst.highWater = uint32(min(hw, uint64(x.memLimit), math.MaxUint32))
	observeInstance(x, start)
	return inst, nil
}

// nanosleep serves the guest's clock waits (poll_oneoff): a real sleep of
// at most MaxSleep that ends early when the call is cancelled. wazero's
// default is a no-op, which makes a guest's time.Sleep spin a core.
func (inst *instance) nanosleep(ns int64) {
	d := min(time.Duration(ns), inst.x.maxSleep)
	if d <= 0 {
		return
	}
	cs := inst.cur.Load()
	if cs == nil {
		time.Sleep(d)
		return
	}
	cs.enterWait()
	defer cs.exitWait(d >= minSleepWait)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-cs.ctx.Done():
	}
}

func (inst *instance) close(ctx context.Context) {
	_ = inst.mod.Close(ctx)
}

// callResult is the raw outcome of one guest call.
type callResult struct {
	status    abi.Status
	output    []byte
	err       error // private cause: trap, exit, watchdog, host limit
	fault     fault // the class of err when the guest did not return
	cancelled bool  // the caller's context ended
	watchdog  bool
	discard   bool
}

// invoke runs plugin_call(op) on inst.
func (x *Extension) invoke(ctx context.Context, inst *instance, cs *callState) callResult {
	return x.run(ctx, inst, cs, inst.call)
}

// run calls fn (plugin_call or _initialize) with the compute watchdog
// armed, then classifies the outcome. Cancelling the call's context stops
// a guest wherever it is: in a host function that waits, or at its next
// checkpoint (hostCheckpoint).
func (x *Extension) run(ctx context.Context, inst *instance, cs *callState, fn api.Function) (res callResult) {
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cs.x, cs.inst = x, inst
	inst.handles.next = 0 // handle ids start at 1 in every call
	cs.parent, cs.ctx, cs.cancel = ctx, callCtx, cancel
	if d := x.opts.TurnTimeout; d > 0 && fn == inst.call {
		// The operator's wall-clock bound on one call (off by default:
		// the spec has no run deadline). The watchdog cancels callCtx,
		// which ends this one too.
		var stop context.CancelFunc
		cs.ctx, stop = context.WithTimeoutCause(callCtx, d, errTurnTimeout)
		defer stop()
	}
	inst.cur.Store(cs)
	if inst.mod.IsClosed() {
		// Extension.Close gave up waiting and closed the runtime after
		// this call took the instance: its memory may be unmapped, so no
		// guest code may run. Checked after cur is set, so a close from
		// now on sees the call in flight (memory_linux.go).
		inst.cur.Store(nil)
		return callResult{err: ErrClosed, discard: true, cancelled: ctx.Err() != nil}
	}
	// The guest runs on this goroutine; pinning it to its thread lets the
	// watchdog read the thread's CPU clock (see cpuclock_linux.go). Host
	// functions that wait unpin it meanwhile (enterWait).
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	cs.clock.Store(threadClockID())
	limit := x.computeLimit
	if fn != inst.call {
		// _initialize runs the guest runtime's and packages' init once per
		// instance; Load already ran it once, so it gets a generous bound.
		limit = max(limit, initComputeLimit)
	}
	wd := x.startWatchdog(cs, limit)

	var err error
	if fn == inst.call {
		inst.stack[0] = uint64(uint32(cs.op))
		err = fn.CallWithStack(context.WithValue(callCtx, callKey{}, cs), inst.stack)
	} else {
		_, err = fn.Call(context.WithValue(callCtx, callKey{}, cs))
	}

	wd.stop()
	inst.cur.Store(nil)
	cs.closeHandles()
	cs.closeProcs()

	res.output = cs.output
	switch {
	case cs.watchdogFired.Load() && ctx.Err() == nil:
		res.err, res.fault, res.watchdog, res.discard = errWatchdog, faultCompute, true, true
	case ctx.Err() != nil:
		res.cancelled, res.discard = true, true
		res.err = err
	case context.Cause(cs.ctx) == errTurnTimeout:
		// Checked before err: a guest whose request the deadline aborted
		// may still return a status of its own.
		res.err, res.fault, res.discard = errTurnTimeout, faultTurn, true
	case err != nil:
		res.discard = true
		res.err, res.fault = classifyTrap(inst, cs, err)
	default:
		if fn == inst.call {
			res.status = abi.Status(int32(uint32(inst.stack[0])))
			if res.status != abi.StatusOK {
				res.discard = true
			}
		}
	}
	if cs.violation != "" || inst.mod.IsClosed() || inst.mem.Size() > inst.highWater ||
		(inst.depth != nil && uint32(inst.depth.Get()) > deepDiscard) {
		res.discard = true
	}
	return res
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// deepDiscard is the call depth (in checkpoint frame units) past which an
// instance is discarded after its call instead of pooled: wazero never
// shrinks the native stack a deep call grew, so a pooled instance would
// keep it. A quarter of checkpoint.MaxDepth is ~5,000 units, deeper than
// the vendor adapters go (a JSON document nested 1,000 levels reaches
// ~2,700), and a stack of well under a MiB.
const deepDiscard = checkpoint.MaxDepth / 4

// initComputeLimit is the least compute budget of _initialize.
const initComputeLimit = 10 * time.Second

// watchdog stops a guest that computes for longer than the extension's
// compute limit without really waiting.
//
// It measures the CPU time of the thread running the guest (on Linux; see
// threadClockID), so a guest that merely waits for a core on a loaded
// machine is not stopped, while time spent in host functions that do not
// wait — config, input, output, emit, log, log_enabled, cancelled and the
// checkpoint call — counts like the guest's own code: they run on the same
// thread. Only a host function that may wait (enterWait: http_start,
// http_read, http_next_event, http_close, the capped sleep) starts a new
// count. Elsewhere the clock falls back to wall time.
//
// Host functions that do not wait touch none of this; a waiting one
// updates three atomics. The watchdog samples every eighth of the limit and
// adds the thread's CPU time since the last sample; a sample taken while
// the guest waits reads nothing (the thread may be running other
// goroutines meanwhile).
//
// The count starts at the first sample, not at the start of the call: most
// calls end before it, and reading a thread's CPU clock is a system call
// (about a quarter of a microsecond) that they then never pay. Compute
// before the first sample (at most one interval) and the time until the
// next sample (at most another) come on top of the limit, so a guest is
// stopped after between limit and limit+limit/4 of pure compute.
type watchdog struct {
	t     *time.Timer
	done  atomic.Bool
	cs    *callState
	limit time.Duration
	tick  time.Duration
	// The count's state, touched only by check (the timer runs one check
	// at a time): used is the compute counted so far, last the clock
	// reading of the previous sample on clock lastClock, seen the waits
	// already accounted for.
	used      int64
	last      int64
	lastClock int32
	seen      uint64
	started   bool
	retry     time.Duration // the delay of the next sample while waiting
}

func (x *Extension) startWatchdog(cs *callState, limit time.Duration) *watchdog {
	// The state lives in one struct with check as its method: a closure
	// over locals would allocate each captured variable separately, on
	// every call.
	w := &watchdog{cs: cs, limit: limit, tick: max(limit/8, time.Millisecond)}
	// Armed only once w.t is set: check re-arms itself through w.t, and a
	// timer firing before the assignment would read it unset. Reset orders
	// the assignment before the callback (timers carry that edge).
	w.t = time.AfterFunc(math.MaxInt64, w.check)
	w.t.Reset(w.tick)
	return w
}

func (w *watchdog) check() {
	if w.done.Load() {
		return
	}
	cs := w.cs
	if cs.waiting.Load() == 0 {
		n := cs.waits.Load()
		id := cs.clock.Load()
		now := readClock(id)
		switch {
		case !w.started || n != w.seen:
			// The first sample, or the guest waited since the last one:
			// a new stretch of compute starts here.
			w.used, w.seen, w.started = 0, n, true
		case id != w.lastClock:
			// Another thread's clock (only a wait moves the guest, and a
			// wait restarts the count above): keep the count, rebase.
		default:
			w.used += now - w.last
		}
		w.last, w.lastClock = now, id
		if time.Duration(w.used) >= w.limit {
			cs.watchdogFired.Store(true)
			cs.cancel(errWatchdog)
			return
		}
		w.retry = 0
		w.t.Reset(w.tick)
		return
	}
	// Inside a host function that may wait: look again soon, then less
	// and less often. A guest that loops on such a function returning at
	// once spends most of its time inside it, and skipping to the next
	// full tick would let most samples miss it; a real wait backs off to
	// one sample a tick within four samples.
	w.retry = min(max(2*w.retry, w.tick/16), w.tick)
	w.t.Reset(w.retry)
}

func (w *watchdog) stop() {
	w.done.Store(true)
	w.t.Stop()
}
