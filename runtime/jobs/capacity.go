package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// counted is the value of a capacity counter: jobs (records, tombstones
// included) and, for the total, live bytes (records and event logs of
// jobs not yet tombstoned, plus liveReserve each).
type counted struct {
	Jobs  int   `json:"n"`
	Bytes int64 `json:"b,omitempty"`
}

// counter is one capacity counter shared by every host: a KV key changed
// only by compare-and-set. This process keeps the value and revision of
// its last read or write, so a change usually costs one write; a refused
// write (another host changed it) reads it again and retries. Changes
// that arrive while a write is under way are combined into the next one
// (a group commit): the counter is one key every submission touches, and
// one synced write per change would serialise them all.
type counter struct {
	key string

	mu      sync.Mutex
	v       counted
	rev     uint64
	fresh   bool // v and rev are this process's last view of the key
	writing bool // a leader is writing; new changes wait in waiting
	waiting []*change
	seen    atomic.Int64 // v.Bytes, for readers that must not wait
}

// change is one caller's f and its answer.
type change struct {
	f    func(*counted) error
	err  error
	done chan struct{}
}

// maxCounterRaces bounds the retries of a counter write that keeps
// losing to other hosts.
const maxCounterRaces = 64

// change applies f to the counter's current value and writes the result;
// f refusing (JOB_STORE_FULL) writes nothing for it. A refusal on a cached
// value is checked again on a fresh read: another host may have freed
// room.
func (c *counter) change(ctx context.Context, st durable.KV, f func(*counted) error) error {
	ch := &change{f: f, done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, ch)
	if c.writing {
		c.mu.Unlock()
		<-ch.done
		return ch.err
	}
	c.writing = true
	for len(c.waiting) > 0 {
		batch := c.waiting
		c.waiting = nil
		c.mu.Unlock()
		c.write(context.WithoutCancel(ctx), st, batch)
		for _, b := range batch {
			close(b.done)
		}
		c.mu.Lock()
	}
	c.writing = false
	c.mu.Unlock()
	<-ch.done
	return ch.err
}

// write applies a batch in order and writes the result once (only the
// leader calls it, so v, rev and fresh are its own meanwhile).
func (c *counter) write(ctx context.Context, st durable.KV, batch []*change) {
	for range maxCounterRaces {
		cached := c.fresh
		if !c.fresh {
			if err := c.load(ctx, st); err != nil {
				for _, b := range batch {
					b.err = err
				}
				return
			}
		}
		v := c.v
		refused := false
		for _, b := range batch {
			w := v
			if b.err = b.f(&w); b.err == nil {
				v = w
			} else {
				refused = true
			}
		}
		if refused && cached {
			c.fresh = false
			continue
		}
		if v == c.v && c.rev != 0 {
			return // nothing changed (every change refused)
		}
		b, _ := json.Marshal(v)
		var rev uint64
		var err error
		if c.rev == 0 {
			rev, err = st.Create(ctx, c.key, b)
		} else {
			rev, err = st.Update(ctx, c.key, b, c.rev)
		}
		if errors.Is(err, durable.ErrRevision) || errors.Is(err, durable.ErrExists) {
			c.fresh = false
			continue
		}
		if err != nil {
			c.fresh = false
			for _, b := range batch {
				b.err = storeError(err)
			}
			return
		}
		c.v, c.rev, c.fresh = v, rev, true
		c.seen.Store(v.Bytes)
		return
	}
	for _, b := range batch {
		pe := protocol.New(protocol.CodeJobStoreError)
		pe.Uncertain = true
		b.err = pe
	}
}

func (c *counter) load(ctx context.Context, st durable.KV) error {
	e, err := st.Get(ctx, c.key)
	switch {
	case errors.Is(err, durable.ErrNotFound):
		c.v, c.rev = counted{}, 0
	case err != nil:
		return storeError(err)
	default:
		var v counted
		if err := json.Unmarshal(e.Value, &v); err != nil {
			return protocol.Wrap(protocol.CodeJobStoreError, err)
		}
		c.v, c.rev = v, e.Revision
	}
	c.fresh = true
	c.seen.Store(c.v.Bytes)
	return nil
}

// bytes is the last known total of live bytes (for the per-event check;
// it may lag other hosts' changes, see doc). It is read without waiting
// for a write under way.
func (c *counter) bytes() int64 {
	return c.seen.Load()
}

// subjectCounter returns the subject's counter.
func (s *Service) subjectCounter(subject string) *counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.subjects[subject]
	if c == nil {
		c = &counter{key: subjectKey(subject)}
		s.subjects[subject] = c
	}
	return c
}

// reserve counts a new record against the capacity limits
// (JOB_STORE_FULL) before it is written: the subject's count and the total
// count and bytes, both at once (a refusal of one gives the other back).
func (s *Service) reserve(ctx context.Context, subject string, size int64) error {
	full := protocol.New(protocol.CodeJobStoreFull)
	sc := s.subjectCounter(subject)
	errs := parallel(func() error {
		return sc.change(ctx, s.st, func(v *counted) error {
			if v.Jobs >= s.o.MaxJobsPerSubject {
				return full
			}
			v.Jobs++
			return nil
		})
	}, func() error {
		return s.total.change(ctx, s.st, func(v *counted) error {
			if v.Jobs >= s.o.MaxJobs || v.Bytes+size+liveReserve > s.o.MaxBytes {
				return full
			}
			v.Jobs++
			v.Bytes += size + liveReserve
			return nil
		})
	})
	switch {
	case errs[0] == nil && errs[1] == nil:
		return nil
	case errs[0] == nil:
		s.unreserveSubject(ctx, sc)
		return errs[1]
	case errs[1] == nil:
		s.unreserveTotal(ctx, size)
	}
	return errs[0]
}

// parallel runs fns at once (independent store writes: one round trip
// instead of several) and returns their errors in order.
func parallel(fns ...func() error) []error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns[1:] {
		wg.Go(func() { errs[i+1] = f() })
	}
	errs[0] = fns[0]()
	wg.Wait()
	return errs
}

func (s *Service) unreserveTotal(ctx context.Context, size int64) {
	_ = s.total.change(context.WithoutCancel(ctx), s.st, func(v *counted) error {
		v.Jobs = max(v.Jobs-1, 0)
		v.Bytes = max(v.Bytes-size-liveReserve, 0)
		return nil
	})
}

func (s *Service) unreserveSubject(ctx context.Context, sc *counter) {
	_ = sc.change(context.WithoutCancel(ctx), s.st, func(v *counted) error {
		v.Jobs = max(v.Jobs-1, 0)
		return nil
	})
}

// unreserve gives back a reservation whose record was certainly not
// written.
func (s *Service) unreserve(ctx context.Context, subject string, size int64) {
	s.unreserveTotal(ctx, size)
	s.unreserveSubject(ctx, s.subjectCounter(subject))
}

// addLiveBytes moves the total's live bytes by d (a finished job's events,
// a tombstone's erased payload).
func (s *Service) addLiveBytes(ctx context.Context, d int64) {
	if d == 0 {
		return
	}
	err := s.total.change(context.WithoutCancel(ctx), s.st, func(v *counted) error {
		v.Bytes = max(v.Bytes+d, 0)
		return nil
	})
	if err != nil {
		s.log.Warn("job byte count not updated", "delta", d, "code", string(protocol.CodeOf(err)))
	}
}
