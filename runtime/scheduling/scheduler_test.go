package scheduling

import (
	"fmt"
	"sync"
	"testing"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

func newSched(p runtime.AdmissionPolicy) *Scheduler {
	s := New()
	s.SetPolicy(p)
	return s
}

func admitted(sl runtime.Slot) bool {
	select {
	case <-sl.Admitted():
		return true
	default:
		return false
	}
}

func mustAdmit(t *testing.T, s *Scheduler, subject, account string, queue bool) runtime.Slot {
	t.Helper()
	sl, err := s.Admit(subject, account, queue)
	if err != nil {
		t.Fatalf("Admit(%s, %s): %v", subject, account, err)
	}
	return sl
}

func wantCode(t *testing.T, err error, code protocol.Code) {
	t.Helper()
	if protocol.CodeOf(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// TestNoQueueBusy: without a queue, every cap at its edge answers BUSY,
// and a queuing request is refused the same way.
func TestNoQueueBusy(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 3, MaxPerSubject: 2})
	a1 := mustAdmit(t, s, "a", "", true)
	mustAdmit(t, s, "a", "", true)
	_, err := s.Admit("a", "", true)
	wantCode(t, err, protocol.CodeBusy)
	mustAdmit(t, s, "b", "", false)
	_, err = s.Admit("c", "", true)
	wantCode(t, err, protocol.CodeBusy)
	wantCode(t, s.Admissible("c", "", true), protocol.CodeBusy)
	a1.Release()
	if err := s.Admissible("c", "", false); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	mustAdmit(t, s, "c", "", false)
}

// TestQueueBounds: QUEUE_FULL exactly at queue_per_subject and at
// queue_total; a non-queuing request is BUSY even with room in the queue.
func TestQueueBounds(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 1, MaxPerSubject: 1, QueueTotal: 3, QueuePerSubject: 2})
	mustAdmit(t, s, "a", "", true)
	_, err := s.Admit("b", "", false)
	wantCode(t, err, protocol.CodeBusy)
	w1 := mustAdmit(t, s, "a", "", true)
	mustAdmit(t, s, "a", "", true)
	_, err = s.Admit("a", "", true)
	wantCode(t, err, protocol.CodeQueueFull)
	mustAdmit(t, s, "b", "", true)
	_, err = s.Admit("c", "", true)
	wantCode(t, err, protocol.CodeQueueFull)
	wantCode(t, s.Admissible("c", "", true), protocol.CodeQueueFull)
	if st := s.Stats(); st.Queued != 3 || st.Running != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Leaving the queue frees the place at once.
	w1.Release()
	mustAdmit(t, s, "c", "", true)
	if admitted(w1) {
		t.Fatal("a released waiting slot was admitted")
	}
}

// TestRoundRobin: with one slot, subject a queueing 10 runs and b one
// later, b is admitted second; admissions alternate over a mixed load.
func TestRoundRobin(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 1, MaxPerSubject: 1, QueueTotal: 1000, QueuePerSubject: 100})
	cur := mustAdmit(t, s, "a", "", true)
	type entry struct {
		name string
		sl   runtime.Slot
	}
	var waiting []entry
	for i := range 10 {
		waiting = append(waiting, entry{fmt.Sprintf("a%d", i), mustAdmit(t, s, "a", "", true)})
	}
	waiting = append(waiting, entry{"b0", mustAdmit(t, s, "b", "", true)})
	var order []string
	for len(order) < len(waiting) {
		cur.Release()
		cur = nil
		for _, e := range waiting {
			if admitted(e.sl) && !contains(order, e.name) {
				order = append(order, e.name)
				cur = e.sl
			}
		}
		if cur == nil {
			t.Fatalf("nothing admitted after %v", order)
		}
	}
	if order[0] != "a0" || order[1] != "b0" || order[2] != "a1" {
		t.Fatalf("admission order %v: b0 must follow a0", order)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestFairnessMixed: 4 subjects queue 50 runs each in a burst on a host
// with 2 slots; over the 200 admissions no subject is ever more than one
// admission ahead of another that still has runs waiting.
func TestFairnessMixed(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 2, MaxPerSubject: 2, QueueTotal: 1000, QueuePerSubject: 100})
	subjects := []string{"s0", "s1", "s2", "s3"}
	// Two runs of another subject hold the slots while the load arrives.
	z1, z2 := mustAdmit(t, s, "z", "", true), mustAdmit(t, s, "z", "", true)
	var slots []runtime.Slot
	var owner []int
	// Arrival is uneven: s0 submits all its runs first.
	for si := range subjects {
		for range 50 {
			slots = append(slots, mustAdmit(t, s, subjects[si], "", true))
			owner = append(owner, si)
		}
	}
	seen := make([]bool, len(slots))
	count := make([]int, len(subjects))
	left := []int{50, 50, 50, 50}
	var running []int
	record := func() {
		for i, sl := range slots {
			if !seen[i] && admitted(sl) {
				seen[i] = true
				count[owner[i]]++
				left[owner[i]]--
				running = append(running, i)
			}
		}
	}
	z1.Release()
	z2.Release()
	record()
	for total := 0; total < 200; {
		total = 0
		for _, c := range count {
			total += c
		}
		// Every subject with runs still waiting has had at least
		// (max over subjects) − 1 admissions.
		hi := 0
		for _, c := range count {
			hi = max(hi, c)
		}
		for si, c := range count {
			if left[si] > 0 && hi-c > 1 {
				t.Fatalf("after %d admissions: counts %v (subject %d behind by %d)", total, count, si, hi-c)
			}
		}
		if len(running) == 0 {
			break
		}
		slots[running[0]].Release()
		running = running[1:]
		record()
	}
	for si, c := range count {
		if c != 50 {
			t.Fatalf("subject %d admitted %d runs, want 50", si, c)
		}
	}
}

// TestAccountLimits: instances bound to one account share its cap, an
// account override replaces the default, a blocked account does not hold
// back the same subject's runs on another account, and a subject override
// replaces the per-subject default while the global cap still holds.
func TestAccountLimits(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{
		MaxConcurrent: 4, MaxPerSubject: 1, MaxPerAccount: 1,
		Subjects: map[string]int{"team": 4}, Accounts: map[string]int{"big": 2},
		QueueTotal: 10, QueuePerSubject: 10,
	})
	x1 := mustAdmit(t, s, "team", "x", true)
	x2 := mustAdmit(t, s, "team", "x", true) // waits: account x holds 1
	if admitted(x2) {
		t.Fatal("account cap not applied")
	}
	big1 := mustAdmit(t, s, "team", "big", true)
	big2 := mustAdmit(t, s, "team", "big", true)
	big3 := mustAdmit(t, s, "team", "big", true)
	if !admitted(big1) || !admitted(big2) || admitted(big3) {
		t.Fatal("account override 2 not applied")
	}
	// 3 running; the global cap (4) still holds over the subject's 4.
	other := mustAdmit(t, s, "other", "", true)
	if !admitted(other) {
		t.Fatal("unrelated subject blocked")
	}
	y := mustAdmit(t, s, "team", "y", true) // host full now: waits
	if admitted(y) {
		t.Fatal("global cap not applied")
	}
	other.Release() // frees one slot: x2 and big3 are blocked by their accounts, y fits
	if !admitted(y) || admitted(x2) || admitted(big3) {
		t.Fatal("a blocked account held back another account")
	}
	x1.Release()
	if !admitted(x2) {
		t.Fatal("x2 not admitted after its account freed")
	}
}

// TestSetPolicy: raising a limit admits waiting runs at once; lowering it
// preempts nothing and drops no waiting run.
func TestSetPolicy(t *testing.T) {
	pol := runtime.AdmissionPolicy{MaxConcurrent: 1, MaxPerSubject: 1, QueueTotal: 4, QueuePerSubject: 4}
	s := newSched(pol)
	a := mustAdmit(t, s, "a", "", true)
	b := mustAdmit(t, s, "b", "", true)
	c := mustAdmit(t, s, "c", "", true)
	pol.MaxConcurrent = 2
	s.SetPolicy(pol)
	if !admitted(b) || admitted(c) {
		t.Fatal("raised cap did not admit the next waiting run")
	}
	pol.MaxConcurrent, pol.QueueTotal, pol.QueuePerSubject = 1, 1, 1
	s.SetPolicy(pol)
	if st := s.Stats(); st.Running != 2 || st.Queued != 1 {
		t.Fatalf("stats %+v after lowering", st)
	}
	a.Release()
	if admitted(c) {
		t.Fatal("admitted over the lowered cap")
	}
	b.Release()
	if !admitted(c) {
		t.Fatal("waiting run lost after lowering the limits")
	}
	c.Release()
	if st := s.Stats(); st != (runtime.SchedulerStats{}) {
		t.Fatalf("stats %+v after all released", st)
	}
}

// TestBudgetsLookup: the subject's table replaces the default, an
// account's table adds to it, a run without an account gets none.
func TestBudgetsLookup(t *testing.T) {
	def := runtime.Budget{MaxTokens: 100}
	b := &Budgets{
		Default:  &def,
		Subjects: map[string]runtime.Budget{"vip": {MaxTokens: 1000}},
		Accounts: map[string]runtime.Budget{"acct": {MaxCostUSD: 2, RejectUnknown: true}},
	}
	for _, tc := range []struct {
		subject, account string
		want             []runtime.Budget
	}{
		{"anyone", "", []runtime.Budget{def}},
		{"anyone", "other", []runtime.Budget{def}},
		{"vip", "", []runtime.Budget{{MaxTokens: 1000}}},
		{"vip", "acct", []runtime.Budget{{MaxTokens: 1000}, {MaxCostUSD: 2, RejectUnknown: true}}},
	} {
		got := b.Budgets(tc.subject, tc.account)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s/%s: %v, want %v", tc.subject, tc.account, got, tc.want)
		}
	}
	if got := (&Budgets{}).Budgets("x", "y"); len(got) != 0 {
		t.Errorf("empty policy: %v", got)
	}
}

// fakeCap is a capped extension: n units, BUSY when they are taken, and a
// notify call (outside its lock) when a unit comes back after a refusal,
// as runtime/wasm's pool does.
type fakeCap struct {
	mu      sync.Mutex
	n, used int
	refused bool
	err     error // a failure other than BUSY (a closed extension)
	notify  func()
}

type fakeUnit struct {
	c    *fakeCap
	once sync.Once
}

func (u *fakeUnit) Release() { u.once.Do(u.c.give) }

func (c *fakeCap) Reserve() (runtime.Reservation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if c.used >= c.n {
		c.refused = true
		return nil, protocol.New(protocol.CodeBusy)
	}
	c.used++
	return &fakeUnit{c: c}, nil
}

func (c *fakeCap) give() {
	c.mu.Lock()
	c.used--
	notify := c.refused && c.notify != nil
	c.refused = false
	c.mu.Unlock()
	if notify {
		c.notify()
	}
}

func (c *fakeCap) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// needs is a run's reserve function over caps, giving back what it took
// when one refuses (as the engine's plan.reserve does).
func needs(caps ...*fakeCap) func() ([]runtime.Reservation, error) {
	return func() ([]runtime.Reservation, error) {
		var rs []runtime.Reservation
		for _, c := range caps {
			r, err := c.Reserve()
			if err != nil {
				for _, r := range rs {
					r.Release()
				}
				return nil, err
			}
			rs = append(rs, r)
		}
		return rs, nil
	}
}

func admitWith(t *testing.T, s *Scheduler, subject string, reserve func() ([]runtime.Reservation, error)) runtime.Slot {
	t.Helper()
	sl, err := s.AdmitWith(subject, "", true, reserve)
	if err != nil {
		t.Fatalf("AdmitWith(%s): %v", subject, err)
	}
	return sl
}

// end is a run's end: its units first, then its slot (Run.releaseSlot).
func end(t *testing.T, sl runtime.Slot) {
	t.Helper()
	rs, err := sl.(runtime.ReservedSlot).Reservations()
	if err != nil {
		t.Fatalf("Reservations: %v", err)
	}
	for _, r := range rs {
		r.Release()
	}
	sl.Release()
}

var _ runtime.CapacityScheduler = (*Scheduler)(nil)

// TestCapacityQueues: a run whose extension is at its cap waits in the
// queue (never BUSY once accepted) and is admitted, with its unit, when a
// unit frees; without a queue, or queue=false, it is BUSY before anything;
// a full queue is QUEUE_FULL; a run of an uncapped extension is not held
// back by the waiting ones.
func TestCapacityQueues(t *testing.T) {
	x, free := &fakeCap{n: 1}, &fakeCap{n: 1000}
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 8, MaxPerSubject: 8, QueueTotal: 3, QueuePerSubject: 2})
	x.notify, free.notify = s.Recheck, s.Recheck
	a1 := admitWith(t, s, "a", needs(x))
	if !admitted(a1) || x.inUse() != 1 {
		t.Fatal("first run on x not admitted with its unit")
	}
	if _, err := s.AdmitWith("a", "", false, needs(x)); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("non-queuing run on a full x: %v, want BUSY", err)
	}
	a2 := admitWith(t, s, "a", needs(x))
	b1 := admitWith(t, s, "b", needs(x))
	if admitted(a2) || admitted(b1) {
		t.Fatal("a run on a full extension was admitted")
	}
	// The uncapped extension's runs start at once beside the queue.
	for range 3 {
		if sl := admitWith(t, s, "b", needs(free)); !admitted(sl) {
			t.Fatal("a run on an uncapped extension waited behind the full one")
		}
	}
	mustAdmit(t, s, "c", "", true) // no extension needed at all
	a3 := admitWith(t, s, "a", needs(x))
	if _, err := s.AdmitWith("a", "", true, needs(x)); protocol.CodeOf(err) != protocol.CodeQueueFull {
		t.Fatalf("a's third waiting run: %v, want QUEUE_FULL", err)
	}
	if st := s.Stats(); st.Queued != 3 {
		t.Fatalf("stats %+v, want 3 waiting", st)
	}
	// a1 ends: its unit goes to a2 (a queued first), then b1 (b's turn),
	// then a3.
	end(t, a1)
	if !admitted(a2) || admitted(b1) || x.inUse() != 1 {
		t.Fatalf("after a1: a2 %v b1 %v, x in use %d", admitted(a2), admitted(b1), x.inUse())
	}
	end(t, a2)
	if !admitted(b1) || admitted(a3) {
		t.Fatal("b1 not admitted in its turn after a2")
	}
	end(t, b1)
	if !admitted(a3) {
		t.Fatal("a3 not admitted after b1")
	}
	end(t, a3)
	if x.inUse() != 0 {
		t.Fatalf("x in use %d after every run ended", x.inUse())
	}
}

// TestCapacityNoHeadOfLine: on a full host, a subject whose first waiting
// run needs a full extension has its later runs on another extension
// admitted first, and other subjects are served in rotation meanwhile; a
// unit freed outside any slot release (a call that held no reservation)
// admits the blocked run at once.
func TestCapacityNoHeadOfLine(t *testing.T) {
	x, y := &fakeCap{n: 1}, &fakeCap{n: 100}
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 2, MaxPerSubject: 2, QueueTotal: 10, QueuePerSubject: 10})
	x.notify, y.notify = s.Recheck, s.Recheck
	hold, err := x.Reserve() // a call outside any run holds x's only unit
	if err != nil {
		t.Fatal(err)
	}
	z1 := admitWith(t, s, "z", needs(y))
	z2 := admitWith(t, s, "z", needs(y)) // host full
	a1 := admitWith(t, s, "a", needs(x)) // waits for x (and a slot)
	a2 := admitWith(t, s, "a", needs(y))
	b1 := admitWith(t, s, "b", needs(y))
	end(t, z1)
	// a's head needs x: a2 goes instead, in a's turn.
	if admitted(a1) || !admitted(a2) || admitted(b1) {
		t.Fatalf("after one slot freed: a1 %v a2 %v b1 %v", admitted(a1), admitted(a2), admitted(b1))
	}
	end(t, z2)
	if !admitted(b1) || admitted(a1) {
		t.Fatal("b1 not admitted in its turn")
	}
	end(t, b1)
	if admitted(a1) {
		t.Fatal("a1 admitted while x is full")
	}
	hold.Release() // x's unit comes back outside the scheduler
	if !admitted(a1) {
		t.Fatal("a1 not admitted when x freed a unit")
	}
	end(t, a1)
	end(t, a2)
	if x.inUse() != 0 || y.inUse() != 0 || s.Stats() != (runtime.SchedulerStats{}) {
		t.Fatalf("left over: x %d y %d %+v", x.inUse(), y.inUse(), s.Stats())
	}
}

// TestCapacityPartialAndFailures: a run needing two extensions takes
// neither while one is full; a closed extension refuses a new run with its
// own error and fails a waiting one after admission; units never
// collected (the run was cancelled as it was admitted) come back with the
// slot.
func TestCapacityPartialAndFailures(t *testing.T) {
	x, y := &fakeCap{n: 1}, &fakeCap{n: 1}
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 4, MaxPerSubject: 4, QueueTotal: 4, QueuePerSubject: 4})
	x.notify, y.notify = s.Recheck, s.Recheck
	y1 := admitWith(t, s, "a", needs(y))
	both := admitWith(t, s, "b", needs(x, y))
	if admitted(both) || x.inUse() != 0 {
		t.Fatalf("run on x and a full y: admitted %v, x in use %d", admitted(both), x.inUse())
	}
	end(t, y1)
	if !admitted(both) || x.inUse() != 1 || y.inUse() != 1 {
		t.Fatal("run on x and y not admitted with both units")
	}
	// Cancelled as it was admitted: Release alone gives the units back.
	both.Release()
	if x.inUse() != 0 || y.inUse() != 0 {
		t.Fatalf("uncollected units kept: x %d y %d", x.inUse(), y.inUse())
	}

	closed := protocol.New(protocol.CodeProviderExtensionUnavail)
	x1 := admitWith(t, s, "a", needs(x))
	waiting := admitWith(t, s, "a", needs(x))
	x.mu.Lock()
	x.err = closed
	x.mu.Unlock()
	if _, err := s.AdmitWith("c", "", true, needs(x)); protocol.CodeOf(err) != protocol.CodeProviderExtensionUnavail {
		t.Fatalf("new run on a closed extension: %v", err)
	}
	end(t, x1)
	if !admitted(waiting) {
		t.Fatal("waiting run not admitted to fail")
	}
	if _, err := waiting.(runtime.ReservedSlot).Reservations(); protocol.CodeOf(err) != protocol.CodeProviderExtensionUnavail {
		t.Fatalf("waiting run on a closed extension: %v", err)
	}
	waiting.Release()
	if st := s.Stats(); st != (runtime.SchedulerStats{}) {
		t.Fatalf("stats %+v", st)
	}
}

// TestAdmissibleAccount: a replay's admission answer counts its provider
// account's cap: BUSY without a queue, QUEUE_FULL when the account's
// waiting runs fill the subject's queue share, nil when it would wait.
func TestAdmissibleAccount(t *testing.T) {
	s := newSched(runtime.AdmissionPolicy{MaxConcurrent: 4, MaxPerSubject: 4, MaxPerAccount: 1})
	mustAdmit(t, s, "a", "acct", true)
	wantCode(t, s.Admissible("a", "acct", true), protocol.CodeBusy)
	if err := s.Admissible("a", "other", true); err != nil {
		t.Fatalf("another account: %v", err)
	}
	q := newSched(runtime.AdmissionPolicy{MaxConcurrent: 4, MaxPerSubject: 4, MaxPerAccount: 1, QueueTotal: 2, QueuePerSubject: 1})
	mustAdmit(t, q, "a", "acct", true)
	if err := q.Admissible("a", "acct", true); err != nil {
		t.Fatalf("room in the queue: %v", err)
	}
	mustAdmit(t, q, "a", "acct", true) // waits
	wantCode(t, q.Admissible("a", "acct", true), protocol.CodeQueueFull)
	if err := q.Admissible("a", "other", true); err != nil {
		t.Fatalf("another account, fits now: %v", err)
	}
}
