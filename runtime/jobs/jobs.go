package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Bounds of wire-extensions §2.5.
const (
	MaxEventBytes = 1_500_000 // one event; larger: JOB_RECORD_LIMIT → interrupted
	MaxPageEvents = 100
	MaxPageBytes  = 1_500_000
	// liveReserve is counted against MaxBytes for every job that is not a
	// tombstone.
	liveReserve = 4096
)

// Engine is what the service needs of *runtime.Engine.
type Engine interface {
	Validate(p *runtime.Principal, req *protocol.RunRequest) error
	StartWith(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest, mode runtime.Mode, opts runtime.StartOptions) (*runtime.Run, error)
}

// Options configure a Service. Limits have the defaults of §2.5 when zero.
type Options struct {
	Store  durable.Store
	Engine Engine
	// Resolve returns the current principal of a credential digest
	// (Principal.CredentialDigest), or nil when no configured credential
	// has it any more. Dispatch re-checks a job's grants with it.
	Resolve func(credentialDigest string) *runtime.Principal
	// HostID is the host's persistent identity (usage.host_id); empty: no
	// explicit binding, every submission is JOB_ACCOUNT_REQUIRED. Hosts
	// sharing a store must share it (a job is bound to it and may run on
	// any of them). It is also the lease holder's name when LeaseOwner is
	// empty, so a restarted host takes its own jobs back at once.
	HostID string
	// LeaseOwner names this worker as the holder of per-job leases; empty:
	// HostID. Hosts sharing one store (and so one HostID) give each
	// process its own (the host's presence id), so that one host cannot
	// take over the jobs another, alive, is running.
	LeaseOwner string
	// Account returns the account id bound to a provider instance ("":
	// none, JOB_ACCOUNT_REQUIRED).
	Account func(provider string) string
	// Evidence re-authorizes, for the reader, the evidence of a job whose
	// request carries references or retrieval before its events are read
	// (wire-context §11.2, wire-extensions §2.4):
	// runtime.Engine.ReauthorizeEvidence, given the job's recorded result
	// (nil: it did not complete). Nil: not checked.
	Evidence func(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest, runID string, recorded *protocol.RunResult) error

	Retention         time.Duration // required, > 0
	MaxJobs           int           // default 1000
	MaxJobsPerSubject int           // default 100
	MaxBytes          int64         // default 64,000,000
	MaxJobBytes       int64         // default 8,000,000
	Lease             time.Duration // default 30 s
	PollInterval      time.Duration // default 250 ms
	Workers           int           // default 32

	Logger *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// job is this worker's view of one job whose per-job lease it holds (or is
// acquiring): a job it dispatches, runs, recovers or ends. mu orders every
// state change of the job (its log appends included).
type job struct {
	id      string // immutable
	subject string // immutable once the record is read

	mu     sync.Mutex
	token  uint64 // the per-job lease's fencing token
	rec    record
	rev    uint64
	cursor uint64 // last committed event
	// started is the timestamp (Unix ms) of the run.started this worker
	// committed: a running job's updatedAt (runningSince).
	started int64
	bytes   int64 // record + events, for MaxJobBytes
	// recBytes is the size of the record last written (part of bytes).
	recBytes int64
	// pending are event bytes this worker appended that the shared byte
	// counter does not hold yet (it gets them when the job ends).
	pending     int64
	dispatching bool
	// worker: the job is on the dispatch path, off every client's, so
	// its settling may wait for a batch of expiries (expiry.go).
	worker  bool
	run     *runtime.Run
	broken  *protocol.Error // an append failed: the run ends interrupted
	lost    bool            // the store refused a write or the lease is gone: stop touching it
	renewed time.Time       // last successful lease renewal
}

// known is a queue entry as this worker last saw it.
type known struct {
	queued
	added time.Time // when this worker learnt of it
	own   bool      // submitted here (not learnt from a listing)
}

// Service is the job store and its worker. Create it with Open; Start
// begins dispatching; Stop ends it. Several services (one per host) may
// share one store: each job runs on the one whose worker took its per-job
// lease (see doc).
type Service struct {
	o     Options
	st    durable.Store
	log   *slog.Logger
	owner string // lease holder name of this worker
	total *counter

	submitMu [64]sync.Mutex // per key-hash stripe: one claim at a time
	expiries expiries       // expiry.go

	mu       sync.Mutex
	subjects map[string]*counter
	local    map[string]*job      // jobs whose lease this worker holds or is taking
	queue    map[string]known     // the shared queue as last listed, plus own submissions
	held     map[string]time.Time // entries another worker holds, until
	last     string               // the subject served last: the next round starts after it
	blocked  map[string]bool
	active   int
	runs     map[*job]*runtime.Run // started runs, for Stop and revocation
	pending  int64                 // sum of the local jobs' pending bytes
	stopping bool
	// starting is held (read) by dispatches while they start a run and
	// (write) by Stop before it collects the runs to cancel.
	starting  sync.RWMutex
	maint     durable.Lease
	maintHeld bool
	swept     bool // the first maintenance sweep of orphaned claims ran
	nextMaint time.Time
	nextSweep time.Time
	nextWatch time.Time
	// nextRefresh spaces the listings of the shared queue.
	nextRefresh time.Time

	kick    chan struct{}
	quit    chan struct{}
	started bool
	wg      sync.WaitGroup // dispatches and the loops
}

// orphanAge is how old a claim or queue entry without its record must be
// before it is taken for a submission that crashed (not one still being
// written on another host): far beyond one store operation's timeout.
const orphanAge = 2 * time.Minute

// Open prepares the service on its store: the shared counters (built from
// the records by the first host to open a store that has none), then the
// recovery pass: every job left running by a worker whose lease has
// expired (or by this same worker before a restart) becomes interrupted,
// logs ending in a terminal event are adopted. Queued jobs stay queued and
// run once Start is called — on this host or another.
func Open(ctx context.Context, o Options) (*Service, error) {
	if o.Store == nil || o.Engine == nil || o.Resolve == nil {
		return nil, errors.New("jobs: Store, Engine and Resolve are required")
	}
	if o.Retention <= 0 {
		return nil, errors.New("jobs: Retention is required")
	}
	o.MaxJobs = orDefault(o.MaxJobs, 1000)
	o.MaxJobsPerSubject = orDefault(o.MaxJobsPerSubject, 100)
	o.MaxBytes = orDefault(o.MaxBytes, 64_000_000)
	o.MaxJobBytes = orDefault(o.MaxJobBytes, 8_000_000)
	o.Lease = orDefault(o.Lease, 30*time.Second)
	o.PollInterval = orDefault(o.PollInterval, 250*time.Millisecond)
	o.Workers = orDefault(o.Workers, 32)
	if o.Account == nil {
		o.Account = func(string) string { return "" }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{
		o: o, st: o.Store, log: o.Logger,
		subjects: map[string]*counter{}, local: map[string]*job{}, queue: map[string]known{}, held: map[string]time.Time{},
		blocked: map[string]bool{}, runs: map[*job]*runtime.Run{}, kick: make(chan struct{}, 1), quit: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.owner = o.HostID
	if o.LeaseOwner != "" {
		s.owner = o.LeaseOwner
	}
	if s.owner == "" {
		s.owner = "host-" + newUUID()
	}
	s.total = newCounter(prefixCapTotal, s.owner, s.listAge())
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("jobs: open: %w", err)
	}
	if err := s.recoverAll(ctx); err != nil {
		return nil, fmt.Errorf("jobs: recovery: %w", err)
	}
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// listAll pages through a prefix.
func (s *Service) listAll(ctx context.Context, prefix string, each func(durable.Entry) error) error {
	after := ""
	for {
		es, err := s.st.List(ctx, prefix, after, 512)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := each(e); err != nil {
				return err
			}
		}
		if len(es) < 512 {
			return nil
		}
		after = es[len(es)-1].Key
	}
}

// migrate builds the shared counters, the queue entries and the expiry
// keys from the records when the store has no total counter yet (a new
// store, or one written by the single-owner worker before): the counter is
// written last, so a crash during the scan runs it again.
func (s *Service) migrate(ctx context.Context) error {
	done := prefixCapTotal + ownerKey(migratedOwner)
	if _, err := s.st.Get(ctx, done); err == nil {
		return nil
	} else if !errors.Is(err, durable.ErrNotFound) {
		return err
	}
	var total counted
	per := map[string]int{}
	err := s.listAll(ctx, prefixRecord, func(e durable.Entry) error {
		var r record
		if err := json.Unmarshal(e.Value, &r); err != nil {
			return fmt.Errorf("record %s: %w", e.Key, err)
		}
		total.Jobs++
		per[r.Subject]++
		switch {
		case r.Tomb:
			return s.st.DeleteLog(ctx, eventLog(r.ID))
		case terminalState(r.State):
			total.Bytes += r.counted(len(e.Value)) + liveReserve
			return ignoreExists(s.st.Create(ctx, expiryKey(r.ExpiresAt, r.ID), nil))
		default:
			total.Bytes += r.counted(len(e.Value)) + liveReserve
			b, _ := json.Marshal(queued{Subject: r.Subject, Created: r.CreatedAt})
			return ignoreExists(s.st.Create(ctx, queueKey(r.ID), b))
		}
	})
	if err != nil {
		return err
	}
	for subj, n := range per {
		b, _ := json.Marshal(counted{Jobs: n})
		if err := ignoreExists(s.st.Create(ctx, subjectPrefix(subj)+ownerKey(migratedOwner), b)); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(total)
	return ignoreExists(s.st.Create(ctx, done, b))
}

func ignoreExists(_ uint64, err error) error {
	if errors.Is(err, durable.ErrExists) {
		return nil
	}
	return err
}

// counted is what a record counts in the shared byte counter besides
// liveReserve (records written before Reserved existed: their size and
// events).
func (r *record) counted(size int) int64 {
	if r.Reserved > 0 {
		return r.Reserved
	}
	return int64(size) + r.EventBytes
}

// recoverAll is Open's pass over the queue: every entry whose record is
// not an ordinary queued job is settled now (interrupted, adopted or
// cleaned up) if its lease can be had; queued ones wait for dispatch.
func (s *Service) recoverAll(ctx context.Context) error {
	now := time.Now()
	var todo []string
	err := s.listAll(ctx, prefixQueue, func(e durable.Entry) error {
		id := strings.TrimPrefix(e.Key, prefixQueue)
		var q queued
		_ = json.Unmarshal(e.Value, &q)
		s.queue[id] = known{queued: q, added: now}
		r, err := s.st.Get(ctx, recordKey(id))
		if errors.Is(err, durable.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var rec record
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			return fmt.Errorf("record %s: %w", id, err)
		}
		began := rec.State != StateQueued || rec.Ending
		if !began {
			// A queued record whose log has events: its run began (see
			// doc, Dispatch).
			last, err := s.st.Last(ctx, eventLog(id))
			if err != nil {
				return err
			}
			began = last > 0
		}
		if began {
			todo = append(todo, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range todo {
		if j := s.claimLocal(id); j != nil {
			if got := s.take(ctx, j, s.queue[id].queued, false); got != nil {
				s.drop(ctx, got, true)
			}
		}
	}
	return nil
}

// claimLocal reserves id for one goroutine of this worker (nil: another
// has it): the per-job lease is held by the worker's name, and a second
// acquisition under the same name would fence the first.
func (s *Service) claimLocal(id string) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local[id] != nil {
		return nil
	}
	j := &job{id: id}
	s.local[id] = j
	return j
}

// take acquires the job's lease and settles what the record says: nil when
// there is nothing to run (held elsewhere, ended, recovered, cancelled),
// or the job, still queued and ready to dispatch, with its lease held.
// When dispatch is false a queued job is given back at once.
func (s *Service) take(ctx context.Context, j *job, q queued, dispatch bool) *job {
	l, err := s.st.Acquire(ctx, runLease(j.id), s.owner, s.o.Lease)
	if err != nil {
		s.mu.Lock()
		delete(s.local, j.id)
		if errors.Is(err, durable.ErrHeld) {
			until := l.Expires
			if until.IsZero() {
				until = time.Now().Add(s.o.Lease)
			}
			s.held[j.id] = until
		} else {
			s.held[j.id] = time.Now().Add(s.o.PollInterval) // see backoff
			s.log.Warn("job lease not acquired", "job", j.id, "err", err)
		}
		s.mu.Unlock()
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.token, j.renewed = l.Token, time.Now()
	e, err := s.st.Get(ctx, recordKey(j.id))
	if errors.Is(err, durable.ErrNotFound) {
		// A queue entry without a record: a submission that crashed
		// before its record (never acknowledged), once it is old enough
		// not to be one still under way.
		if q.Created > 0 && s.o.Now().Sub(fromMillis(q.Created)) > orphanAge {
			_ = s.st.Delete(ctx, queueKey(j.id), 0)
			s.forget(j.id)
		} else {
			s.mu.Lock()
			s.held[j.id] = time.Now().Add(s.o.PollInterval)
			s.mu.Unlock()
		}
		s.dropLocked(ctx, j, true)
		return nil
	}
	if err != nil {
		s.backoff(j.id)
		s.dropLocked(ctx, j, true)
		return nil
	}
	if err := json.Unmarshal(e.Value, &j.rec); err != nil {
		s.log.Error("job record unreadable", "job", j.id)
		s.dropLocked(ctx, j, true)
		return nil
	}
	j.subject, j.rev = j.rec.Subject, e.Revision
	j.recBytes = int64(len(e.Value))
	j.bytes = j.recBytes + j.rec.EventBytes
	j.cursor = j.rec.Cursor
	began := j.rec.State == StateRunning || j.rec.Ending
	if !began && j.rec.State == StateQueued && !j.rec.Tomb {
		// Under the lease, the log says whether the run began: a queued
		// record with a committed run.started is a running job (see doc,
		// Dispatch).
		last, err := s.st.Last(ctx, eventLog(j.id))
		if err != nil {
			s.backoff(j.id)
			s.dropLocked(ctx, j, true)
			return nil
		}
		began = last > 0
	}
	switch {
	case j.rec.Tomb || terminalState(j.rec.State):
		s.settleLocked(ctx, j)
		return nil
	case began:
		if err := s.recoverJob(ctx, j); err != nil {
			s.log.Warn("job recovery failed", "job", j.id, "code", string(protocol.CodeOf(storeError(err))))
			s.backoff(j.id)
			s.dropLocked(ctx, j, true)
			return nil
		}
		if terminalState(j.rec.State) {
			s.settleLocked(ctx, j)
			return nil
		}
	}
	// An ordinary queued job.
	if !dispatch {
		s.dropLocked(ctx, j, true)
		return nil
	}
	if j.rec.CancelRequested {
		if err := s.endQueuedLocked(ctx, j, runtime.EventRunCancelled, protocol.New(protocol.CodeCancelled)); err != nil {
			s.log.Warn("job cancel failed", "job", j.id, "code", string(protocol.CodeOf(err)))
			s.backoff(j.id)
			s.dropLocked(ctx, j, !j.lost)
			return nil
		}
		s.settleLocked(ctx, j)
		return nil
	}
	return j
}

// recoverJob settles a running record whose worker is gone (its lease
// expired, or it was this worker before a restart), or a queued one whose
// synthetic end was under way: the log's terminal event is adopted, or
// run.failed JOB_INTERRUPTED appended (with a synthetic run.started first
// when the log is empty). A queued record whose log is empty stays queued.
func (s *Service) recoverJob(ctx context.Context, j *job) error {
	last, err := s.st.Last(ctx, eventLog(j.rec.ID))
	if err != nil {
		return err
	}
	j.cursor = last
	if last == 0 && j.rec.State == StateQueued {
		return nil // the end never reached the log: an ordinary queued job
	}
	var evBytes int64
	var lastType string
	for after := uint64(0); after < last; {
		recs, err := s.st.Read(ctx, eventLog(j.rec.ID), after, 256, 0)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			evBytes += int64(len(r.Data))
			lastType = eventType(r.Data)
		}
		after = recs[len(recs)-1].Seq
	}
	now := s.o.Now()
	rec := j.rec
	if st := stateOf(lastType); st != "" {
		rec.State = st // the terminal event is committed: adopt it
	} else {
		var evs [][]byte
		seq := last
		if last == 0 {
			seq++
			evs = append(evs, syntheticStarted(&rec, seq, now))
		}
		seq++
		evs = append(evs, syntheticEnd(&rec, runtime.EventRunFailed, seq, now, interruptedError()))
		for _, e := range evs {
			evBytes += int64(len(e))
		}
		if _, err := s.st.Append(ctx, eventLog(rec.ID), last, evs...); err != nil {
			return err
		}
		j.cursor = seq
		rec.State = StateInterrupted
		s.log.Info("job interrupted", "job", rec.ID, "owner", j.rec.Owner)
	}
	j.bytes = j.recBytes + evBytes
	return s.finishRecord(ctx, j, rec, now)
}

// finishRecord writes rec as terminal with j's cursor and bytes, then
// moves the shared byte counter by what the job's events added.
func (s *Service) finishRecord(ctx context.Context, j *job, rec record, now time.Time) error {
	was := j.rec.counted(int(j.recBytes))
	rec.Cursor = j.cursor
	rec.EventBytes = j.bytes - j.recBytes
	rec.UpdatedAt = max(now.UnixMilli(), rec.CreatedAt)
	rec.ExpiresAt = rec.UpdatedAt + max(s.o.Retention.Milliseconds(), 1)
	rec.Ending = false
	rec.Reserved = j.bytes
	if err := s.put(ctx, j, rec); err != nil {
		return err
	}
	s.mu.Lock()
	s.pending -= j.pending
	s.mu.Unlock()
	j.pending = 0
	s.addLiveBytes(ctx, rec.Reserved-was)
	return nil
}

// put CAS-writes rec over j's revision. A write refused because another
// host persisted cancelRequested on the same state is merged (the cancel
// is adopted and the run cancelled) and tried again; any other change
// means the job is no longer this worker's (durable.ErrRevision).
func (s *Service) put(ctx context.Context, j *job, rec record) error {
	for range 8 {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		rev, err := s.st.Update(ctx, recordKey(rec.ID), b, j.rev)
		if err == nil {
			if !rec.Tomb {
				j.bytes += int64(len(b)) - j.recBytes
				j.recBytes = int64(len(b))
			}
			j.rec, j.rev = rec, rev
			return nil
		}
		if !errors.Is(err, durable.ErrRevision) {
			return err
		}
		e, gerr := s.st.Get(ctx, recordKey(rec.ID))
		if gerr != nil {
			return err
		}
		var cur record
		if json.Unmarshal(e.Value, &cur) != nil || cur.Tomb || cur.State != j.rec.State || cur.Owner != j.rec.Owner ||
			cur.Token != j.rec.Token || cur.Ending != j.rec.Ending || !cur.CancelRequested {
			return err
		}
		j.rev = e.Revision
		if !rec.CancelRequested {
			rec.CancelRequested = true
			j.rec.CancelRequested = true
			if j.run != nil {
				j.run.Cancel(nil)
			}
		}
	}
	return durable.ErrRevision
}

// settleLocked is the end of a job's stay on this worker once its record
// is terminal: its expiry key (retention finds it there) first, then the
// queue entry and the cancel signal removed and the lease given back, at
// once.
func (s *Service) settleLocked(ctx context.Context, j *job) {
	ctx = context.WithoutCancel(ctx)
	if !j.rec.Tomb {
		if err := s.addExpiry(ctx, j.id, j.rec.ExpiresAt, j.worker); err != nil {
			// The entry stays: whoever takes it next settles it again.
			s.backoff(j.id)
			s.dropLocked(ctx, j, true)
			return
		}
	}
	fns := []func() error{func() error { return s.st.Delete(ctx, queueKey(j.id), 0) }, func() error {
		s.dropLocked(ctx, j, true)
		return nil
	}}
	if j.rec.CancelRequested {
		fns = append(fns, func() error { return s.st.Delete(ctx, cancelKey(j.id), 0) })
	}
	if errs := parallel(fns...); errs[0] == nil {
		s.forget(j.id)
	} else {
		s.backoff(j.id)
	}
}

// backoff keeps this worker from taking the entry again before the next
// poll: the store just failed on it, and one that fails at once must not
// make a busy loop of pick and take.
func (s *Service) backoff(id string) {
	s.mu.Lock()
	s.held[id] = time.Now().Add(s.o.PollInterval)
	s.mu.Unlock()
}

// forget removes an entry from this worker's view of the queue.
func (s *Service) forget(id string) {
	s.mu.Lock()
	delete(s.queue, id)
	delete(s.held, id)
	s.mu.Unlock()
}

// dropLocked ends the job's stay on this worker: the lease is released
// when release is set (and it is still ours), and the job leaves the
// local set.
func (s *Service) dropLocked(ctx context.Context, j *job, release bool) {
	if release && j.token != 0 && !j.lost {
		if err := s.st.Release(context.WithoutCancel(ctx), runLease(j.id), j.token); err != nil && !errors.Is(err, durable.ErrFenced) {
			s.log.Warn("job lease not released", "job", j.id, "err", err)
		}
	}
	j.token = 0
	s.mu.Lock()
	if s.local[j.id] == j {
		delete(s.local, j.id)
	}
	s.pending -= j.pending
	s.mu.Unlock()
	j.pending = 0
}

func (s *Service) drop(ctx context.Context, j *job, release bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s.dropLocked(ctx, j, release)
}

func (s *Service) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Submit accepts a job (§2.2): the same subject, key and request give the
// original job back; a different request under the key is
// IDEMPOTENCY_CONFLICT. Acceptance is committed before Submit returns.
func (s *Service) Submit(ctx context.Context, p *runtime.Principal, key string, req *protocol.RunRequest) (Info, error) {
	if !p.Can("jobs.submit") {
		return Info{}, protocol.New(protocol.CodeForbidden)
	}
	if err := s.available(); err != nil {
		return Info{}, err
	}
	if len(req.Session) > 0 || len(req.ApplicationTools) > 0 || len(req.Approvals) > 0 || req.IdempotencyKey != nil {
		return Info{}, protocol.New(protocol.CodeJobRequestUnsupported)
	}
	if err := s.o.Engine.Validate(p, req); err != nil {
		return Info{}, err
	}
	account := s.o.Account(req.Provider)
	if s.o.HostID == "" || account == "" {
		return Info{}, protocol.New(protocol.CodeJobAccountRequired)
	}
	fp, err := protocol.Fingerprint(req)
	if err != nil {
		return Info{}, protocol.Wrap(protocol.CodeInvalidJob, err)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return Info{}, protocol.Wrap(protocol.CodeInvalidJob, err)
	}
	kh := keyHash(p.Subject, key)
	// The stripe is the hash's first byte (two hex digits: one digit
	// alone would use only 16 of the 64 stripes).
	first, _ := strconv.ParseUint(kh[:2], 16, 8)
	stripe := &s.submitMu[first%uint64(len(s.submitMu))]
	stripe.Lock()
	defer stripe.Unlock()

	now := s.o.Now().UnixMilli()
	rec := record{
		ID: newUUID(), Subject: p.Subject, KeyHash: kh, Fingerprint: fp, State: StateQueued,
		RunID: newUUID(), Provider: req.Provider, Model: req.Model, Tools: req.Tools, Request: raw,
		Credential: p.CredentialDigest, HostID: s.o.HostID, AccountID: account,
		CreatedAt: now, UpdatedAt: now,
	}
	b, _ := json.Marshal(rec)
	rec.Reserved = int64(len(b))
	b, _ = json.Marshal(rec)
	qb, _ := json.Marshal(queued{Subject: rec.Subject, Created: rec.CreatedAt})
	cl := claim{ID: rec.ID, Fingerprint: fp, Created: now}
	if int64(len(b)) > s.o.MaxJobBytes {
		// The claim first: a changed request under a known key is a
		// conflict before it is too large.
		c, exists, err := s.claimKey(ctx, kh, cl)
		if err != nil {
			return Info{}, err
		}
		if exists && c.Fingerprint != fp {
			return Info{}, protocol.New(protocol.CodeIdempotencyConflict)
		}
		if !exists {
			_ = s.st.Delete(context.WithoutCancel(ctx), prefixKey+kh, 0)
		}
		return Info{}, protocol.New(protocol.CodeJobRecordLimit)
	}
	// The claim, the reservation and the queue entry at once (one round
	// trip), all before the record: every queued record has its entry (an
	// entry without a record is a submission under way, or one that
	// crashed). A resubmission gives back what it wrote here.
	var c claim
	var exists bool
	errs := parallel(func() error {
		var err error
		c, exists, err = s.claimKey(ctx, kh, cl)
		return err
	}, func() error {
		return s.reserve(ctx, rec.Subject, rec.Reserved)
	}, func() error {
		return ignoreExists(s.st.Create(ctx, queueKey(rec.ID), qb))
	})
	if errs[0] == nil && !exists && errs[1] == nil && errs[2] == nil {
		return s.createRecord(ctx, &rec, b, func() { _ = s.st.Delete(context.WithoutCancel(ctx), prefixKey+kh, 0) })
	}
	if errs[2] == nil {
		_ = s.st.Delete(context.WithoutCancel(ctx), queueKey(rec.ID), 0)
	}
	if errs[1] == nil {
		s.unreserve(ctx, rec.Subject, rec.Reserved)
	}
	switch {
	case errs[0] != nil:
		return Info{}, errs[0]
	case !exists:
		// The claim is new but its reservation or entry failed: it was
		// never acknowledged.
		_ = s.st.Delete(context.WithoutCancel(ctx), prefixKey+kh, 0)
		if errs[1] != nil {
			return Info{}, errs[1]
		}
		return Info{}, storeError(errs[2])
	case c.Fingerprint != fp:
		return Info{}, protocol.New(protocol.CodeIdempotencyConflict)
	}
	if info, found, err := s.existing(ctx, c.ID); found || err != nil {
		return info, err
	}
	// A claim whose record a crash (or error) left unwritten: the record
	// under the claimed id, reserved and entered first.
	rec.ID = c.ID
	b, _ = json.Marshal(rec)
	errs = parallel(func() error {
		return s.reserve(ctx, rec.Subject, rec.Reserved)
	}, func() error {
		return ignoreExists(s.st.Create(ctx, queueKey(rec.ID), qb))
	})
	if errs[0] != nil || errs[1] != nil {
		if errs[0] == nil {
			s.unreserve(ctx, rec.Subject, rec.Reserved)
		}
		if errs[0] != nil {
			return Info{}, errs[0]
		}
		return Info{}, storeError(errs[1])
	}
	return s.createRecord(ctx, &rec, b, func() {})
}

// createRecord writes a submission's record once its claim, reservation
// and queue entry are in place, and queues it here.
func (s *Service) createRecord(ctx context.Context, rec *record, b []byte, dropClaim func()) (Info, error) {
	if _, err := s.st.Create(ctx, recordKey(rec.ID), b); err != nil {
		if errors.Is(err, durable.ErrExists) {
			// Another host resubmitted the same key at the same time.
			s.unreserve(ctx, rec.Subject, rec.Reserved)
			if info, found, err := s.existing(ctx, rec.ID); found || err != nil {
				return info, err
			}
		}
		if certainlyNotWritten(err) {
			_ = s.st.Delete(context.WithoutCancel(ctx), queueKey(rec.ID), 0)
			s.unreserve(ctx, rec.Subject, rec.Reserved)
			dropClaim()
		}
		return Info{}, storeError(err)
	}
	info := infoOf(rec, 0)
	s.mu.Lock()
	s.queue[rec.ID] = known{queued: queued{Subject: rec.Subject, Created: rec.CreatedAt}, added: time.Now(), own: true}
	s.mu.Unlock()
	s.signal()
	return info, nil
}

// certainlyNotWritten reports whether a failed write is known not to have
// happened (the store refused it), as opposed to an unacknowledged one.
func certainlyNotWritten(err error) bool {
	return errors.Is(err, durable.ErrTooLarge) || errors.Is(err, durable.ErrFull) || errors.Is(err, durable.ErrClosed)
}

// existing returns the job a resubmission found under its key.
func (s *Service) existing(ctx context.Context, id string) (Info, bool, error) {
	e, err := s.st.Get(ctx, recordKey(id))
	if errors.Is(err, durable.ErrNotFound) {
		return Info{}, false, nil
	}
	if err != nil {
		return Info{}, false, storeError(err)
	}
	var r record
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return Info{}, false, protocol.Wrap(protocol.CodeJobStoreError, err)
	}
	if r.Tomb {
		return Info{}, true, protocol.New(protocol.CodeJobExpired)
	}
	cursor, err := s.cursorOf(ctx, &r)
	if err != nil {
		return Info{}, true, err
	}
	return s.infoAt(ctx, &r, cursor), true, nil
}

// claimKey creates the key claim, or returns the existing one.
func (s *Service) claimKey(ctx context.Context, kh string, c claim) (claim, bool, error) {
	b, _ := json.Marshal(c)
	_, err := s.st.Create(ctx, prefixKey+kh, b)
	if err == nil {
		return c, false, nil
	}
	if !errors.Is(err, durable.ErrExists) {
		return claim{}, false, storeError(err)
	}
	e, err := s.st.Get(ctx, prefixKey+kh)
	if err != nil {
		return claim{}, false, storeError(err)
	}
	var got claim
	if err := json.Unmarshal(e.Value, &got); err != nil {
		return claim{}, false, protocol.Wrap(protocol.CodeJobStoreError, err)
	}
	return got, true, nil
}

// available reports why the service cannot take requests now.
func (s *Service) available() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return protocol.New(protocol.CodeJobsUnavailable)
	}
	return nil
}

// lookup reads a job of p's subject from the store (another subject's is
// JOB_NOT_FOUND), after the operation grant check (FORBIDDEN). Tombstones
// are JOB_EXPIRED.
func (s *Service) lookup(ctx context.Context, p *runtime.Principal, op, id string) (record, uint64, error) {
	if !p.Can(op) {
		return record{}, 0, protocol.New(protocol.CodeForbidden)
	}
	if err := s.available(); err != nil {
		return record{}, 0, err
	}
	e, err := s.st.Get(ctx, recordKey(id))
	if errors.Is(err, durable.ErrNotFound) {
		return record{}, 0, protocol.New(protocol.CodeJobNotFound)
	}
	if err != nil {
		return record{}, 0, storeError(err)
	}
	var r record
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return record{}, 0, protocol.Wrap(protocol.CodeJobStoreError, err)
	}
	if r.Subject != p.Subject {
		return record{}, 0, protocol.New(protocol.CodeJobNotFound)
	}
	if r.Tomb {
		return record{}, 0, protocol.New(protocol.CodeJobExpired)
	}
	if !covers(p, &r) {
		return record{}, 0, protocol.New(protocol.CodeForbidden)
	}
	return r, e.Revision, nil
}

// cursorOf is a job's last committed event: the record's for a terminal
// job, the running worker's own count when it is this one, the log's last
// sequence otherwise (0 for a queued job whose run has not begun; a
// running job's record still says queued, see doc).
func (s *Service) cursorOf(ctx context.Context, r *record) (uint64, error) {
	if terminalState(r.State) {
		return r.Cursor, nil
	}
	s.mu.Lock()
	j := s.local[r.ID]
	s.mu.Unlock()
	if j != nil {
		j.mu.Lock()
		c, mine := j.cursor, j.rec.ID == r.ID && j.token != 0 && !j.lost
		j.mu.Unlock()
		if mine {
			return c, nil
		}
	}
	last, err := s.st.Last(ctx, eventLog(r.ID))
	if err != nil {
		return 0, storeError(err)
	}
	return last, nil
}

// covers reports whether p's provider and tool grants cover the stored
// request (§2.4).
func covers(p *runtime.Principal, r *record) bool {
	if !p.Providers[r.Provider] {
		return false
	}
	for _, t := range r.Tools {
		if !p.Tools[t] {
			return false
		}
	}
	return true
}

// infoOf is the JobInfo of r at cursor. A queued record whose log has
// events is a running job: the run's first committed event is its queued
// → running transition (see doc, Dispatch).
func infoOf(r *record, cursor uint64) Info {
	state := r.State
	if state == StateQueued && !r.Ending && cursor > 0 {
		state = StateRunning
	}
	i := Info{ID: r.ID, RunID: r.RunID, Provider: r.Provider, Model: r.Model, State: state,
		Cursor: cursor, CancelRequested: r.CancelRequested,
		CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt)}
	if terminalState(r.State) {
		i.ExpiresAt = fromMillis(r.ExpiresAt)
	}
	return i
}

// infoAt is infoOf for a client's read: a queued record whose log has
// events reads as running, and its updatedAt is then when it started
// running — the timestamp of its run.started, which the worker commits
// instead of rewriting the record (wire-extensions §2.1 only asks
// updatedAt ≥ createdAt; a client polling a job expects it to move when
// the state does). The worker holding the job knows it; another host reads
// the log's first event. A failed read leaves the record's own updatedAt.
func (s *Service) infoAt(ctx context.Context, r *record, cursor uint64) Info {
	i := infoOf(r, cursor)
	if i.State != StateRunning || r.State != StateQueued {
		return i
	}
	if since := s.runningSince(ctx, r); since > r.CreatedAt {
		i.UpdatedAt = fromMillis(since)
	}
	return i
}

// runningSince is the timestamp (Unix ms) of the run.started of the job
// of r, 0 when unknown.
func (s *Service) runningSince(ctx context.Context, r *record) int64 {
	s.mu.Lock()
	j := s.local[r.ID]
	s.mu.Unlock()
	if j != nil {
		j.mu.Lock()
		t, mine := j.started, j.rec.ID == r.ID
		j.mu.Unlock()
		if mine && t != 0 {
			return t
		}
	}
	recs, err := s.st.Read(ctx, eventLog(r.ID), 0, 1, 0)
	if err != nil || len(recs) == 0 {
		return 0
	}
	return eventTime(recs[0].Data)
}

// Read returns a job's JobInfo, from the store: any host answers for any
// job.
func (s *Service) Read(ctx context.Context, p *runtime.Principal, id string) (Info, error) {
	r, _, err := s.lookup(ctx, p, "jobs.read", id)
	if err != nil {
		return Info{}, err
	}
	cursor, err := s.cursorOf(ctx, &r)
	if err != nil {
		return Info{}, err
	}
	return s.infoAt(ctx, &r, cursor), nil
}

// Events returns the page of committed events after sequence after (§2.1).
func (s *Service) Events(ctx context.Context, p *runtime.Principal, id string, after uint64, limit int) (Page, error) {
	if limit <= 0 || limit > MaxPageEvents {
		limit = MaxPageEvents
	}
	r, _, err := s.lookup(ctx, p, "jobs.read", id)
	if err != nil {
		return Page{}, err
	}
	cursor, err := s.cursorOf(ctx, &r)
	if err != nil {
		return Page{}, err
	}
	if after > cursor {
		return Page{}, protocol.New(protocol.CodeInvalidJobCursor)
	}
	if err := s.checkEvidence(ctx, p, &r, cursor); err != nil {
		return Page{}, err
	}
	var recs []durable.Record
	if after < cursor {
		if recs, err = s.st.Read(ctx, eventLog(id), after, limit, MaxPageBytes); err != nil {
			return Page{}, storeError(err)
		}
	}
	info := s.infoAt(ctx, &r, cursor)
	page := Page{Job: info, Events: make([]json.RawMessage, 0, len(recs)), NextCursor: after}
	for _, rec := range recs {
		if rec.Seq > info.Cursor {
			break // appended after the cursor was read: the next page has it
		}
		if !terminalState(r.State) && isTerminalEvent(rec.Data) {
			// The terminal event is committed but the record not yet
			// settled (its worker writes the log first, the record
			// second): a page may not pair it with a running state, so
			// it waits for the next page, which sees the settled record.
			break
		}
		page.Events = append(page.Events, rec.Data)
		page.NextCursor = rec.Seq
	}
	page.HasMore = page.NextCursor < info.Cursor
	return page, nil
}

// isTerminalEvent reports whether an event's JSON is run.completed,
// run.failed or run.cancelled.
func isTerminalEvent(data []byte) bool {
	var ev struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(data, &ev) == nil && (ev.Type == runtime.EventRunCompleted || ev.Type == runtime.EventRunFailed || ev.Type == runtime.EventRunCancelled)
}

// Cancel cancels a job (§2.3) from any host: a terminal job is returned
// unchanged; a queued one is cancelled at once by whoever can take its
// lease; a running one (or a queued one another worker is dispatching)
// gets cancelRequested persisted, and its worker — this one or the one
// watching the cancel signals — cancels the run.
func (s *Service) Cancel(ctx context.Context, p *runtime.Principal, id string) (Info, error) {
	for range 8 {
		r, rev, err := s.lookup(ctx, p, "jobs.cancel", id)
		if err != nil {
			return Info{}, err
		}
		if terminalState(r.State) {
			return infoOf(&r, r.Cursor), nil
		}
		s.mu.Lock()
		lj := s.local[id]
		s.mu.Unlock()
		if lj != nil {
			if info, ok, err := s.cancelLocal(ctx, lj); ok || err != nil {
				return info, err
			}
			continue // it left this worker meanwhile: look again
		}
		if r.State == StateQueued && !r.CancelRequested {
			if j := s.claimLocal(id); j != nil {
				if got := s.take(ctx, j, queued{Subject: r.Subject, Created: r.CreatedAt}, true); got != nil {
					// Ours and still queued: cancelled at once.
					got.mu.Lock()
					err := s.endQueuedLocked(ctx, got, runtime.EventRunCancelled, protocol.New(protocol.CodeCancelled))
					if err != nil {
						s.dropLocked(ctx, got, !got.lost)
						got.mu.Unlock()
						return Info{}, err
					}
					info := infoOf(&got.rec, got.cursor)
					s.settleLocked(ctx, got)
					got.mu.Unlock()
					return info, nil
				}
				s.mu.Lock()
				_, heldElsewhere := s.held[id]
				s.mu.Unlock()
				if !heldElsewhere {
					continue // settled meanwhile: read it again
				}
			}
		}
		// Another worker has it: persist the request and signal it.
		if !r.CancelRequested {
			r.CancelRequested = true
			r.UpdatedAt = max(s.o.Now().UnixMilli(), r.CreatedAt)
			b, _ := json.Marshal(r)
			if _, err := s.st.Update(ctx, recordKey(id), b, rev); errors.Is(err, durable.ErrRevision) {
				continue
			} else if err != nil {
				return Info{}, storeError(err)
			}
		}
		if err := ignoreExists(s.st.Create(ctx, cancelKey(id), nil)); err != nil {
			return Info{}, storeError(err)
		}
		cursor, err := s.cursorOf(ctx, &r)
		if err != nil {
			return Info{}, err
		}
		return infoOf(&r, cursor), nil
	}
	pe := protocol.New(protocol.CodeJobStoreError)
	pe.Uncertain = true
	return Info{}, pe
}

// cancelLocal cancels a job this worker holds: cancelRequested persisted,
// the run (if started) cancelled; a dispatch still checking sees the flag.
// ok is false when the job left this worker before its lock was had.
func (s *Service) cancelLocal(ctx context.Context, j *job) (Info, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s.mu.Lock()
	still := s.local[j.id] == j && j.token != 0 && !j.lost
	s.mu.Unlock()
	if !still {
		return Info{}, false, nil
	}
	if terminalState(j.rec.State) {
		return infoOf(&j.rec, j.cursor), true, nil
	}
	if !j.rec.CancelRequested {
		rec := j.rec
		rec.CancelRequested = true
		rec.UpdatedAt = max(s.o.Now().UnixMilli(), rec.CreatedAt)
		if err := s.put(ctx, j, rec); err != nil {
			return Info{}, true, storeError(err)
		}
	}
	if j.run != nil {
		j.run.Cancel(nil) // the terminal event comes back through the log
	}
	return infoOf(&j.rec, j.cursor), true, nil
}

// endQueuedLocked ends a job that never ran, its lease held: the record
// marked Ending (a fence: a worker that lost the job fails this CAS), the
// synthetic run.started and terminal event appended, then the record
// turned terminal (doc: the order recovery relies on).
func (s *Service) endQueuedLocked(ctx context.Context, j *job, typ string, pe *protocol.Error) error {
	now := s.o.Now()
	rec := j.rec
	rec.Ending = true
	if err := s.put(ctx, j, rec); err != nil {
		j.lost = true
		return storeError(err)
	}
	e1 := syntheticStarted(&rec, 1, now)
	e2 := syntheticEnd(&rec, typ, 2, now, pe)
	if _, err := s.st.Append(ctx, eventLog(rec.ID), 0, e1, e2); err != nil {
		return storeError(err)
	}
	j.cursor = 2
	j.bytes += int64(len(e1) + len(e2))
	rec = j.rec
	rec.State = stateOf(typ)
	if err := s.finishRecord(ctx, j, rec, now); err != nil {
		return storeError(err)
	}
	return nil
}

// checkEvidence is the evidence step of an events read (§2.4): a job
// whose request carries references or retrieval shows no event before it
// completed (CONTEXT_REPLAY_UNAVAILABLE, uncertain), and every page of a
// completed one re-authorizes the recorded evidence for the reader first
// (CONTEXT_NOT_FOUND, CONTEXT_CHANGED, INDEX_INCOMPATIBLE …). Status and
// cancel do not ask.
func (s *Service) checkEvidence(ctx context.Context, p *runtime.Principal, r *record, cursor uint64) error {
	if s.o.Evidence == nil {
		return nil
	}
	var req protocol.RunRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return storeError(err)
	}
	if !runtime.EvidenceBearing(&req) {
		return nil
	}
	if r.State != StateCompleted || cursor == 0 {
		return &protocol.Error{Code: protocol.CodeContextReplayUnavailable, Uncertain: true,
			Message: "The job's evidence can be read once the job has completed."}
	}
	recs, err := s.st.Read(ctx, eventLog(r.ID), cursor-1, 1, MaxPageBytes)
	if err != nil {
		return storeError(err)
	}
	var last struct {
		Type   string              `json:"type"`
		Result *protocol.RunResult `json:"result"`
	}
	if len(recs) != 1 || json.Unmarshal(recs[0].Data, &last) != nil || last.Type != runtime.EventRunCompleted || last.Result == nil {
		return &protocol.Error{Code: protocol.CodeContextReplayUnavailable, Uncertain: true,
			Message: "The job's evidence was not recorded completely."}
	}
	return s.o.Evidence(ctx, p, &req, r.RunID, last.Result)
}
