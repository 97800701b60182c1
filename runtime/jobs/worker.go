package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// maintenanceInterval spaces the retention passes; sweepInterval the
// passes over stale cancel signals.
const (
	maintenanceInterval = time.Second
	sweepInterval       = 30 * time.Second
)

// Start begins dispatching queued jobs and renewing leases. Call it once
// the host serves requests.
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

// renewLoop renews every held per-job lease (and the maintenance lease)
// every lease/3. A fenced token, or no successful renewal for a whole
// lease, means another worker may have taken the job over: its run is
// aborted (JOB_LEASE_LOST) and nothing more is written for it.
func (s *Service) renewLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.renewAll()
	}
}

func (s *Service) renewAll() {
	ctx := context.Background()
	s.mu.Lock()
	list := make([]*job, 0, len(s.local))
	for _, j := range s.local {
		list = append(list, j)
	}
	maint, held := s.maint, s.maintHeld
	s.mu.Unlock()
	for _, j := range list {
		j.mu.Lock()
		tok, lost, renewed := j.token, j.lost, j.renewed
		j.mu.Unlock()
		if tok == 0 || lost {
			continue
		}
		_, err := s.st.Renew(ctx, runLease(j.id), tok, s.o.Lease)
		j.mu.Lock()
		switch {
		case j.token != tok:
			// Released meanwhile.
		case err == nil:
			j.renewed = time.Now()
		case errors.Is(err, durable.ErrFenced) || time.Since(renewed) >= s.o.Lease:
			s.log.Error("job lease lost", "job", j.id, "err", err)
			j.lost = true
			if j.run != nil {
				j.run.Cancel(leaseLost())
			}
		default:
			s.log.Warn("job lease renewal failed", "job", j.id, "err", err)
		}
		j.mu.Unlock()
	}
	if held {
		if _, err := s.st.Renew(ctx, keyMaint, maint.Token, s.o.Lease); errors.Is(err, durable.ErrFenced) {
			s.mu.Lock()
			s.maintHeld = false
			s.mu.Unlock()
		}
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
	s.refresh()
	for {
		select {
		case <-s.quit:
			return
		case <-s.kick:
		case <-t.C:
			s.mu.Lock()
			clear(s.blocked)
			s.mu.Unlock()
			s.refresh()
			s.revoke()
			s.watchCancels()
		}
		s.maintain()
		for _, c := range s.pick() {
			go s.dispatch(c.j, c.q, c.listed)
		}
	}
}

// refresh lists the shared queue: entries other hosts submitted appear,
// entries others finished disappear (those this worker learnt of while
// the list was read stay). A listing reads every entry, so it happens
// every poll interval, or every listInterval when polls are more
// frequent; this worker's own submissions it knows at once.
func (s *Service) refresh() {
	began := time.Now()
	s.mu.Lock()
	if began.Before(s.nextRefresh) {
		s.mu.Unlock()
		return
	}
	s.nextRefresh = began.Add(s.listAge() - s.o.PollInterval/2)
	s.mu.Unlock()
	listed := map[string]queued{}
	err := s.listAll(context.Background(), prefixQueue, func(e durable.Entry) error {
		var q queued
		_ = json.Unmarshal(e.Value, &q)
		listed[strings.TrimPrefix(e.Key, prefixQueue)] = q
		return nil
	})
	if err != nil {
		s.log.Warn("job queue not listed", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, k := range s.queue {
		if _, ok := listed[id]; !ok && k.added.Before(began) {
			delete(s.queue, id)
		}
	}
	for id, q := range listed {
		if _, ok := s.queue[id]; !ok {
			s.queue[id] = known{queued: q, added: began}
		}
	}
	now := time.Now()
	for id, until := range s.held {
		if _, ok := s.queue[id]; !ok || !until.After(now) {
			delete(s.held, id)
		}
	}
}

type candidate struct {
	j      *job
	q      queued
	listed bool // learnt from a listing of the shared queue
}

// pick takes the candidates of one dispatch window (fair dispatch, §2.3):
// rounds of one queued job per subject — the oldest by creation time —
// with the subjects in byte order starting after the subject served last,
// until the free workers are used or nothing is left. Every host orders
// the shared queue the same way; jobs this worker holds, jobs another
// worker holds, and subjects answered BUSY since the last tick sit out.
func (s *Service) pick() []candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || !s.started {
		return nil
	}
	free := s.o.Workers - s.active
	if free <= 0 || len(s.queue) == 0 {
		return nil
	}
	now := time.Now()
	bySubject := map[string][]string{}
	for id, k := range s.queue {
		if s.local[id] != nil || s.blocked[k.Subject] {
			continue
		}
		if until, ok := s.held[id]; ok && until.After(now) {
			continue
		}
		bySubject[k.Subject] = append(bySubject[k.Subject], id)
	}
	if len(bySubject) == 0 {
		return nil
	}
	subjects := make([]string, 0, len(bySubject))
	for subj, ids := range bySubject {
		subjects = append(subjects, subj)
		slices.SortFunc(ids, func(a, b string) int {
			if d := s.queue[a].Created - s.queue[b].Created; d != 0 {
				if d < 0 {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
	}
	slices.Sort(subjects)
	start, _ := slices.BinarySearch(subjects, s.last)
	if start < len(subjects) && subjects[start] == s.last {
		start++
	}
	var out []candidate
	for free > 0 {
		served := false
		for i := range subjects {
			if free == 0 {
				break
			}
			subj := subjects[(start+i)%len(subjects)]
			ids := bySubject[subj]
			if len(ids) == 0 {
				continue
			}
			id := ids[0]
			bySubject[subj] = ids[1:]
			j := &job{id: id}
			s.local[id] = j
			out = append(out, candidate{j: j, q: s.queue[id].queued, listed: !s.queue[id].own})
			s.last = subj
			free--
			served = true
		}
		if !served {
			break
		}
		start, _ = slices.BinarySearch(subjects, s.last)
		start++
	}
	s.active += len(out)
	s.wg.Add(len(out))
	return out
}

// dispatch takes one candidate's lease, then runs the dispatch checks and
// the run.
func (s *Service) dispatch(c *job, q queued, listed bool) {
	defer s.wg.Done()
	ran := false
	defer func() {
		s.mu.Lock()
		s.active--
		if ran {
			// A slot of the subject is free again.
			delete(s.blocked, q.Subject)
		}
		s.mu.Unlock()
		s.signal()
	}()
	ctx := context.Background()
	c.worker = true
	if listed && s.peek(ctx, c.id, q) {
		s.drop(ctx, c, false)
		return
	}
	j := s.take(ctx, c, q, true)
	if j == nil {
		return
	}
	j.mu.Lock()
	if j.rec.State != StateQueued || j.lost {
		s.dropLocked(ctx, j, !j.lost)
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
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			s.starting.RUnlock()
			j.mu.Lock()
			j.dispatching = false
			s.dropLocked(ctx, j, true)
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
	stop := s.stopping
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
	s.mu.Lock()
	delete(s.runs, j)
	s.mu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.run = nil
	switch {
	case j.lost:
		s.dropLocked(ctx, j, false)
	case terminalState(j.rec.State):
		s.settleLocked(ctx, j)
	case j.rec.State == StateRunning || j.cursor > 0:
		// The run began and ended without its terminal event in the
		// store (an append failed): interrupted, or left to the next
		// taker once the lease lapses if the store refuses that too.
		if err := s.interruptLocked(ctx, j); err != nil {
			s.log.Warn("job interrupt failed", "job", j.id, "code", string(protocol.CodeOf(err)))
			s.backoff(j.id)
			s.dropLocked(ctx, j, false)
			return
		}
		s.settleLocked(ctx, j)
	default:
		s.dropLocked(ctx, j, true)
	}
}

// peek reads the record of an entry this worker learnt of from a listing,
// before taking the entry's lease: such a listing is up to a poll interval
// old, so many of its entries are jobs another host has just ended (and is
// removing the entry of), or whose record another host is still writing —
// and for those an acquisition and a release of the lease would be two
// synced writes for nothing (a tenth of the bench's jobs paid them). It
// reports whether to leave the entry for now: no record yet and younger
// than orphanAge (a submission under way), or a record that ended less
// than settleGrace ago. An entry that stays past those is taken as before,
// which deletes an orphan or settles what a crash left. Queued and running
// records are taken at once: the lease decides.
func (s *Service) peek(ctx context.Context, id string, q queued) bool {
	e, err := s.st.Get(ctx, recordKey(id))
	now := s.o.Now()
	var r record
	switch {
	case errors.Is(err, durable.ErrNotFound):
		if q.Created > 0 && now.Sub(fromMillis(q.Created)) > orphanAge {
			return false
		}
		s.backoff(id)
		return true
	case err != nil || json.Unmarshal(e.Value, &r) != nil:
		return false // take decides (and backs off)
	case (r.Tomb || terminalState(r.State)) && now.Sub(fromMillis(r.UpdatedAt)) < s.settleGrace():
		s.mu.Lock()
		s.held[id] = time.Now().Add(s.settleGrace())
		s.mu.Unlock()
		return true
	}
	return false
}

// settleGrace is how long after a job ended its entry may still be listed
// because its host is removing it: two listings.
func (s *Service) settleGrace() time.Duration { return 2 * s.listAge() }

// notStartedLocked settles a candidate whose run did not start.
func (s *Service) notStartedLocked(ctx context.Context, j *job, pe *protocol.Error) {
	switch {
	case j.lost:
		// Another worker has the job; it is its business now.
		s.dropLocked(ctx, j, false)
	case j.rec.State == StateRunning || j.cursor > 0:
		// Events were committed although the start failed: the run
		// began, and a persistence failure interrupts (§2.3).
		if err := s.interruptLocked(ctx, j); err != nil {
			s.log.Warn("job interrupt failed", "job", j.rec.ID, "code", string(protocol.CodeOf(err)))
			s.backoff(j.id)
			s.dropLocked(ctx, j, false)
			return
		}
		s.settleLocked(ctx, j)
	case terminalState(j.rec.State):
		s.settleLocked(ctx, j)
	case waitable(pe.Code) && !j.rec.CancelRequested:
		// Stays queued: the lease goes back, any worker may try again.
		s.mu.Lock()
		if pe.Code == protocol.CodeBusy {
			s.blocked[j.subject] = true
		}
		s.mu.Unlock()
		s.dropLocked(ctx, j, true)
	default:
		typ, end := runtime.EventRunFailed, protocol.New(pe.Code)
		if waitable(pe.Code) {
			typ, end = runtime.EventRunCancelled, protocol.New(protocol.CodeCancelled)
		}
		if err := s.endQueuedLocked(ctx, j, typ, end); err != nil {
			s.log.Warn("job end failed", "job", j.rec.ID, "code", string(protocol.CodeOf(err)))
			s.backoff(j.id)
			s.dropLocked(ctx, j, !j.lost)
			return
		}
		s.settleLocked(ctx, j)
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
		if errors.Is(err, durable.ErrSequence) {
			j.lost = true
		}
		return storeError(err)
	}
	n := 0
	for _, e := range evs {
		n += len(e)
	}
	j.cursor = seq
	s.addPending(j, int64(n))
	rec.State = StateInterrupted
	return s.finishRecord(ctx, j, rec, now)
}

// addPending counts event bytes appended by this worker.
func (s *Service) addPending(j *job, n int64) {
	j.bytes += n
	j.pending += n
	s.mu.Lock()
	s.pending += n
	s.mu.Unlock()
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

// watchCancels looks for cancel signals of the jobs this worker runs
// (another host's Cancel persisted cancelRequested and wrote the signal):
// while something runs, one list of the signals every poll interval, or
// every listInterval when polls are more frequent.
func (s *Service) watchCancels() {
	s.mu.Lock()
	now := time.Now()
	if len(s.runs) == 0 || now.Before(s.nextWatch) {
		s.mu.Unlock()
		return
	}
	s.nextWatch = now.Add(s.listAge() - s.o.PollInterval/2)
	s.mu.Unlock()
	ctx := context.Background()
	es, err := s.st.List(ctx, prefixCancel, "", 0)
	if err != nil {
		return
	}
	for _, e := range es {
		id := strings.TrimPrefix(e.Key, prefixCancel)
		s.mu.Lock()
		j := s.local[id]
		s.mu.Unlock()
		if j == nil {
			continue
		}
		j.mu.Lock()
		if j.run != nil && !j.rec.CancelRequested {
			if r, err := s.st.Get(ctx, recordKey(id)); err == nil {
				var cur record
				if json.Unmarshal(r.Value, &cur) == nil && cur.CancelRequested {
					// The record's revision moved: the next put merges it.
					j.rec.CancelRequested = true
					j.run.Cancel(nil)
				}
			}
		}
		j.mu.Unlock()
	}
}

// maintain is the maintenance holder's pass (one host at a time, the
// maintenance lease): payloads past their expiry erased to tombstones
// (record first, then log, then the expiry key), and now and then the
// signals and claims crashes left behind.
func (s *Service) maintain() {
	now := s.o.Now()
	ctx := context.Background()
	s.mu.Lock()
	if now.Before(s.nextMaint) || s.stopping {
		s.mu.Unlock()
		return
	}
	s.nextMaint = now.Add(maintenanceInterval)
	held := s.maintHeld
	s.mu.Unlock()
	if !held {
		l, err := s.st.Acquire(ctx, keyMaint, s.owner, s.o.Lease)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.maint, s.maintHeld = l, true
		s.mu.Unlock()
	}
	es, err := s.st.List(ctx, prefixExpiry, "", 0)
	if err != nil {
		return
	}
	for _, e := range es {
		ms, id, ok := expiryOf(e.Key)
		if ok && ms > now.UnixMilli() {
			break
		}
		failed := false
		if ok {
			for _, id := range expiredIDs(e, id) {
				failed = s.tombstone(ctx, id) != nil || failed
			}
		}
		if !failed {
			_ = s.st.Delete(ctx, e.Key, e.Revision)
		}
	}
	s.mu.Lock()
	sweep := !now.Before(s.nextSweep)
	first := !s.swept
	if sweep {
		s.nextSweep = now.Add(sweepInterval)
		s.swept = true
	}
	s.mu.Unlock()
	if sweep {
		s.sweep(ctx, first)
	}
}

// tombstone erases an expired job's payload: the record becomes its
// tombstone (CAS), the log is deleted, the byte counter gives the job's
// bytes back.
func (s *Service) tombstone(ctx context.Context, id string) error {
	e, err := s.st.Get(ctx, recordKey(id))
	if errors.Is(err, durable.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var r record
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return nil
	}
	if !r.Tomb {
		if !terminalState(r.State) {
			return nil
		}
		t := r.tombstone()
		b, _ := json.Marshal(t)
		if _, err := s.st.Update(ctx, recordKey(id), b, e.Revision); err != nil {
			s.log.Warn("job tombstone failed", "job", id, "code", string(protocol.CodeOf(storeError(err))))
			return err
		}
		s.addLiveBytes(ctx, -(r.counted(len(e.Value)) + liveReserve))
	}
	if err := s.st.DeleteLog(ctx, eventLog(id)); err != nil {
		s.log.Warn("job log delete failed", "job", id)
		return err
	}
	return nil
}

// sweep deletes cancel signals of jobs that ended and, on the first pass
// of a maintenance holder, claims without a record that are older than
// orphanAge (submissions that crashed before acknowledging).
func (s *Service) sweep(ctx context.Context, claims bool) {
	_ = s.listAll(ctx, prefixCancel, func(e durable.Entry) error {
		id := strings.TrimPrefix(e.Key, prefixCancel)
		r, err := s.st.Get(ctx, recordKey(id))
		var rec record
		if errors.Is(err, durable.ErrNotFound) || (err == nil && json.Unmarshal(r.Value, &rec) == nil && terminalState(rec.State)) {
			_ = s.st.Delete(ctx, e.Key, e.Revision)
		}
		return nil
	})
	if !claims {
		return
	}
	now := s.o.Now()
	_ = s.listAll(ctx, prefixKey, func(e durable.Entry) error {
		var c claim
		if json.Unmarshal(e.Value, &c) == nil {
			if c.Created > 0 && now.Sub(fromMillis(c.Created)) < orphanAge {
				return nil
			}
			if _, err := s.st.Get(ctx, recordKey(c.ID)); !errors.Is(err, durable.ErrNotFound) {
				return nil
			}
		}
		_ = s.st.Delete(ctx, e.Key, e.Revision)
		return nil
	})
}

// Stop ends the worker (clean shutdown, §2.3): nothing more is dispatched,
// every job running here is interrupted (run.failed JOB_INTERRUPTED, never
// run again), and the leases are released. Queued jobs stay queued for
// the other hosts or the next start. Requests after Stop are
// JOBS_UNAVAILABLE.
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
	s.mu.Lock()
	maint, held := s.maint, s.maintHeld
	s.maintHeld = false
	s.mu.Unlock()
	if held {
		if err := s.st.Release(context.WithoutCancel(ctx), keyMaint, maint.Token); err != nil && !errors.Is(err, durable.ErrFenced) {
			return err
		}
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
	if seq == 1 && j.rec.State != StateQueued {
		return protocol.New(protocol.CodeJobEventConflict)
	}
	// The first event is the queued → running transition: its append
	// expects an empty log, so of two workers that both think they hold
	// the job exactly one commits it, and a taker that finds it committed
	// recovers the job instead of dispatching it. The record is not
	// rewritten for it (one synced write less per job); readers take the
	// running state from the log (see doc, Dispatch).
	data := ev.Data
	term := ev.Terminal()
	interrupted := false
	if term {
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if j.broken != nil || (stopping && !(j.rec.CancelRequested && ev.Type == runtime.EventRunCancelled)) {
			data = syntheticEnd(&j.rec, runtime.EventRunFailed, seq, now, interruptedError())
			interrupted = true
		}
	} else {
		n := int64(len(data))
		live := s.total.bytes()
		s.mu.Lock()
		full := live+s.pending+n > s.o.MaxBytes
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
	if seq == 1 {
		j.started = eventTime(data)
	}
	s.addPending(j, int64(len(data)))
	if !term {
		return nil
	}
	rec := j.rec
	rec.State = stateOf(ev.Type)
	if interrupted {
		rec.State = StateInterrupted
	}
	rec.Owner, rec.Token = s.owner, j.token // who ran it
	if err := s.finishRecord(ctx, j, rec, now); err != nil {
		return l.failed(err)
	}
	return nil
}

// failed records a refused write: the run ends, interrupted; a lost race
// means another worker has the job, which is no longer ours to touch.
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
