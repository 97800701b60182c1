// Package scheduling is the host's fair admission scheduler
// (wire-extensions §11.1, wire-core §8.2): run slots capped globally, per
// subject and per account, with an optional bounded waiting queue served
// round-robin across subjects. It implements runtime.Scheduler; the engine
// asks it for a slot and hands it the limits of its current configuration.
package scheduling

import (
	"sync"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// Scheduler is a runtime.Scheduler. The zero value is not usable; call
// New. It is safe for concurrent use.
//
// The invariant that makes it fair is kept under mu: no waiting run is
// ever admissible. Every change that can free room (a release, a new
// policy) runs admitLocked, which admits waiting runs rotation by rotation
// until none fits. So a new request that fits may start at once without
// overtaking anyone: whoever waits is blocked by a cap the newcomer does
// not share.
type Scheduler struct {
	mu        sync.Mutex
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
	state            slotState // guarded by s.mu
}

func (sl *slot) Admitted() <-chan struct{} { return sl.admitted }

func (sl *slot) Release() { sl.s.release(sl) }

// SetPolicy installs the limits of a (re)loaded configuration. Nothing is
// preempted and no waiting run is dropped, even when the queue bounds
// shrink below what waits: the bounds apply to new arrivals.
func (s *Scheduler) SetPolicy(p runtime.AdmissionPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pol = p
	s.admitLocked()
}

// Admit implements runtime.Scheduler.
func (s *Scheduler) Admit(subject, account string, queue bool) (runtime.Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := &slot{s: s, subject: subject, account: account, admitted: make(chan struct{})}
	if s.fitsLocked(subject, account) {
		s.takeLocked(sl)
		return sl, nil
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

// Admissible implements runtime.Scheduler.
func (s *Scheduler) Admissible(subject, account string, queue bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fitsLocked(subject, account) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return runtime.SchedulerStats{Running: s.running, Queued: s.queued, Subjects: len(s.bySubject)}
}

// fitsLocked says whether a run of subject on account may hold a slot now:
// the global cap, the subject's cap (its override or the default) and the
// account's (its override, the default, or none) all have room.
func (s *Scheduler) fitsLocked(subject, account string) bool {
	if s.running >= s.pol.MaxConcurrent {
		return false
	}
	limit := s.pol.MaxPerSubject
	if v, ok := s.pol.Subjects[subject]; ok {
		limit = v
	}
	if s.bySubject[subject] >= limit {
		return false
	}
	if account == "" {
		return true
	}
	limit = s.pol.MaxPerAccount
	if v, ok := s.pol.Accounts[account]; ok {
		limit = v
	}
	return limit <= 0 || s.byAccount[account] < limit
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
	s.mu.Lock()
	defer s.mu.Unlock()
	switch sl.state {
	case stateWaiting:
		s.dequeueLocked(sl)
	case stateAdmitted:
		s.running--
		decr(s.bySubject, sl.subject)
		if sl.account != "" {
			decr(s.byAccount, sl.account)
		}
		s.admitLocked()
	}
	sl.state = stateReleased
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
// waiting run that fits (one blocked by its account does not hold back
// the subject's runs on other accounts).
func (s *Scheduler) admitLocked() {
	for len(s.ring) > 0 && s.running < s.pol.MaxConcurrent {
		admitted := false
		for i := 0; i < len(s.ring); i++ {
			idx := (s.next + i) % len(s.ring)
			q := s.ring[idx]
			w := s.firstFitLocked(q)
			if w < 0 {
				continue
			}
			sl := q.waiting[w]
			q.waiting = append(q.waiting[:w], q.waiting[w+1:]...)
			s.queued--
			s.takeLocked(sl)
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

func (s *Scheduler) firstFitLocked(q *subjectQueue) int {
	for i, w := range q.waiting {
		if s.fitsLocked(w.subject, w.account) {
			return i
		}
		if w.account == "" {
			// The subject or host cap blocks every later run of
			// the subject as well.
			return -1
		}
	}
	return -1
}
