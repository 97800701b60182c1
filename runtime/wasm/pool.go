package wasm

import (
	"context"
	"sync"
)

// pool bounds the instances of one extension. A token in sem is held for
// each call in flight; idle instances are kept warm and reused.
type pool struct {
	x    *Extension
	sem  chan struct{}
	base context.Context // background refills; done once the pool is closed
	stop context.CancelFunc

	mu     sync.Mutex
	idle   []*instance
	live   int // idle + in use + being created
	closed bool
	wg     sync.WaitGroup
}

func newPool(x *Extension, size int) *pool {
	base, stop := context.WithCancel(context.Background())
	return &pool{x: x, sem: make(chan struct{}, size), base: base, stop: stop}
}

// put adds a fresh instance created outside acquire (at Load).
func (p *pool) put(inst *instance) {
	p.mu.Lock()
	p.live++
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// acquire returns an idle instance, or creates one when fewer than the cap
// exist, or waits for one respecting ctx.
func (p *pool) acquire(ctx context.Context) (*instance, error) {
	select {
	case p.sem <- struct{}{}:
	default:
		select {
		case p.sem <- struct{}{}:
		case <-p.base.Done():
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.live++
	p.mu.Unlock()
	inst, err := p.x.newInstance(ctx)
	if err != nil {
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		<-p.sem
		return nil, err
	}
	return inst, nil
}

// release returns inst to the idle list or discards it; after a discard it
// starts a background refill when no idle instance is left, so the next
// call does not pay for instantiation.
func (p *pool) release(ctx context.Context, inst *instance, discard bool) {
	p.mu.Lock()
	if !discard && !p.closed {
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
		<-p.sem
		return
	}
	p.live--
	refill := !p.closed && len(p.idle) == 0 && p.live < cap(p.sem)
	if refill {
		p.live++
		p.wg.Add(1)
	}
	p.mu.Unlock()
	inst.close(context.WithoutCancel(ctx))
	<-p.sem
	if refill {
		go p.refill()
	}
}

func (p *pool) refill() {
	defer p.wg.Done()
	inst, err := p.x.newInstance(p.base)
	p.mu.Lock()
	defer p.mu.Unlock()
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
	p.idle = append(p.idle, inst)
}

// close refuses new calls, waits (up to ctx) for calls in flight and for
// refills, and closes every idle instance.
func (p *pool) close(ctx context.Context) {
	p.stop() // wakes waiting acquires and stops refills
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close(ctx)
	}
	for range cap(p.sem) {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
	p.wg.Wait()
}

// Stats is a snapshot of an extension's pool.
type Stats struct {
	Idle, Live, InUse, Cap int
}

// Stats reports the pool's state (for status pages and tests).
func (x *Extension) Stats() Stats {
	p := x.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Idle: len(p.idle), Live: p.live, InUse: len(p.sem), Cap: cap(p.sem)}
}
