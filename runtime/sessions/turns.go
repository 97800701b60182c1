package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// turn is one turn of a session in progress in this process: from Begin
// to the run's terminal event.
type turn struct {
	m     *Manager
	id    string
	input string  // the user message of the turn
	kvRev uint64  // KV revision of the running record (only this turn writes it)
	rec   *record // the running record

	mu        sync.Mutex
	run       *runtime.Run // nil until bound
	modelWork bool         // step.started seen: the first provider call began
	committed bool         // Complete stored the turn
	deleted   bool         // the session was deleted: cancel, never write
	ended     bool         // the terminal event was seen, or the run never started
}

// Begin runs the checks of wire-extensions §3.2 in their order and marks
// the session running (host.SessionTurns). The returned request carries the
// session's history and instructions and no `session`; the options carry
// the native state, the commit (Complete) and the observer (Log). started
// must be called once, after Engine.StartWith: with the run, or with nil
// when it did not start, which gives the turn back (state ready).
func (m *Manager) Begin(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest) (*protocol.RunRequest, runtime.StartOptions, func(*runtime.Run), error) {
	var none runtime.StartOptions
	ref, err := ParseRef(req.Session)
	if err != nil {
		return nil, none, nil, err
	}
	// 1. The session owns history and instructions; context inputs are not
	// part of a session turn.
	if req.History != nil || req.Instructions != nil {
		return nil, none, nil, protocol.New(protocol.CodeSessionHistoryConflict)
	}
	if hasItems(req.Attachments) || len(req.Retrieval) > 0 {
		return nil, none, nil, protocol.New(protocol.CodeSessionContextUnsupported)
	}
	for {
		e, rec, err := m.check(ctx, p, req, ref)
		if err != nil {
			return nil, none, nil, err
		}
		// 5. The user message and an empty reply must fit.
		if !m.fits(append(rec.History[:len(rec.History):len(rec.History)],
			protocol.HistoryItem{Role: "user", Content: req.Input}, protocol.HistoryItem{Role: "assistant"}),
			rec.Instructions, rec.Native) {
			return nil, none, nil, protocol.New(protocol.CodeSessionContextLimit)
		}
		t := &turn{m: m, id: rec.ID, input: req.Input}
		m.mu.Lock()
		if m.turns[rec.ID] != nil {
			m.mu.Unlock()
			return nil, none, nil, protocol.New(protocol.CodeSessionBusy)
		}
		m.turns[rec.ID] = t
		m.mu.Unlock()
		running := *rec
		running.State, running.UpdatedMs, running.ExpiresMs, running.Owner = StateRunning, m.nowMs(), 0, m.owner()
		rev, err := m.kv.Update(ctx, key(rec.ID), mustJSON(&running), e.Revision)
		if err != nil {
			m.forget(t)
			if errors.Is(err, durable.ErrRevision) || errors.Is(err, durable.ErrNotFound) {
				continue // another writer won: the checks decide again
			}
			return nil, none, nil, storeErr("begin", err)
		}
		t.kvRev, t.rec = rev, &running
		m.idle(rec.ID, 0)
		run := *req
		run.Session = nil
		run.History = append([]protocol.HistoryItem(nil), rec.History...)
		run.Instructions = rec.Instructions
		opts := runtime.StartOptions{Log: t, Complete: t.complete}
		if rec.Mode == ModeNative {
			opts.Native = rec.Native
		}
		return &run, opts, t.bind, nil
	}
}

// check is steps 2–4 of §3.2 on the current record.
func (m *Manager) check(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest, ref Ref) (durable.Entry, *record, error) {
	// 2. Lookup, grants, account binding.
	e, rec, err := m.load(ctx, p.Subject, ref.ID)
	if err != nil {
		return e, nil, err
	}
	if !p.Can("sessions.continue") || !p.Providers[rec.Provider] {
		return e, nil, protocol.New(protocol.CodeForbidden)
	}
	inst := m.instance(rec.Provider)
	if inst == nil || inst.AccountID != rec.AccountID || m.cfg.HostID != rec.HostID {
		return e, nil, protocol.New(protocol.CodeSessionAccountChanged)
	}
	// 3. Provider and model, and the mode's capability.
	if req.Provider != rec.Provider || req.Model != rec.Model {
		return e, nil, protocol.New(protocol.CodeSessionProviderMismatch)
	}
	if !inst.Capabilities[capability(rec.Mode)] {
		return e, nil, protocol.New(protocol.CodeUnsupportedContinuation)
	}
	// 4. Revision and state.
	if ref.Revision != rec.Revision {
		return e, nil, protocol.New(protocol.CodeSessionRevisionConflict)
	}
	switch rec.State {
	case StateRunning:
		if m.staleTurn(ctx, e, rec) {
			return e, nil, protocol.New(protocol.CodeSessionInterrupted)
		}
		return e, nil, protocol.New(protocol.CodeSessionBusy)
	case StateInterrupted:
		return e, nil, protocol.New(protocol.CodeSessionInterrupted)
	}
	return e, rec, nil
}

// CheckReplay is the session part of an idempotent replay (§3.5): the
// continue and provider grants, access, and the provider/model match. The
// revision is not checked and nothing changes; a deleted session cannot
// be replayed into (SESSION_NOT_FOUND).
func (m *Manager) CheckReplay(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest) error {
	ref, err := ParseRef(req.Session)
	if err != nil {
		return err
	}
	_, rec, err := m.load(ctx, p.Subject, ref.ID)
	if err != nil {
		return err
	}
	if !p.Can("sessions.continue") || !p.Providers[rec.Provider] {
		return protocol.New(protocol.CodeForbidden)
	}
	if req.Provider != rec.Provider || req.Model != rec.Model {
		return protocol.New(protocol.CodeSessionProviderMismatch)
	}
	return nil
}

// hasItems reports whether a raw JSON array has at least one element.
func hasItems(raw json.RawMessage) bool {
	b := trimSpace(raw)
	if len(b) == 0 {
		return false
	}
	return !(len(b) >= 2 && b[0] == '[' && len(trimSpace(b[1:len(b)-1])) == 0)
}

// forget drops t from the turns in progress if it is still the entry.
func (m *Manager) forget(t *turn) {
	m.mu.Lock()
	if m.turns[t.id] == t {
		delete(m.turns, t.id)
	}
	m.mu.Unlock()
}

// bind is the started callback of Begin.
func (t *turn) bind(run *runtime.Run) {
	t.mu.Lock()
	if run == nil {
		end := !t.ended
		t.ended = true
		t.mu.Unlock()
		if end {
			t.finish(false)
		}
		return
	}
	t.run = run
	cancel := t.deleted && !t.ended
	t.mu.Unlock()
	if cancel {
		run.Cancel(protocol.New(protocol.CodeSessionDeleted))
	}
}

// deleteSession marks the turn's session deleted and cancels its run.
func (t *turn) deleteSession() {
	t.mu.Lock()
	t.deleted = true
	run := t.run
	t.mu.Unlock()
	if run != nil {
		run.Cancel(protocol.New(protocol.CodeSessionDeleted))
	}
}

// Append observes the run's events (runtime.EventLog, called with the
// run's lock held: it never calls into the run). step.started means model
// work began; the terminal event ends the turn.
func (t *turn) Append(_ context.Context, ev runtime.Event) error {
	switch {
	case ev.Type == runtime.EventStepStarted:
		t.mu.Lock()
		t.modelWork = true
		t.mu.Unlock()
	case ev.Terminal():
		t.mu.Lock()
		end := !t.ended
		t.ended = true
		modelWork := t.modelWork
		t.mu.Unlock()
		if end {
			t.finish(modelWork)
		}
	}
	return nil
}

// finish ends a turn that did not commit: running → interrupted when model
// work had started, else back to ready; retention starts again.
func (t *turn) finish(modelWork bool) {
	m := t.m
	m.forget(t)
	t.mu.Lock()
	skip := t.committed || t.deleted
	t.mu.Unlock()
	if skip {
		return
	}
	next := *t.rec
	next.State = StateReady
	if modelWork {
		next.State = StateInterrupted
	}
	now := m.nowMs()
	next.UpdatedMs, next.ExpiresMs = now, now+m.retentionMs()
	ctx := context.Background()
	if _, err := m.kv.Update(ctx, key(t.id), mustJSON(&next), t.kvRev); err != nil {
		if !errors.Is(err, durable.ErrRevision) && !errors.Is(err, durable.ErrNotFound) {
			// The record stays running; the next start interrupts it.
			m.log.Warn("session turn end not stored", "session", t.id, "err", err)
		}
		return
	}
	m.idle(t.id, next.ExpiresMs)
}

// complete commits the turn (StartOptions.Complete): the user message and
// the final visible reply are appended, the native state of a native
// session stored, the revision moves on and the session is ready again;
// res.Session is the SessionInfo of the next revision.
func (t *turn) complete(res *protocol.RunResult, native json.RawMessage) error {
	m := t.m
	t.mu.Lock()
	deleted := t.deleted
	t.mu.Unlock()
	if deleted {
		return protocol.New(protocol.CodeSessionDeleted)
	}
	next := *t.rec
	next.History = append(next.History[:len(next.History):len(next.History)],
		protocol.HistoryItem{Role: "user", Content: t.input},
		protocol.HistoryItem{Role: "assistant", Content: res.Text})
	next.Native = nil
	if next.Mode == ModeNative && len(native) > 0 {
		if !json.Valid(native) {
			return protocol.New(protocol.CodeInvalidSessionState)
		}
		next.Native = native
	}
	if !m.fits(next.History, next.Instructions, next.Native) || next.Revision >= MaxRevision {
		return protocol.New(protocol.CodeSessionContextLimit)
	}
	now := m.nowMs()
	next.Revision++
	next.State, next.UpdatedMs, next.ExpiresMs = StateReady, now, now+m.retentionMs()
	if _, err := m.kv.Update(context.Background(), key(t.id), mustJSON(&next), t.kvRev); err != nil {
		if errors.Is(err, durable.ErrRevision) || errors.Is(err, durable.ErrNotFound) {
			return protocol.New(protocol.CodeSessionDeleted)
		}
		return storeErr("commit", err)
	}
	t.mu.Lock()
	t.committed = true
	t.mu.Unlock()
	m.idle(t.id, next.ExpiresMs)
	res.Session = mustJSON(next.info())
	return nil
}

// staleTurn interrupts a running record whose owner is another process
// that is gone (several hosts on one store: it died mid-turn), and
// reports whether it did. This process's own turns, and every turn
// without presence, are settled by the turn itself or by New.
func (m *Manager) staleTurn(ctx context.Context, e durable.Entry, rec *record) bool {
	if m.cfg.Presence == nil || rec.Owner == "" || rec.Owner == m.cfg.Presence.ID() {
		return false
	}
	if live, err := m.ownerAlive(ctx, rec); err != nil || live {
		return false
	}
	now := m.nowMs()
	gone := *rec
	gone.State, gone.UpdatedMs, gone.ExpiresMs = StateInterrupted, now, now+m.retentionMs()
	if _, err := m.kv.Update(ctx, e.Key, mustJSON(&gone), e.Revision); err != nil {
		return false // someone else settled it: the next check sees how
	}
	m.log.Info("session turn interrupted: its host is gone", "session", rec.ID)
	m.idle(rec.ID, gone.ExpiresMs)
	return true
}
