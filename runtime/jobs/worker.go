package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// maintenanceInterval spaces the retention passes.
const maintenanceInterval = time.Second

// Start begins dispatching queued jobs and renewing the lease. Call it
// once the host serves requests.
func (s *Service) Start() {
	s.mu.Lock()
	if s.started || s.stopping {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.mu.Unlock()
	s.wg.Add(2)
	go s.renewLoop()
	go s.pollLoop()
}

// renewLoop renews the lease every lease/3. A fenced token, or no
// successful renewal for a whole lease, means another owner may have taken
// over: the service stops.
func (s *Service) renewLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.o.Lease / 3)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		_, err := s.st.Renew(context.Background(), keyLease, s.lease.Token, s.o.Lease)
		if err == nil {
			last = time.Now()
			continue
		}
		if errors.Is(err, durable.ErrFenced) || time.Since(last) >= s.o.Lease {
			s.log.Error("job worker lost its lease", "err", err)
			s.loseLease()
			return
		}
		s.log.Warn("job lease renewal failed", "err", err)
	}
}

// loseLease stops dispatching and aborts every run: their jobs belong to
// the next owner, which interrupts them.
func (s *Service) loseLease() {
	s.mu.Lock()
	s.lostLease = true
	runs := s.activeRunsLocked()
	s.mu.Unlock()
	pe := protocol.New(protocol.CodeJobLeaseLost)
	pe.Uncertain = true
	for _, r := range runs {
		r.Cancel(pe)
	}
}

func (s *Service) activeRunsLocked() []*runtime.Run {
	var out []*runtime.Run
	for _, r := range s.runs {
		out = append(out, r)
	}
	return out
}

func (s *Service) pollLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.kick:
		case <-t.C:
			s.mu.Lock()
			clear(s.blocked)
			s.mu.Unlock()
			s.revoke()
		}
		s.maintain()
		for _, j := range s.pick() {
			go s.dispatch(j)
		}
	}
}

// pick takes the candidates of one dispatch window (fair dispatch, §2.3):
// rounds of one queued job per subject, starting at the rotating offset,
// until the free workers are used or nothing is left. The offset moves past
// the last subject served, so a subject whose jobs stay BUSY cannot hold
// the window. Subjects answered BUSY since the last tick sit out.
func (s *Service) pick() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.lostLease || len(s.ring) == 0 {
		return nil
	}
	free := s.o.Workers - s.active
	var out []*job
	for free > 0 {
		n := len(s.ring)
		start := s.rr % n
		last := -1
		for i := 0; i < n && free > 0; i++ {
			idx := (start + i) % n
			subj := s.ring[idx]
			q := s.queues[subj]
			if s.blocked[subj] || len(q) == 0 {
				continue
			}
			out = append(out, q[0])
			s.queues[subj] = q[1:]
			free--
			last = idx
		}
		if last < 0 {
			break
		}
		s.rr = last + 1
	}
	// Drop subjects with nothing queued; rr keeps pointing at the subject
	// that was next.
	nextPos := s.rr % len(s.ring)
	ring := make([]string, 0, len(s.ring))
	rr := 0
	for i, subj := range s.ring {
		if i == nextPos {
			rr = len(ring)
		}
		if len(s.queues[subj]) > 0 {
			ring = append(ring, subj)
		} else {
			delete(s.queues, subj)
		}
	}
	s.ring, s.rr = ring, rr
	s.active += len(out)
	s.wg.Add(len(out))
	return out
}

// dispatch runs one candidate: the dispatch checks, then the run.
func (s *Service) dispatch(j *job) {
	defer s.wg.Done()
	ran := false
	defer func() {
		s.mu.Lock()
		s.active--
		if ran {
			// A slot of the subject is free again.
			delete(s.blocked, j.subject)
			delete(s.runs, j)
		}
		s.mu.Unlock()
		if ran {
			s.signal()
		}
	}()
	ctx := context.Background()
	j.mu.Lock()
	if j.rec.State != StateQueued || j.lost {
		j.mu.Unlock()
		return
	}
	j.dispatching = true
	rec := j.rec
	j.mu.Unlock()

	p, req, perr := s.checks(&rec)
	var run *runtime.Run
	var err error
	if perr == nil {
		// Stop waits for starts under way (starting) before it cancels the
		// running jobs, and no start begins once it is stopping: a job
		// still queued when a clean shutdown begins stays queued, rather
		// than taking the slot a cancelled job frees and being interrupted
		// at once.
		s.starting.RLock()
		s.mu.Lock()
		stopping := s.stopping || s.lostLease
		s.mu.Unlock()
		if stopping {
			s.starting.RUnlock()
			j.mu.Lock()
			j.dispatching = false
			j.mu.Unlock()
			return
		}
		run, err = s.o.Engine.StartWith(ctx, p, req, runtime.ModeStream, runtime.StartOptions{
			Log: &jobLog{s: s, j: j}, RunID: rec.RunID,
		})
		s.starting.RUnlock()
		if err != nil {
			perr = protocol.AsPublic(err)
		}
	}
	j.mu.Lock()
	j.dispatching = false
	if perr != nil {
		s.notStartedLocked(ctx, j, perr)
		j.mu.Unlock()
		return
	}
	j.run = run
	ran = true
	s.mu.Lock()
	stop := s.stopping || s.lostLease
	s.runs[j] = run
	s.mu.Unlock()
	if j.rec.CancelRequested {
		run.Cancel(nil)
	}
	if stop {
		run.Cancel(interruptedError())
	}
	j.mu.Unlock()
	// The events are in the log already; the queue only has to drain.
	for {
		if _, err := run.Next(ctx); err != nil {
			break
		}
	}
	<-run.Done()
	j.mu.Lock()
	j.run = nil
	j.mu.Unlock()
}

// notStartedLocked settles a candidate whose run did not start.
func (s *Service) notStartedLocked(ctx context.Context, j *job, pe *protocol.Error) {
	switch {
	case j.lost:
		// Another owner has the store; the job is its business now.
	case j.rec.State == StateRunning:
		// The record turned running but run.started was not committed:
		// nothing ran, but a persistence failure interrupts (§2.3).
		if err := s.interruptLocked(ctx, j); err != nil {
			s.log.Warn("job interrupt failed", "job", j.rec.ID, "code", string(protocol.CodeOf(err)))
		}
	case j.rec.State != StateQueued:
		// Cancelled meanwhile.
	case waitable(pe.Code) && !j.rec.CancelRequested:
		s.mu.Lock()
		if pe.Code == protocol.CodeBusy {
			s.blocked[j.subject] = true
		}
		if !s.stopping {
			s.enqueueLocked(j, true)
		}
		s.mu.Unlock()
	default:
		typ, end := runtime.EventRunFailed, protocol.New(pe.Code)
		if waitable(pe.Code) {
			typ, end = runtime.EventRunCancelled, protocol.New(protocol.CodeCancelled)
		}
		if err := s.endQueuedLocked(ctx, j, typ, end); err != nil {
			s.log.Warn("job end failed", "job", j.rec.ID, "code", string(protocol.CodeOf(err)))
		}
	}
}

// waitable codes leave a job queued: no slot now, try again later.
func waitable(c protocol.Code) bool {
	return c == protocol.CodeBusy || c == protocol.CodeQueueFull || c == protocol.CodeHostShuttingDown
}

// checks are the dispatch checks of §2.3: the submitting credential's
// current grants (same subject, submit still granted), the request
// re-validated, the account binding unchanged.
func (s *Service) checks(rec *record) (*runtime.Principal, *protocol.RunRequest, *protocol.Error) {
	p := s.o.Resolve(rec.Credential)
	if p == nil || p.Subject != rec.Subject || !p.Can("jobs.submit") || !covers(p, rec) {
		return nil, nil, protocol.New(protocol.CodeForbidden)
	}
	var req protocol.RunRequest
	if err := json.Unmarshal(rec.Request, &req); err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeInvalidJob, err)
	}
	if err := s.o.Engine.Validate(p, &req); err != nil {
		return nil, nil, protocol.AsPublic(err)
	}
	if s.o.HostID != rec.HostID || s.o.Account(rec.Provider) != rec.AccountID {
		return nil, nil, protocol.New(protocol.CodeJobAccountChanged)
	}
	return p, &req, nil
}

// interruptLocked ends a running job whose run is gone: run.failed
// JOB_INTERRUPTED after what the log holds (a synthetic run.started first
// if it is empty).
func (s *Service) interruptLocked(ctx context.Context, j *job) error {
	now := s.o.Now()
	rec := j.rec
	var evs [][]byte
	seq := j.cursor
	if seq == 0 {
		seq++
		evs = append(evs, syntheticStarted(&rec, seq, now))
	}
	seq++
	evs = append(evs, syntheticEnd(&rec, runtime.EventRunFailed, seq, now, interruptedError()))
	if _, err := s.st.Append(ctx, eventLog(rec.ID), j.cursor, evs...); err != nil {
		return storeError(err)
	}
	n := 0
	for _, e := range evs {
		n += len(e)
	}
	j.cursor = seq
	s.addBytes(j, int64(n))
	rec.State = StateInterrupted
	return s.finishRecord(ctx, j, rec, now)
}

// revoke aborts running jobs whose submitting credential no longer holds
// the grants (§2.3, grant revocation): the run ends run.cancelled FORBIDDEN.
func (s *Service) revoke() {
	s.mu.Lock()
	type active struct {
		j   *job
		run *runtime.Run
	}
	var list []active
	for j, r := range s.runs {
		list = append(list, active{j, r})
	}
	s.mu.Unlock()
	for _, a := range list {
		a.j.mu.Lock()
		rec := a.j.rec
		a.j.mu.Unlock()
		p := s.o.Resolve(rec.Credential)
		if p == nil || p.Subject != rec.Subject || !p.Can("jobs.submit") || !covers(p, &rec) {
			a.run.Cancel(protocol.New(protocol.CodeForbidden))
		}
	}
}

// maintain erases the payloads of jobs past their expiry to tombstones:
// the record first, then the log (see doc).
func (s *Service) maintain() {
	now := s.o.Now()
	s.mu.Lock()
	if now.Before(s.nextMaint) {
		s.mu.Unlock()
		return
	}
	s.nextMaint = now.Add(maintenanceInterval)
	var due []*job
	for _, j := range s.jobs {
		if ms := j.expires.Load(); ms > 0 && ms <= now.UnixMilli() {
			due = append(due, j)
		}
	}
	s.mu.Unlock()
	ctx := context.Background()
	for _, j := range due {
		j.mu.Lock()
		if j.rec.Tomb || j.lost {
			j.mu.Unlock()
			continue
		}
		tomb := j.rec.tombstone()
		if err := s.put(ctx, j, tomb); err != nil {
			s.log.Warn("job tombstone failed", "job", j.rec.ID, "code", string(protocol.CodeOf(storeError(err))))
			j.mu.Unlock()
			continue
		}
		j.expires.Store(0)
		if err := s.st.DeleteLog(ctx, eventLog(j.rec.ID)); err != nil {
			s.log.Warn("job log delete failed", "job", j.rec.ID)
		}
		s.mu.Lock()
		s.liveBytes -= j.bytes + liveReserve
		s.mu.Unlock()
		j.bytes, j.cursor = 0, 0
		j.mu.Unlock()
	}
}

// Stop ends the worker (clean shutdown, §2.3): nothing more is dispatched,
// every running job is interrupted (run.failed JOB_INTERRUPTED, never run
// again), and the lease is released. Queued jobs stay queued. Requests
// after Stop are JOBS_UNAVAILABLE.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	s.mu.Unlock()
	// Let starts under way finish (no new one begins now), so that every
	// run this service started is in s.runs.
	s.starting.Lock()
	s.starting.Unlock()
	s.mu.Lock()
	runs := s.activeRunsLocked()
	lost := s.lostLease
	s.mu.Unlock()
	close(s.quit)
	for _, r := range runs {
		r.Cancel(interruptedError())
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if lost {
		return nil
	}
	if err := s.st.Release(context.WithoutCancel(ctx), keyLease, s.lease.Token); err != nil && !errors.Is(err, durable.ErrFenced) {
		return err
	}
	return nil
}

// jobLog is the run's EventLog: the commit barrier. Every event is appended
// to the job's log (expected last sequence = the previous one) before the
// engine goes on, so the run never gets ahead of what is durable.
type jobLog struct {
	s *Service
	j *job
}

func (l *jobLog) Append(ctx context.Context, ev runtime.Event) error {
	s, j := l.s, l.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return leaseLost()
	}
	seq := uint64(ev.Sequence)
	now := s.o.Now()
	if seq == 1 {
		if j.rec.State != StateQueued {
			return protocol.New(protocol.CodeJobEventConflict)
		}
		rec := j.rec
		rec.State = StateRunning
		rec.UpdatedAt = max(now.UnixMilli(), rec.CreatedAt)
		if err := s.put(ctx, j, rec); err != nil {
			return l.failed(err)
		}
	}
	data := ev.Data
	term := ev.Terminal()
	interrupted := false
	if term {
		s.mu.Lock()
		stopping := s.stopping || s.lostLease
		s.mu.Unlock()
		if j.broken != nil || (stopping && !(j.rec.CancelRequested && ev.Type == runtime.EventRunCancelled)) {
			data = syntheticEnd(&j.rec, runtime.EventRunFailed, seq, now, interruptedError())
			interrupted = true
		}
	} else {
		n := int64(len(data))
		s.mu.Lock()
		full := s.liveBytes+n > s.o.MaxBytes
		s.mu.Unlock()
		if n > MaxEventBytes || j.bytes+n > s.o.MaxJobBytes || full {
			j.broken = protocol.New(protocol.CodeJobRecordLimit)
			return j.broken
		}
	}
	if _, err := s.st.Append(ctx, eventLog(j.rec.ID), seq-1, data); err != nil {
		return l.failed(err)
	}
	j.cursor = seq
	s.addBytes(j, int64(len(data)))
	if !term {
		return nil
	}
	rec := j.rec
	rec.State = stateOf(ev.Type)
	if interrupted {
		rec.State = StateInterrupted
	}
	if err := s.finishRecord(ctx, j, rec, now); err != nil {
		return l.failed(err)
	}
	return nil
}

// failed records a refused write: the run ends, interrupted; a lost race
// means another owner has the job, which is no longer ours to touch.
func (l *jobLog) failed(err error) error {
	pe := storeError(err)
	if pe.Code == protocol.CodeJobLeaseLost {
		l.j.lost = true
	}
	l.j.broken = pe
	return pe
}

func leaseLost() *protocol.Error {
	pe := protocol.New(protocol.CodeJobLeaseLost)
	pe.Uncertain = true
	return pe
}
