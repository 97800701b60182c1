// Package scheduling is the host's fair admission scheduler
// (wire-extensions §11.1, wire-core §8.2): run slots capped globally, per
// subject and per account, with an optional bounded waiting queue served
// round-robin across subjects. It implements runtime.CapacityScheduler:
// besides a slot, a run is admitted only together with one unit of every
// capped extension it needs (DESIGN.md §3), so a run waiting for a full
// extension waits in the queue, before any step, and never after it was
// admitted.
package scheduling

import (
	"sync"
	"sync/atomic"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// Scheduler is a runtime.Scheduler. The zero value is not usable; call
// New. It is safe for concurrent use.
//
// The invariant that makes it fair is kept under mu: no waiting run is
// ever admissible. Every change that can free room (a release, a new
// policy, a unit of a capped extension given back: Recheck) runs
// admitLocked, which admits waiting runs rotation by rotation until none
// fits. So a new request that fits may start at once without overtaking
// anyone: whoever waits is blocked by a cap or an extension the newcomer
// does not share.
//
// A waiting run is blocked by the host's cap (then nothing is admitted),
// by its subject's cap (then none of the subject's runs is), or by its
// account's cap or a full extension it needs: then the subject's later
// runs that fit are admitted before it, in arrival order, and subjects
// whose every waiting run is blocked are passed over in the rotation and
// keep their place in the ring. So a full extension holds back only the
// runs that need it — no head-of-line blocking across resources — and a
// subject passed over is served at its first turn once a run of it fits.
type Scheduler struct {
	mu sync.Mutex
	// recheck asks the holder of mu to run admitLocked once more before
	// it lets go (Recheck: a capped extension freed a unit while mu was
	// held, possibly by the very admission pass that asked a full one).
	recheck   atomic.Bool
	pol       runtime.AdmissionPolicy
	running   int
	bySubject map[string]int
	byAccount map[string]int

	queued int
	// queues holds each subject's waiting slots in arrival order; ring
	// is the rotation of subjects that have some, and next the index in
	// ring of the subject served next.
	queues map[string]*subjectQueue
	ring   []*subjectQueue
	next   int
}

type subjectQueue struct {
	subject string
	waiting []*slot
}

// New returns a scheduler with the wire defaults (32 runs, 4 per subject,
// no queue) until the engine sets its policy.
func New() *Scheduler {
	return &Scheduler{
		pol: runtime.AdmissionPolicy{
			MaxConcurrent: runtime.DefaultMaxConcurrent,
			MaxPerSubject: runtime.DefaultMaxPerSubject,
		},
		bySubject: map[string]int{},
		byAccount: map[string]int{},
		queues:    map[string]*subjectQueue{},
	}
}

type slotState uint8

const (
	stateWaiting slotState = iota
	stateAdmitted
	stateReleased
)

type slot struct {
	s                *Scheduler
	subject, account string
	admitted         chan struct{}
	// reserve takes the run's extension units (nil: it needs none); it is
	// called under s.mu, at the admission attempt that takes the slot.
	reserve func() ([]runtime.Reservation, error)
	// Guarded by s.mu.
	state slotState
	rs    []runtime.Reservation // taken with the slot, until Reservations hands them over
	rerr  error                 // reserve's failure other than BUSY: the run fails with it
}

func (sl *slot) Admitted() <-chan struct{} { return sl.admitted }

func (sl *slot) Release() { sl.s.release(sl) }

// Reservations implements runtime.ReservedSlot: the extension units taken
// with the slot, handed over once (Release gives back those never
// collected: a run cancelled while its admission was under way).
func (sl *slot) Reservations() ([]runtime.Reservation, error) {
	sl.s.lock()
	defer sl.s.unlock()
	rs, err := sl.rs, sl.rerr
	sl.rs, sl.rerr = nil, nil
	return rs, err
}

// SetPolicy installs the limits of a (re)loaded configuration. Nothing is
// preempted and no waiting run is dropped, even when the queue bounds
// shrink below what waits: the bounds apply to new arrivals.
func (s *Scheduler) SetPolicy(p runtime.AdmissionPolicy) {
	s.lock()
	defer s.unlock()
	s.pol = p
	s.admitLocked()
}

// lock and unlock guard the scheduler's state. unlock first serves a
// Recheck that arrived while mu was held, so a unit freed under the lock
// (by the holder itself, or by a call ending elsewhere) is never missed:
// Recheck either takes mu itself or leaves the flag to a holder, which
// looks at it again after letting go.
func (s *Scheduler) lock() {
	s.mu.Lock()
	if s.recheck.Swap(false) {
		s.admitLocked()
	}
}

func (s *Scheduler) unlock() {
	for {
		if s.recheck.Swap(false) {
			s.admitLocked()
			continue
		}
		s.mu.Unlock()
		if !s.recheck.Load() || !s.mu.TryLock() {
			return
		}
	}
}

// Recheck implements runtime.CapacityScheduler: a capped extension has a
// unit again that it refused to a waiting run, so the waiting runs are
// tried again. It never blocks on the scheduler: while another goroutine
// holds it, that goroutine does the work before it lets go.
func (s *Scheduler) Recheck() {
	s.recheck.Store(true)
	if s.mu.TryLock() {
		s.unlock()
	}
}

// Admit implements runtime.Scheduler: AdmitWith for a run that needs no
// extension units.
func (s *Scheduler) Admit(subject, account string, queue bool) (runtime.Slot, error) {
	return s.AdmitWith(subject, account, queue, nil)
}

// AdmitWith implements runtime.CapacityScheduler. A run that fits the caps
// takes its extension units at once (reserve); if an extension is full
// (reserve answers BUSY) it waits like a run over a cap — when it may
// queue and the queue has room — and otherwise is refused BUSY. Another
// failure of reserve refuses the run with that error.
func (s *Scheduler) AdmitWith(subject, account string, queue bool, reserve func() ([]runtime.Reservation, error)) (runtime.Slot, error) {
	s.lock()
	defer s.unlock()
	sl := &slot{s: s, subject: subject, account: account, admitted: make(chan struct{}), reserve: reserve}
	if s.fitsLocked(subject, account) == fitOK {
		switch ok, err := s.tryTakeLocked(sl, false); {
		case ok:
			return sl, nil
		case err != nil:
			return nil, err
		}
	}
	if err := s.refusalLocked(subject, queue); err != nil {
		return nil, err
	}
	q := s.queues[subject]
	if q == nil {
		q = &subjectQueue{subject: subject}
		s.queues[subject] = q
		// A subject new to the rotation is served last in it: just
		// before the one served next.
		s.ring = append(s.ring, nil)
		copy(s.ring[s.next+1:], s.ring[s.next:])
		s.ring[s.next] = q
		s.next++
	}
	q.waiting = append(q.waiting, sl)
	s.queued++
	return sl, nil
}

// Admissible implements runtime.Scheduler: the answer of Admit (the caps
// and the queue bounds; no extension is asked, since what asks — an
// idempotent replay — uses none).
func (s *Scheduler) Admissible(subject, account string, queue bool) error {
	s.lock()
	defer s.unlock()
	if s.fitsLocked(subject, account) == fitOK {
		return nil
	}
	return s.refusalLocked(subject, queue)
}

// refusalLocked is the answer for a run that does not fit now: nil when
// it may wait, else BUSY (no queue, or the caller does not queue) or
// QUEUE_FULL.
func (s *Scheduler) refusalLocked(subject string, queue bool) error {
	if !queue || s.pol.QueueTotal <= 0 {
		return protocol.New(protocol.CodeBusy)
	}
	var mine int
	if q := s.queues[subject]; q != nil {
		mine = len(q.waiting)
	}
	if s.queued >= s.pol.QueueTotal || mine >= s.pol.QueuePerSubject {
		return protocol.New(protocol.CodeQueueFull)
	}
	return nil
}

// Stats implements runtime.Scheduler.
func (s *Scheduler) Stats() runtime.SchedulerStats {
	s.lock()
	defer s.unlock()
	return runtime.SchedulerStats{Running: s.running, Queued: s.queued, Subjects: len(s.bySubject)}
}

// fit is why a run may not hold a slot now, from the widest cap down.
type fit uint8

const (
	fitOK          fit = iota
	fitHostFull        // no run fits
	fitSubjectFull     // no run of the subject fits
	fitBlocked         // this run's account (or an extension it needs) is full
)

// fitsLocked says whether a run of subject on account may hold a slot now:
// the global cap, the subject's cap (its override or the default) and the
// account's (its override, the default, or none) all have room.
func (s *Scheduler) fitsLocked(subject, account string) fit {
	if s.running >= s.pol.MaxConcurrent {
		return fitHostFull
	}
	limit := s.pol.MaxPerSubject
	if v, ok := s.pol.Subjects[subject]; ok {
		limit = v
	}
	if s.bySubject[subject] >= limit {
		return fitSubjectFull
	}
	if account == "" {
		return fitOK
	}
	limit = s.pol.MaxPerAccount
	if v, ok := s.pol.Accounts[account]; ok {
		limit = v
	}
	if limit > 0 && s.byAccount[account] >= limit {
		return fitBlocked
	}
	return fitOK
}

// tryTakeLocked admits sl, which fits the caps, if its extension units can
// be had: false (and a nil error) when one is full (BUSY), so the run
// stays or becomes a waiting one. Another failure of reserve: for a new
// request (waiting false) it is returned as the refusal; for a waiting run
// the slot is taken with it (sl.rerr), and the run, already accepted, ends
// with it once it sees its admission.
func (s *Scheduler) tryTakeLocked(sl *slot, waiting bool) (bool, error) {
	if sl.reserve != nil {
		rs, err := sl.reserve()
		switch {
		case protocol.CodeOf(err) == protocol.CodeBusy:
			return false, nil
		case err != nil && !waiting:
			return false, err
		}
		sl.rs, sl.rerr = rs, err
	}
	s.takeLocked(sl)
	return true, nil
}

func (s *Scheduler) takeLocked(sl *slot) {
	s.running++
	s.bySubject[sl.subject]++
	if sl.account != "" {
		s.byAccount[sl.account]++
	}
	sl.state = stateAdmitted
	close(sl.admitted)
}

func (s *Scheduler) release(sl *slot) {
	s.lock()
	defer s.unlock()
	switch sl.state {
	case stateWaiting:
		s.dequeueLocked(sl)
	case stateAdmitted:
		s.releaseAdmittedLocked(sl)
		s.admitLocked()
	}
	sl.state = stateReleased
}

// releaseAdmittedLocked gives back a held slot and the extension units
// nobody collected. A unit given back here asks for a Recheck, which
// unlock serves.
func (s *Scheduler) releaseAdmittedLocked(sl *slot) {
	for _, r := range sl.rs {
		r.Release()
	}
	sl.rs = nil
	s.running--
	decr(s.bySubject, sl.subject)
	if sl.account != "" {
		decr(s.byAccount, sl.account)
	}
}

func decr(m map[string]int, k string) {
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// dequeueLocked removes a waiting slot (its run was cancelled).
func (s *Scheduler) dequeueLocked(sl *slot) {
	q := s.queues[sl.subject]
	for i, w := range q.waiting {
		if w == sl {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			break
		}
	}
	s.queued--
	if len(q.waiting) == 0 {
		s.dropLocked(q)
	}
}

// dropLocked takes a subject without waiting runs out of the rotation,
// keeping next on the same successor.
func (s *Scheduler) dropLocked(q *subjectQueue) {
	delete(s.queues, q.subject)
	for i, r := range s.ring {
		if r != q {
			continue
		}
		s.ring = append(s.ring[:i], s.ring[i+1:]...)
		if i < s.next {
			s.next--
		}
		break
	}
	if s.next >= len(s.ring) {
		s.next = 0
	}
}

// admitLocked admits waiting runs while any fits: subjects in rotation,
// one admission per subject per turn, and within a subject the earliest
// waiting run that fits (one blocked by its account or a full extension
// does not hold back the subject's runs on other accounts or extensions).
//
// Each pass asks the extensions of blocked runs again (their reserve), so
// a pass costs up to one reserve per waiting run: the queue bounds
// (100,000 at most, 64 in the dev configuration) bound it.
func (s *Scheduler) admitLocked() {
	for len(s.ring) > 0 && s.running < s.pol.MaxConcurrent {
		admitted := false
		for i := 0; i < len(s.ring); i++ {
			idx := (s.next + i) % len(s.ring)
			q := s.ring[idx]
			w, stop := s.firstFitLocked(q)
			if stop {
				return
			}
			if w < 0 {
				continue
			}
			q.waiting = append(q.waiting[:w], q.waiting[w+1:]...)
			s.queued--
			s.next = idx + 1
			if len(q.waiting) == 0 {
				s.dropLocked(q)
			} else if s.next >= len(s.ring) {
				s.next = 0
			}
			admitted = true
			break
		}
		if !admitted {
			return
		}
	}
}

// firstFitLocked admits (takes the slot and the extension units of) the
// earliest run of q that fits and returns its index; -1 when none does.
// stop: the host is full, no run of any subject fits.
func (s *Scheduler) firstFitLocked(q *subjectQueue) (int, bool) {
	for i, w := range q.waiting {
		switch s.fitsLocked(w.subject, w.account) {
		case fitHostFull:
			return -1, true
		case fitSubjectFull:
			// The subject's cap blocks every later run of it too.
			return -1, false
		case fitBlocked:
			continue
		}
		if ok, _ := s.tryTakeLocked(w, true); ok {
			return i, false
		}
	}
	return -1, false
}
