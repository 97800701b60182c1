package durable

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Presence says that one process is alive on a shared store: a lease
// named "presence/v1/<id>" that the process renews every ttl/3. When
// several hosts share a backend, a feature that finds work marked as
// another process's (a session turn, an idempotency claim) asks Alive
// whether that process still runs: if it does, the work is in progress
// there; if not, the process died and the work is recovered as after a
// crash. On one host's own store every other owner is a dead process, so
// the same code serves both.
//
// A host whose renewals fail for a whole ttl (a pause, a store outage)
// is taken for dead by the others; Presence then takes its lease again
// under the same id once it can. What others recovered meanwhile they
// changed by compare-and-set, which fences the host's own later writes.
type Presence struct {
	l   Leases
	id  string
	ttl time.Duration

	mu    sync.Mutex
	token uint64
	stop  chan struct{}
	done  chan struct{}
}

// PresencePrefix is where presence leases live.
const PresencePrefix = "presence/v1/"

// StartPresence announces id (a random per-process id made of key
// characters) on l and renews it until Stop.
func StartPresence(ctx context.Context, l Leases, id string, ttl time.Duration) (*Presence, error) {
	if ttl <= 0 {
		return nil, errors.New("durable: presence ttl must be positive")
	}
	le, err := l.Acquire(ctx, PresencePrefix+id, id, ttl)
	if err != nil {
		return nil, err
	}
	p := &Presence{l: l, id: id, ttl: ttl, token: le.Token, stop: make(chan struct{}), done: make(chan struct{})}
	go p.renew()
	return p, nil
}

// ID is the process's id: the owner features write into their records.
func (p *Presence) ID() string { return p.id }

func (p *Presence) renew() {
	defer close(p.done)
	t := time.NewTicker(p.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.ttl/3)
		p.mu.Lock()
		tok := p.token
		p.mu.Unlock()
		_, err := p.l.Renew(ctx, PresencePrefix+p.id, tok, p.ttl)
		if errors.Is(err, ErrFenced) {
			// Taken for dead meanwhile: announce again.
			if le, aerr := p.l.Acquire(ctx, PresencePrefix+p.id, p.id, p.ttl); aerr == nil {
				p.mu.Lock()
				p.token = le.Token
				p.mu.Unlock()
			}
		}
		cancel()
	}
}

// Alive reports whether the process id holds its presence: true for this
// process itself and for one whose lease is held and not expired. An id
// that never announced itself (an older process, a host on its own
// store) is not alive. A store failure is returned as such: the caller
// must not recover another process's work on a guess.
func (p *Presence) Alive(ctx context.Context, id string) (bool, error) {
	if id == p.id {
		return true, nil
	}
	if CheckKey(PresencePrefix+id) != nil {
		return false, nil
	}
	// Acquiring the lease is the check: it is refused (ErrHeld) while
	// the owner holds it; granted, the owner is gone, and the probe gives
	// it back at once.
	le, err := p.l.Acquire(ctx, PresencePrefix+id, "probe-"+p.id, p.ttl)
	if errors.Is(err, ErrHeld) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	_ = p.l.Release(ctx, PresencePrefix+id, le.Token)
	return false, nil
}

// Stop ends the renewals and releases the lease: the process is gone.
func (p *Presence) Stop(ctx context.Context) {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	tok := p.token
	p.mu.Unlock()
	_ = p.l.Release(ctx, PresencePrefix+p.id, tok)
}
