package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// counted is the value of one host's capacity key: jobs (records,
// tombstones included) and, for the total, live bytes (records and event
// logs of jobs not yet tombstoned, plus liveReserve each). A host's own
// value may go below zero (it tombstoned jobs another host submitted);
// the sum over hosts is the count.
type counted struct {
	Jobs  int   `json:"n"`
	Bytes int64 `json:"b,omitempty"`
}

// counter is one capacity count shared by every host, kept as one key per
// host under a prefix (prefix+<owner hash>): each host writes only its own
// key, so hosts never contend on a hot key, and the count is the sum of
// the keys. The check of a change sums this host's exact value and the
// other hosts' values as last listed (at most maxAge old, listed again
// before a refusal): hosts may together admit past a limit by what the
// others admitted since the last listing — at most listAge's admissions
// per other host (see doc). Changes that arrive while a write
// is under way are combined into the next one (a group commit): one
// synced write per submission would serialise them.
type counter struct {
	key    string // this host's key
	prefix string // every host's keys
	maxAge time.Duration

	mu      sync.Mutex
	writing bool // a leader is writing; new changes wait in waiting
	waiting []*change

	// The leader's own (only it touches them while writing).
	v        counted
	rev      uint64
	fresh    bool // v and rev are this process's last view of its key
	others   counted
	listedAt time.Time

	seen atomic.Int64 // v.Bytes + others.Bytes, for readers that must not wait
}

func newCounter(prefix, owner string, maxAge time.Duration) *counter {
	return &counter{prefix: prefix, key: prefix + ownerKey(owner), maxAge: maxAge}
}

// ownerKey is a worker's name as one key level.
func ownerKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:16])
}

// change is one caller's f and its answer.
type change struct {
	f    func(own *counted, others counted, listed bool) error
	err  error
	done chan struct{}
}

// errStale is a change's answer when it may only be decided on the other
// hosts' values listed now: the count is near its limit (nearJobs,
// nearBytes).
var errStale = errors.New("jobs: capacity near its limit: list again")

// nearJobs and nearBytes are the room left below a limit under which a
// reservation checks the other hosts' values listed at that moment, not
// as cached: so a limit is exact at its edge unless hosts admit within
// the same round trip, and far from it a reservation costs no listing.
func nearJobs(limit int) int { return max(limit/16, 64) }

func nearBytes(limit int64) int64 { return max(limit/16, 1<<20) }

// maxCounterRaces bounds the retries of a counter write that keeps
// losing (a restarted host under the same name still writing).
const maxCounterRaces = 64

// change applies f to this host's value (others: the other hosts' sum)
// and writes the result; f refusing (JOB_STORE_FULL) writes nothing for
// it. A refusal is checked again on fresh reads: another host may have
// freed room, or this host's view may be old.
func (c *counter) change(ctx context.Context, st durable.KV, f func(own *counted, others counted, listed bool) error) error {
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
// leader calls it).
func (c *counter) write(ctx context.Context, st durable.KV, batch []*change) {
	fail := func(err error) {
		for _, b := range batch {
			b.err = err
		}
	}
	for try := range maxCounterRaces {
		rechecked, listed := try > 0, false
		if !c.fresh || time.Since(c.listedAt) > c.maxAge {
			if err := c.load(ctx, st); err != nil {
				fail(err)
				return
			}
			rechecked, listed = true, true
		}
		v := c.v
		refused, stale := false, false
		for _, b := range batch {
			w := v
			switch b.err = b.f(&w, c.others, listed); {
			case b.err == nil:
				v = w
			case errors.Is(b.err, errStale):
				stale = true
			default:
				refused = true
			}
		}
		if stale || refused && !rechecked {
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
			fail(storeError(err))
			return
		}
		c.v, c.rev, c.fresh = v, rev, true
		c.seen.Store(v.Bytes + c.others.Bytes)
		return
	}
	pe := protocol.New(protocol.CodeJobStoreError)
	pe.Uncertain = true
	fail(pe)
}

// load lists every host's key: this host's value and revision, and the
// others' sum.
func (c *counter) load(ctx context.Context, st durable.KV) error {
	es, err := st.List(ctx, c.prefix, "", 0)
	if err != nil {
		return storeError(err)
	}
	c.v, c.rev, c.others = counted{}, 0, counted{}
	for _, e := range es {
		var v counted
		if err := json.Unmarshal(e.Value, &v); err != nil {
			return protocol.Wrap(protocol.CodeJobStoreError, err)
		}
		if e.Key == c.key {
			c.v, c.rev = v, e.Revision
			continue
		}
		c.others.Jobs += v.Jobs
		c.others.Bytes += v.Bytes
	}
	c.fresh, c.listedAt = true, time.Now()
	c.seen.Store(c.v.Bytes + c.others.Bytes)
	return nil
}

// bytes is the last known total of live bytes (for the per-event check;
// it may lag other hosts' changes, see doc). It is read without waiting
// for a write under way.
func (c *counter) bytes() int64 {
	return c.seen.Load()
}

// listAge is how old the other hosts' counts may be: a listing costs the
// store a walk of its keys, so not more often than every listInterval.
func (s *Service) listAge() time.Duration { return max(s.o.PollInterval, listInterval) }

// listInterval bounds how often a worker lists what other hosts change
// (capacity counts, cancel signals).
const listInterval = 250 * time.Millisecond

// subjectCounter returns the subject's counter.
func (s *Service) subjectCounter(subject string) *counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.subjects[subject]
	if c == nil {
		c = newCounter(subjectPrefix(subject), s.owner, s.listAge())
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
		return sc.change(ctx, s.st, func(v *counted, others counted, listed bool) error {
			room := s.o.MaxJobsPerSubject - v.Jobs - others.Jobs
			switch {
			case room <= 0:
				return full
			case room <= nearJobs(s.o.MaxJobsPerSubject) && !listed:
				return errStale
			}
			v.Jobs++
			return nil
		})
	}, func() error {
		return s.total.change(ctx, s.st, func(v *counted, others counted, listed bool) error {
			room := s.o.MaxJobs - v.Jobs - others.Jobs
			bytes := s.o.MaxBytes - v.Bytes - others.Bytes - size - liveReserve
			switch {
			case room <= 0 || bytes < 0:
				return full
			case (room <= nearJobs(s.o.MaxJobs) || bytes < nearBytes(s.o.MaxBytes)) && !listed:
				return errStale
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
	_ = s.total.change(context.WithoutCancel(ctx), s.st, func(v *counted, _ counted, _ bool) error {
		v.Jobs--
		v.Bytes -= size + liveReserve
		return nil
	})
}

func (s *Service) unreserveSubject(ctx context.Context, sc *counter) {
	_ = sc.change(context.WithoutCancel(ctx), s.st, func(v *counted, _ counted, _ bool) error {
		v.Jobs--
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
	err := s.total.change(context.WithoutCancel(ctx), s.st, func(v *counted, _ counted, _ bool) error {
		v.Bytes += d
		return nil
	})
	if err != nil {
		s.log.Warn("job byte count not updated", "delta", d, "code", string(protocol.CodeOf(err)))
	}
}
