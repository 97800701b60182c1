package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	// explicit binding, every submission is JOB_ACCOUNT_REQUIRED. It is
	// also the lease owner, so a restarted host takes over at once.
	HostID string
	// LeaseOwner names the worker lease's holder; empty: HostID. Hosts
	// sharing one store (and so, for their bindings, one HostID) give
	// each process its own, so that one host starting cannot take the
	// lease from another that is alive.
	LeaseOwner string
	// Account returns the account id bound to a provider instance ("":
	// none, JOB_ACCOUNT_REQUIRED).
	Account func(provider string) string

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

// job is the owner's in-memory view of one record. mu orders every state
// change of the job (its log appends included).
type job struct {
	subject string // immutable: read under s.mu without mu

	mu     sync.Mutex
	rec    record
	rev    uint64
	cursor uint64 // last committed event
	bytes  int64  // record + events, for MaxJobBytes / MaxBytes
	// recBytes is the size of the record last written (part of bytes).
	recBytes int64
	// Owned under mu while the job is dispatched.
	dispatching bool
	run         *runtime.Run
	broken      *protocol.Error // an append failed: the run ends interrupted
	lost        bool            // the store refused a write: stop touching it
	// expires is the terminal record's expiresAt (unix ms; 0: none), read
	// by the retention pass without the job's lock.
	expires atomic.Int64
}

// Service is the job store and its worker. Create it with Open; Start
// begins dispatching; Stop ends it.
type Service struct {
	o   Options
	st  durable.Store
	log *slog.Logger

	lease durable.Lease

	submitMu [64]sync.Mutex // per key-hash stripe: one claim at a time

	mu         sync.Mutex
	jobs       map[string]*job
	count      int // records, tombstones and reservations included (MaxJobs)
	perSubject map[string]int
	liveBytes  int64 // bytes of live jobs + liveReserve each
	queues     map[string][]*job
	ring       []string // subjects with queued jobs, in arrival order
	rr         int      // the ring position the next round starts at
	blocked    map[string]bool
	active     int
	runs       map[*job]*runtime.Run // started runs, for Stop and revocation
	stopping   bool
	// starting is held (read) by dispatches while they start a run and
	// (write) by Stop before it collects the runs to cancel.
	starting  sync.RWMutex
	lostLease bool
	nextMaint time.Time

	kick    chan struct{}
	quit    chan struct{}
	started bool
	wg      sync.WaitGroup // dispatches and the loops
}

// Open acquires the worker lease (JOB_WORKER_BUSY if another owner holds
// it), then runs the takeover scan: every running job becomes interrupted,
// logs ending in a terminal event are adopted, orphaned claims and the logs
// of tombstones are deleted, and the in-memory index is built. Queued jobs
// stay queued and run once Start is called.
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
		jobs: map[string]*job{}, perSubject: map[string]int{}, queues: map[string][]*job{},
		blocked: map[string]bool{}, runs: map[*job]*runtime.Run{}, kick: make(chan struct{}, 1), quit: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	owner := o.HostID
	if o.LeaseOwner != "" {
		owner = o.LeaseOwner
	}
	if owner == "" {
		owner = "host-" + newUUID()
	}
	l, err := s.st.Acquire(ctx, keyLease, owner, o.Lease)
	if errors.Is(err, durable.ErrHeld) {
		return nil, protocol.Wrap(protocol.CodeJobWorkerBusy, err)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: acquire lease: %w", err)
	}
	s.lease = l
	if err := s.takeover(ctx); err != nil {
		_ = s.st.Release(context.WithoutCancel(ctx), keyLease, l.Token)
		return nil, fmt.Errorf("jobs: takeover: %w", err)
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

// takeover is the scan of Open (see the package doc for why each rule is
// right).
func (s *Service) takeover(ctx context.Context) error {
	var queued []*job
	err := s.listAll(ctx, prefixRecord, func(e durable.Entry) error {
		var r record
		if err := json.Unmarshal(e.Value, &r); err != nil {
			return fmt.Errorf("record %s: %w", e.Key, err)
		}
		j := &job{subject: r.Subject, rec: r, rev: e.Revision, cursor: r.Cursor, recBytes: int64(len(e.Value)), bytes: int64(len(e.Value)) + r.EventBytes}
		if terminalState(r.State) && !r.Tomb {
			j.expires.Store(r.ExpiresAt)
		}
		switch {
		case r.Tomb:
			j.bytes = 0
			if err := s.st.DeleteLog(ctx, eventLog(r.ID)); err != nil {
				return err
			}
		case r.State == StateQueued || r.State == StateRunning:
			if err := s.recoverJob(ctx, j); err != nil {
				return err
			}
			if j.rec.State == StateQueued {
				// A new revision fences a previous owner still alive
				// (partitioned, not dead): its CAS on the record fails.
				if err := s.put(ctx, j, j.rec); err != nil {
					return err
				}
				queued = append(queued, j)
			}
		}
		s.index(j)
		return nil
	})
	if err != nil {
		return err
	}
	// Claims without a record were never acknowledged.
	err = s.listAll(ctx, prefixKey, func(e durable.Entry) error {
		var c claim
		if json.Unmarshal(e.Value, &c) == nil && s.jobs[c.ID] != nil {
			return nil
		}
		return s.st.Delete(ctx, e.Key, e.Revision)
	})
	if err != nil {
		return err
	}
	// Queue in submission order.
	slices.SortStableFunc(queued, func(a, b *job) int {
		if a.rec.CreatedAt != b.rec.CreatedAt {
			return int(a.rec.CreatedAt - b.rec.CreatedAt)
		}
		return 0
	})
	for _, j := range queued {
		s.enqueueLocked(j, false)
	}
	s.liveBytes = 0
	for _, j := range s.jobs {
		if !j.rec.Tomb {
			s.liveBytes += j.bytes + liveReserve
		}
	}
	return nil
}

// recoverJob settles a queued or running record found at takeover.
func (s *Service) recoverJob(ctx context.Context, j *job) error {
	last, err := s.st.Last(ctx, eventLog(j.rec.ID))
	if err != nil {
		return err
	}
	j.cursor = last
	if last == 0 && j.rec.State == StateQueued {
		return nil // an ordinary queued job
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
		s.log.Info("job interrupted", "job", rec.ID)
	}
	j.bytes = j.recBytes + evBytes
	return s.finishRecord(ctx, j, rec, now)
}

// finishRecord writes rec as terminal with j's cursor and bytes.
func (s *Service) finishRecord(ctx context.Context, j *job, rec record, now time.Time) error {
	rec.Cursor = j.cursor
	rec.EventBytes = j.bytes - j.recBytes
	rec.UpdatedAt = max(now.UnixMilli(), rec.CreatedAt)
	rec.ExpiresAt = rec.UpdatedAt + max(s.o.Retention.Milliseconds(), 1)
	if err := s.put(ctx, j, rec); err != nil {
		return err
	}
	j.expires.Store(rec.ExpiresAt)
	return nil
}

// put CAS-writes rec over j's revision.
func (s *Service) put(ctx context.Context, j *job, rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	rev, err := s.st.Update(ctx, recordKey(rec.ID), b, j.rev)
	if err != nil {
		return err
	}
	if !rec.Tomb {
		// Records grow a little as they change state; count it.
		if d := int64(len(b)) - j.recBytes; d != 0 {
			j.recBytes = int64(len(b))
			s.addBytes(j, d)
		}
	}
	j.rec, j.rev = rec, rev
	return nil
}

// index adds a job found at takeover to the counts (nothing else runs
// yet; liveBytes is summed at the end of the scan).
func (s *Service) index(j *job) {
	s.jobs[j.rec.ID] = j
	s.count++
	s.perSubject[j.subject]++
}

// enqueueLocked puts a queued job at the back (or, returning from a BUSY
// attempt, the front) of its subject's queue.
func (s *Service) enqueueLocked(j *job, front bool) {
	subj := j.subject
	q := s.queues[subj]
	if len(q) == 0 && !slices.Contains(s.ring, subj) {
		s.ring = append(s.ring, subj)
	}
	if front {
		q = append([]*job{j}, q...)
	} else {
		q = append(q, j)
	}
	s.queues[subj] = q
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
	stripe := &s.submitMu[kh[0]%64]
	stripe.Lock()
	defer stripe.Unlock()

	now := s.o.Now().UnixMilli()
	rec := record{
		ID: newUUID(), Subject: p.Subject, KeyHash: kh, Fingerprint: fp, State: StateQueued,
		RunID: newUUID(), Provider: req.Provider, Model: req.Model, Tools: req.Tools, Request: raw,
		Credential: p.CredentialDigest, HostID: s.o.HostID, AccountID: account,
		CreatedAt: now, UpdatedAt: now,
	}
	c, exists, err := s.claimKey(ctx, kh, claim{ID: rec.ID, Fingerprint: fp})
	if err != nil {
		return Info{}, err
	}
	if exists {
		if c.Fingerprint != fp {
			return Info{}, protocol.New(protocol.CodeIdempotencyConflict)
		}
		s.mu.Lock()
		j := s.jobs[c.ID]
		s.mu.Unlock()
		if j != nil {
			j.mu.Lock()
			defer j.mu.Unlock()
			if j.rec.Tomb {
				return Info{}, protocol.New(protocol.CodeJobExpired)
			}
			return s.infoLocked(j), nil
		}
		rec.ID = c.ID // a claim whose record a crash (or error) left unwritten
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Info{}, err
	}
	if int64(len(b)) > s.o.MaxJobBytes {
		return Info{}, protocol.New(protocol.CodeJobRecordLimit)
	}
	if err := s.reserve(rec.Subject, int64(len(b))); err != nil {
		if !exists {
			_ = s.st.Delete(context.WithoutCancel(ctx), prefixKey+kh, 0)
		}
		return Info{}, err
	}
	rev, err := s.st.Create(ctx, recordKey(rec.ID), b)
	if err != nil {
		s.unreserve(rec.Subject, int64(len(b)))
		return Info{}, storeError(err)
	}
	j := &job{subject: rec.Subject, rec: rec, rev: rev, bytes: int64(len(b)), recBytes: int64(len(b))}
	info := s.infoLocked(j) // the accepted job, before a worker can take it
	s.mu.Lock()
	s.jobs[rec.ID] = j
	s.enqueueLocked(j, false)
	s.mu.Unlock()
	s.signal()
	return info, nil
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

// reserve counts a new record against the capacity limits
// (JOB_STORE_FULL) before it is written.
func (s *Service) reserve(subject string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count >= s.o.MaxJobs || s.perSubject[subject] >= s.o.MaxJobsPerSubject ||
		s.liveBytes+size+liveReserve > s.o.MaxBytes {
		return protocol.New(protocol.CodeJobStoreFull)
	}
	s.count++
	s.perSubject[subject]++
	s.liveBytes += size + liveReserve
	return nil
}

func (s *Service) unreserve(subject string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count--
	s.perSubject[subject]--
	s.liveBytes -= size + liveReserve
}

// available reports why the service cannot take requests now.
func (s *Service) available() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lostLease:
		pe := protocol.New(protocol.CodeJobLeaseLost)
		pe.Uncertain = true
		return pe
	case s.stopping:
		return protocol.New(protocol.CodeJobsUnavailable)
	}
	return nil
}

// lookup finds a job of p's subject (another subject's is JOB_NOT_FOUND),
// after the operation grant check (FORBIDDEN). Tombstones are JOB_EXPIRED.
// It returns the job locked.
func (s *Service) lookup(p *runtime.Principal, op, id string) (*job, error) {
	if !p.Can(op) {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	if err := s.available(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	if j == nil {
		return nil, protocol.New(protocol.CodeJobNotFound)
	}
	j.mu.Lock()
	if j.rec.Subject != p.Subject {
		j.mu.Unlock()
		return nil, protocol.New(protocol.CodeJobNotFound)
	}
	if j.rec.Tomb {
		j.mu.Unlock()
		return nil, protocol.New(protocol.CodeJobExpired)
	}
	if !covers(p, &j.rec) {
		j.mu.Unlock()
		return nil, protocol.New(protocol.CodeForbidden)
	}
	return j, nil
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

func (s *Service) infoLocked(j *job) Info {
	r := &j.rec
	i := Info{ID: r.ID, RunID: r.RunID, Provider: r.Provider, Model: r.Model, State: r.State,
		Cursor: j.cursor, CancelRequested: r.CancelRequested,
		CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt)}
	if terminalState(r.State) {
		i.ExpiresAt = fromMillis(r.ExpiresAt)
	}
	return i
}

// Read returns a job's JobInfo.
func (s *Service) Read(ctx context.Context, p *runtime.Principal, id string) (Info, error) {
	j, err := s.lookup(p, "jobs.read", id)
	if err != nil {
		return Info{}, err
	}
	defer j.mu.Unlock()
	return s.infoLocked(j), nil
}

// Events returns the page of committed events after sequence after (§2.1).
func (s *Service) Events(ctx context.Context, p *runtime.Principal, id string, after uint64, limit int) (Page, error) {
	if limit <= 0 || limit > MaxPageEvents {
		limit = MaxPageEvents
	}
	j, err := s.lookup(p, "jobs.read", id)
	if err != nil {
		return Page{}, err
	}
	cursor := j.cursor
	j.mu.Unlock()
	if after > cursor {
		return Page{}, protocol.New(protocol.CodeInvalidJobCursor)
	}
	var recs []durable.Record
	if after < cursor {
		if recs, err = s.st.Read(ctx, eventLog(id), after, limit, MaxPageBytes); err != nil {
			return Page{}, storeError(err)
		}
	}
	j.mu.Lock()
	info := s.infoLocked(j)
	j.mu.Unlock()
	page := Page{Job: info, Events: make([]json.RawMessage, 0, len(recs)), NextCursor: after}
	for _, r := range recs {
		if r.Seq > info.Cursor {
			break // appended, not yet counted: the next page has it
		}
		page.Events = append(page.Events, r.Data)
		page.NextCursor = r.Seq
	}
	page.HasMore = page.NextCursor < info.Cursor
	return page, nil
}

// Cancel cancels a job (§2.3): a terminal job is returned unchanged, a
// queued one is cancelled at once, a running one gets cancelRequested
// persisted and its run cancelled.
func (s *Service) Cancel(ctx context.Context, p *runtime.Principal, id string) (Info, error) {
	j, err := s.lookup(p, "jobs.cancel", id)
	if err != nil {
		return Info{}, err
	}
	defer j.mu.Unlock()
	switch {
	case terminalState(j.rec.State):
		return s.infoLocked(j), nil
	case j.rec.State == StateQueued && !j.dispatching:
		s.mu.Lock()
		s.dequeueLocked(j)
		s.mu.Unlock()
		if err := s.endQueuedLocked(ctx, j, runtime.EventRunCancelled, protocol.New(protocol.CodeCancelled)); err != nil {
			return Info{}, err
		}
		return s.infoLocked(j), nil
	}
	if !j.rec.CancelRequested {
		rec := j.rec
		rec.CancelRequested = true
		rec.UpdatedAt = max(s.o.Now().UnixMilli(), rec.CreatedAt)
		if err := s.put(ctx, j, rec); err != nil {
			return Info{}, storeError(err)
		}
	}
	if j.run != nil {
		j.run.Cancel(nil) // the terminal event comes back through the log
	}
	return s.infoLocked(j), nil
}

// dequeueLocked removes a queued job from its subject's queue.
func (s *Service) dequeueLocked(j *job) {
	q := s.queues[j.subject]
	if i := slices.Index(q, j); i >= 0 {
		s.queues[j.subject] = slices.Delete(q, i, i+1)
	}
}

// endQueuedLocked ends a job that never ran: a fencing rewrite of the
// record, the synthetic run.started and terminal event appended, then the
// record turned terminal (doc: the order takeover recovers from).
func (s *Service) endQueuedLocked(ctx context.Context, j *job, typ string, pe *protocol.Error) error {
	now := s.o.Now()
	rec := j.rec
	// The record is rewritten first, unchanged: a fence. An owner that
	// lost the store to another fails here, before touching the log.
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
	s.addBytes(j, int64(len(e1)+len(e2)))
	rec.State = stateOf(typ)
	if err := s.finishRecord(ctx, j, rec, now); err != nil {
		return storeError(err)
	}
	return nil
}

// addBytes counts appended event bytes.
func (s *Service) addBytes(j *job, n int64) {
	j.bytes += n
	s.mu.Lock()
	s.liveBytes += n
	s.mu.Unlock()
}
