package wasm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// ErrBusy is returned by a call on an extension whose operator cap on
// instances is reached by the calls of other runs. Runs admitted by the
// engine never see it: their instance is reserved at admission
// (Reserve), which is where a full extension answers BUSY.
var ErrBusy = errors.New("extension at its instance cap")

// DefaultIdleInstanceTTL is how long an idle instance above the warm count
// is kept before it is closed.
const DefaultIdleInstanceTTL = 30 * time.Second

// pool holds the instances of one extension.
//
// It is never a hidden concurrency limit (DESIGN.md §3): without an
// operator cap it creates an instance whenever none is idle, so a call
// waits for nothing but instantiation. The manifest's poolSize is the warm
// count: idle instances above it are closed once they have been idle for
// the idle period, so the memory of a burst comes back.
//
// With a cap (host.toml max_instances) every unit of it is handed out at
// admission: the engine reserves one instance per admitted run for its
// provider and for each tool extension it may call (Reserve), before
// run.started, and refuses the run with BUSY when the cap is taken. The
// calls of a run then never wait for another run. A run refused a unit may
// wait for one in the admission queue instead: the pool tells the
// scheduler (NotifyFree) when a unit it refused is free again. Parallel
// calls of one run
// (tool calls of a step) use free units of the cap when there are any and
// otherwise take turns on the run's own reserved instance. A call that
// holds no reservation (discovery probes, qualification, direct use of the
// Provider) takes a free unit for its duration or fails at once with
// ErrBusy.
type pool struct {
	x       *Extension
	warm    int           // idle instances kept warm (poolSize)
	max     int           // operator cap on live instances; 0: none
	idleTTL time.Duration // an idle instance above warm lives this long
	base    context.Context
	stop    context.CancelFunc

	mu       sync.Mutex
	idle     []idleInstance // oldest first; acquire takes the newest
	live     int            // idle + in use + being created
	inUse    int
	reserved int // units of max held by reservations and unreserved calls
	closed   bool
	drained  chan struct{} // closed once closed and inUse == 0
	closing  chan struct{} // the drained channel of close, kept for wait
	reaping  bool          // a reap is scheduled
	// refills counts background refills under way; refilled is closed
	// (and replaced) when one ends, for a capped acquire that waits for
	// the instance a refill is creating instead of creating one more.
	refills  int
	refilled chan struct{}
	wg       sync.WaitGroup
	// refused: reserve refused a unit since the last one was given back;
	// the next unit given back calls onFree (once p.mu is released), so a
	// run waiting in the admission queue for this extension is tried
	// again. Without a refusal nobody waits and a release costs nothing.
	refused bool
	notify  bool // a unit came back after a refusal: call onFree at unlock
	onFree  atomic.Pointer[func()]
}

type idleInstance struct {
	inst  *instance
	since time.Time
}

func newPool(x *Extension, warm, max int, idleTTL time.Duration) *pool {
	base, stop := context.WithCancel(context.Background())
	if max > 0 {
		warm = min(warm, max)
	}
	if idleTTL <= 0 {
		idleTTL = DefaultIdleInstanceTTL
	}
	return &pool{x: x, warm: warm, max: max, idleTTL: idleTTL, base: base, stop: stop}
}

// put adds a fresh instance created outside acquire (at Load).
func (p *pool) put(inst *instance) {
	p.mu.Lock()
	p.live++
	p.idle = append(p.idle, idleInstance{inst, time.Now()})
	p.mu.Unlock()
}

// reservation is one admitted run's unit of a capped pool.
type reservation struct {
	p *pool
	// Guarded by p.mu.
	held     bool          // a call of the run uses the unit
	released bool          // the run has ended
	wake     chan struct{} // signalled when the unit is free again
}

// Release ends the run's claim. A call of the run still holding the unit
// (one the engine stopped waiting for) keeps it until it returns, so the
// cap holds for instances, not only for runs.
func (r *reservation) Release() {
	p := r.p
	p.mu.Lock()
	defer p.unlock()
	if r.released {
		return
	}
	r.released = true
	if !r.held {
		p.freeLocked()
	}
}

// freeLocked gives one unit of the cap back.
func (p *pool) freeLocked() {
	p.reserved--
	if p.refused {
		p.refused = false
		p.notify = true
	}
}

// unlock releases p.mu and then tells the scheduler about a unit given
// back after a refusal (never under p.mu: the scheduler calls reserve
// with its own lock held).
func (p *pool) unlock() {
	notify := p.notify
	p.notify = false
	p.mu.Unlock()
	if notify {
		if f := p.onFree.Load(); f != nil {
			(*f)()
		}
	}
}

// unlimited is the reservation of a pool without a cap: there is nothing
// to hold.
type unlimited struct{}

func (unlimited) Release() {}

// reserve takes one unit of the cap for an admitted run.
func (p *pool) reserve() (runtime.Reservation, error) {
	if p.max == 0 {
		return unlimited{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.reserved >= p.max:
		p.refused = true
		return nil, ErrBusy
	}
	p.reserved++
	return &reservation{p: p, wake: make(chan struct{}, 1)}, nil
}

// lease is how an acquired instance counts against the cap; acquire
// returns it and release gives it back. The zero lease is that of a pool
// without a cap.
type lease struct {
	own   *reservation // the run's reserved unit
	spare bool         // a free unit taken for this call only
}

// reservationOf finds the caller's reservation on p among those the
// engine attached to the run's context.
func (p *pool) reservationOf(ctx context.Context) *reservation {
	for _, r := range runtime.ReservationsFrom(ctx) {
		if r, ok := r.(*reservation); ok && r.p == p {
			return r
		}
	}
	return nil
}

// acquire returns an idle instance or creates one. It waits only in one
// case: a capped pool whose free units are all taken, for a call of a run
// whose own reserved instance is busy with another call of the same run.
func (p *pool) acquire(ctx context.Context) (*instance, lease, error) {
	var l lease
	if p.max > 0 {
		var err error
		if l, err = p.take(ctx); err != nil {
			return nil, lease{}, err
		}
	}
	p.mu.Lock()
	if p.closed {
		p.giveBackLocked(l)
		p.unlock()
		return nil, lease{}, ErrClosed
	}
	// A capped pool whose every unit is an instance (live == max) and
	// whose idle list is empty has a refill under way: its instance is
	// the one this call may use, so wait for it rather than create one
	// past the cap.
	for p.max > 0 && len(p.idle) == 0 && p.live >= p.max && p.refills > 0 {
		if p.refilled == nil {
			p.refilled = make(chan struct{})
		}
		ch := p.refilled
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			p.giveBackLocked(l)
			p.unlock()
			return nil, lease{}, context.Cause(ctx)
		}
		p.mu.Lock()
		if p.closed {
			p.giveBackLocked(l)
			p.unlock()
			return nil, lease{}, ErrClosed
		}
	}
	p.inUse++
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1].inst
		p.idle[n-1] = idleInstance{}
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, l, nil
	}
	p.live++
	p.mu.Unlock()
	inst, err := p.x.newInstance(ctx)
	if err != nil {
		p.mu.Lock()
		p.live--
		p.inUse--
		p.giveBackLocked(l)
		p.signalDrainedLocked()
		p.unlock()
		return nil, lease{}, err
	}
	return inst, l, nil
}

// take claims a unit of the cap for one call.
func (p *pool) take(ctx context.Context) (lease, error) {
	r := p.reservationOf(ctx)
	for {
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			return lease{}, ErrClosed
		case r != nil && !r.held && !r.released:
			r.held = true
			p.mu.Unlock()
			return lease{own: r}, nil
		case p.reserved < p.max:
			p.reserved++
			p.mu.Unlock()
			return lease{spare: true}, nil
		case r == nil || r.released:
			p.mu.Unlock()
			return lease{}, ErrBusy
		}
		p.mu.Unlock()
		// Another call of the same run holds its unit: take turns.
		select {
		case <-r.wake:
		case <-ctx.Done():
			return lease{}, context.Cause(ctx)
		case <-p.base.Done():
			return lease{}, ErrClosed
		}
	}
}

// giveBackLocked returns the unit of a lease.
func (p *pool) giveBackLocked(l lease) {
	switch {
	case l.spare:
		p.freeLocked()
	case l.own != nil:
		r := l.own
		r.held = false
		if r.released {
			p.freeLocked()
			return
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

func (p *pool) signalDrainedLocked() {
	if p.closed && p.inUse == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// release returns inst to the idle list or discards it; after a discard it
// starts a background refill when no idle instance is left, so the next
// call does not pay for instantiation.
func (p *pool) release(ctx context.Context, inst *instance, l lease, discard bool) {
	p.mu.Lock()
	p.inUse--
	p.giveBackLocked(l)
	if !discard && !p.closed {
		p.idle = append(p.idle, idleInstance{inst, time.Now()})
		reap := len(p.idle) > p.warm && !p.reaping
		if reap {
			p.reaping = true
		}
		p.unlock()
		if reap {
			time.AfterFunc(p.idleTTL, p.reap)
		}
		return
	}
	p.live--
	refill := !p.closed && len(p.idle) == 0 && p.warm > 0 && (p.max == 0 || p.live < p.max)
	if refill {
		p.live++
		p.refills++
		p.wg.Add(1)
	}
	p.signalDrainedLocked()
	p.unlock()
	inst.close(context.WithoutCancel(ctx))
	if refill {
		go p.refill()
	}
}

// reap closes the idle instances above the warm count that have been idle
// for the idle period, oldest first, and schedules itself again while
// there are more than the warm count.
func (p *pool) reap() {
	now := time.Now()
	var old []*instance
	p.mu.Lock()
	if p.closed {
		p.reaping = false
		p.mu.Unlock()
		return
	}
	n := 0 // instances to close: the oldest ones, past the TTL, above warm
	for n < len(p.idle)-p.warm && now.Sub(p.idle[n].since) >= p.idleTTL {
		old = append(old, p.idle[n].inst)
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	p.live -= n
	var next time.Duration
	if len(p.idle) > p.warm {
		next = max(p.idleTTL-now.Sub(p.idle[0].since), time.Millisecond)
	} else {
		p.reaping = false
	}
	p.mu.Unlock()
	for _, inst := range old {
		inst.close(context.Background())
	}
	if len(old) > 0 {
		// A reap follows a burst, and an idle host may not allocate
		// enough to start a collection for minutes (the runtime forces
		// one every two), after which the scavenger returns freed pages
		// only gradually. Reaps are rare (one per idle period, and only
		// after load fell), so give the closed instances' host memory
		// back now: that is what the operator's poolSize promises.
		debug.FreeOSMemory()
	}
	if next > 0 {
		time.AfterFunc(next, p.reap)
	}
}

// testHookRefill, when set, runs at the start of every background refill
// (tests hold a refill under way with it).
var testHookRefill func()

func (p *pool) refill() {
	defer p.wg.Done()
	if testHookRefill != nil {
		testHookRefill()
	}
	inst, err := p.x.newInstance(p.base)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refills--
	if p.refilled != nil {
		close(p.refilled)
		p.refilled = nil
	}
	if err != nil {
		p.live--
		if p.base.Err() == nil {
			p.x.log.Warn("extension instance refill failed", "err", err)
		}
		return
	}
	if p.closed {
		p.live--
		inst.close(context.Background())
		return
	}
	p.idle = append(p.idle, idleInstance{inst, time.Now()})
}

// close refuses new calls, waits (up to ctx) for calls in flight and for
// refills, and closes every idle instance.
//
// It reports whether everything is done; false means ctx ended while calls
// were still in flight, and the caller must not close what those calls use
// (the runtime) until wait returns.
func (p *pool) close(ctx context.Context) (done bool) {
	p.stop() // wakes waiting acquires and stops refills
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	var drained chan struct{}
	if p.inUse > 0 {
		drained = make(chan struct{})
		p.drained = drained
		p.closing = drained
	}
	p.mu.Unlock()
	for _, it := range idle {
		it.inst.close(ctx)
	}
	if drained != nil {
		select {
		case <-drained:
		case <-ctx.Done():
			return false
		}
	}
	p.wg.Wait()
	return true
}

// wait blocks until the calls in flight at close have returned and the
// refills have ended.
func (p *pool) wait() {
	p.mu.Lock()
	ch := p.closing
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
	p.wg.Wait()
}

// Stats is a snapshot of an extension's instances.
type Stats struct {
	// Idle instances are warm and unused; Live counts idle, in use and
	// being created; InUse are serving a call.
	Idle, Live, InUse int
	// Warm is the number of idle instances kept (the manifest's poolSize,
	// at most Cap); idle instances above it are closed after IdleTTL.
	Warm int
	// Cap is the operator's cap on live instances; 0 means none.
	Cap int
	// Reserved are the units of Cap held by admitted runs and calls.
	Reserved int
	IdleTTL  time.Duration
}

// Stats reports the pool's state (for the status endpoint and tests).
func (x *Extension) Stats() Stats {
	p := x.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Idle: len(p.idle), Live: p.live, InUse: p.inUse, Warm: p.warm,
		Cap: p.max, Reserved: p.reserved, IdleTTL: p.idleTTL,
	}
}

// Reserve takes one instance of the extension's operator cap for an
// admitted run (runtime.Capacity). Without a cap it always succeeds and
// holds nothing. A full cap is BUSY (wire-core §8.2), a closing extension
// PROVIDER_EXTENSION_UNAVAILABLE.
func (x *Extension) Reserve() (runtime.Reservation, error) {
	r, err := x.pool.reserve()
	switch {
	case errors.Is(err, ErrBusy):
		return nil, protocol.Wrap(protocol.CodeBusy, fmt.Errorf("extension %s: %w", x.pin, err))
	case err != nil:
		return nil, protocol.Wrap(protocol.CodeProviderExtensionUnavail, fmt.Errorf("extension %s: %w", x.pin, err))
	}
	return r, nil
}

// Reserve makes a bound provider or tool set a runtime.Capacity: its runs
// reserve an instance of the extension it is bound to.
func (b *binding) Reserve() (runtime.Reservation, error) { return b.x.Reserve() }

// NotifyFree implements runtime.CapacityNotifier: notify is called, outside
// the pool's lock, whenever a unit of the cap is given back after Reserve
// refused one, so the admission queue can admit a run waiting for this
// extension. One notify per extension: the last registration wins (one
// engine, and its one scheduler, use an extension).
func (x *Extension) NotifyFree(notify func()) { x.pool.onFree.Store(&notify) }

// NotifyFree implements runtime.CapacityNotifier for the bound extension.
func (b *binding) NotifyFree(notify func()) { b.x.NotifyFree(notify) }
