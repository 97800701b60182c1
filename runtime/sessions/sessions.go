package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Defaults and bounds of the settings (wire-extensions §3.5, §9).
const (
	DefaultMaxEntries     = 1000
	MaxMaxEntries         = 100_000
	DefaultMaxMessages    = 100
	MinMaxMessages        = 2
	MaxMaxMessages        = 100
	DefaultMaxRecordBytes = 1_000_000
	MaxMaxRecordBytes     = 1_000_000
	MaxRetentionMs        = 2_147_483_647
)

// States of a session.
const (
	StateReady       = "ready"
	StateRunning     = "running"
	StateInterrupted = "interrupted"
)

// Store is what the feature needs of the host's store: keys with
// compare-and-set on their revision.
type Store = durable.KV

// Config are the [sessions] settings and the host identity.
type Config struct {
	// Retention is the idle retention (1 ms … 2,147,483,647 ms). Required.
	Retention time.Duration
	// MaxEntries, MaxMessages and MaxRecordBytes: zero means the default.
	MaxEntries, MaxMessages, MaxRecordBytes int
	// HostID is usage.host_id: half of the account binding. Empty: the
	// host has no persistent identity, so no provider has an explicit
	// account (SESSION_ACCOUNT_REQUIRED).
	HostID string
	// Source gives the provider instances as they are now
	// (*runtime.Engine: a configuration reload can change an instance's
	// account, models or capabilities, and the checks must see that).
	// Nil: Providers, fixed.
	Source interface {
		Providers() []*runtime.ProviderInstance
	}
	// Providers are the provider instances when there is no Source.
	Providers []*runtime.ProviderInstance
	// Logger; nil discards. Now is the clock; nil is time.Now.
	Logger *slog.Logger
	Now    func() time.Time
	// Presence, when several hosts share the store, is this process's
	// liveness there: a running turn records its owner, and only a turn
	// whose owner is gone is interrupted (at New, or when a request finds
	// it); another live host's turn stays SESSION_BUSY. Nil: one host
	// owns the store, and every turn found running at New is interrupted.
	Presence *durable.Presence
}

// Manager serves sessions. Create it with New; Close stops its timer.
type Manager struct {
	kv    Store
	cfg   Config
	insts map[string]*runtime.ProviderInstance
	log   *slog.Logger

	mu sync.Mutex
	// turns are this process's turns in progress, by session id: the run
	// a delete cancels.
	turns map[string]*turn
	// expiry is the expiry (unix ms) of every idle session, for the timer.
	expiry map[string]int64
	count  int // records in the store
	timer  *time.Timer
	armed  int64 // expiry the timer is set for (0: none)
	closed bool
}

const keyPrefix = "sessions/v1/"

// ownerAlive reports whether a running record's turn is another live
// process's (Config.Presence); without presence no other process shares
// the store.
func (m *Manager) ownerAlive(ctx context.Context, rec *record) (bool, error) {
	p := m.cfg.Presence
	if p == nil || rec.Owner == "" || rec.Owner == p.ID() {
		return false, nil
	}
	return p.Alive(ctx, rec.Owner)
}

// owner is the id a turn of this process records.
func (m *Manager) owner() string {
	if m.cfg.Presence == nil {
		return ""
	}
	return m.cfg.Presence.ID()
}

func key(id string) string { return keyPrefix + id }

// record is the stored session (layout v1).
type record struct {
	V            int                    `json:"v"`
	ID           string                 `json:"id"`
	Subject      string                 `json:"subject"`
	Provider     string                 `json:"provider"`
	Model        string                 `json:"model"`
	Mode         string                 `json:"mode"`
	HostID       string                 `json:"hostId"`
	AccountID    string                 `json:"accountId"`
	Revision     int64                  `json:"revision"`
	State        string                 `json:"state"`
	CreatedMs    int64                  `json:"createdAt"`
	UpdatedMs    int64                  `json:"updatedAt"`
	ExpiresMs    int64                  `json:"expiresAt,omitempty"` // 0 while running
	History      []protocol.HistoryItem `json:"history"`
	Instructions *string                `json:"instructions,omitempty"`
	Native       json.RawMessage        `json:"native,omitempty"`
	// Owner is the presence id of the process running a turn (several
	// hosts on one store); meaningful only while running.
	Owner string `json:"owner,omitempty"`
}

// New opens the feature on kv: it counts the stored sessions, removes the
// expired ones, turns every turn left `running` by a previous process
// into `interrupted` (see the package doc) and arms the expiry timer.
func New(ctx context.Context, kv Store, cfg Config) (*Manager, error) {
	if cfg.Retention < time.Millisecond || cfg.Retention > MaxRetentionMs*time.Millisecond {
		return nil, fmt.Errorf("sessions: retention %v out of range 1ms..%dms", cfg.Retention, MaxRetentionMs)
	}
	def := func(v *int, d, lo, hi int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < lo || *v > hi {
			return fmt.Errorf("sessions: %s %d out of range %d..%d", name, *v, lo, hi)
		}
		return nil
	}
	if err := errors.Join(
		def(&cfg.MaxEntries, DefaultMaxEntries, 1, MaxMaxEntries, "max_entries"),
		def(&cfg.MaxMessages, DefaultMaxMessages, MinMaxMessages, MaxMaxMessages, "max_messages"),
		def(&cfg.MaxRecordBytes, DefaultMaxRecordBytes, 1, MaxMaxRecordBytes, "max_record_bytes"),
	); err != nil {
		return nil, err
	}
	m := &Manager{
		kv: kv, cfg: cfg, log: cfg.Logger,
		insts:  map[string]*runtime.ProviderInstance{},
		turns:  map[string]*turn{},
		expiry: map[string]int64{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, p := range cfg.Providers {
		m.insts[p.ID] = p
	}
	if err := m.recover(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.scheduleLocked()
	m.mu.Unlock()
	return m, nil
}

// recover is New's pass over the stored sessions, a page at a time.
func (m *Manager) recover(ctx context.Context) error {
	now := m.nowMs()
	after := ""
	for {
		page, err := m.kv.List(ctx, keyPrefix, after, 100)
		if err != nil {
			return fmt.Errorf("sessions: list: %w", err)
		}
		for _, e := range page {
			after = e.Key
			var rec record
			if err := json.Unmarshal(e.Value, &rec); err != nil {
				return fmt.Errorf("sessions: record %s: %w", e.Key, err)
			}
			switch {
			case rec.State == StateRunning:
				if live, err := m.ownerAlive(ctx, &rec); err != nil {
					return fmt.Errorf("sessions: owner of %s: %w", e.Key, err)
				} else if live {
					break // another host's turn, going on there
				}
				rec.State, rec.UpdatedMs, rec.ExpiresMs = StateInterrupted, now, now+m.retentionMs()
				if _, err := m.kv.Update(ctx, e.Key, mustJSON(&rec), e.Revision); err != nil {
					return fmt.Errorf("sessions: interrupt %s: %w", e.Key, err)
				}
				m.log.Info("session turn interrupted by a restart", "session", rec.ID)
			case now >= rec.ExpiresMs:
				if err := m.kv.Delete(ctx, e.Key, e.Revision); err != nil {
					return fmt.Errorf("sessions: expire %s: %w", e.Key, err)
				}
				continue
			}
			m.count++
			if rec.ExpiresMs > 0 { // not another host's running turn
				m.expiry[rec.ID] = rec.ExpiresMs
			}
		}
		if len(page) < 100 {
			return nil
		}
	}
}

// Close stops the expiry timer. Turns in progress are not touched.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

func (m *Manager) now() time.Time {
	if m.cfg.Now != nil {
		return m.cfg.Now()
	}
	return time.Now()
}

func (m *Manager) nowMs() int64       { return m.now().UnixMilli() }
func (m *Manager) retentionMs() int64 { return m.cfg.Retention.Milliseconds() }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // records hold only JSON-safe values (native state is validated)
	}
	return b
}

// Info is the wire SessionInfo.
type Info struct {
	ID        string `json:"id"`
	Revision  int64  `json:"revision"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Mode      string `json:"mode"`
	State     string `json:"state"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// Snapshot is the wire SessionSnapshot: the public export, visible
// messages only.
type Snapshot struct {
	Session      Info                   `json:"session"`
	History      []protocol.HistoryItem `json:"history"`
	Instructions *string                `json:"instructions,omitempty"`
}

const timestampLayout = "2006-01-02T15:04:05.000Z"

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format(timestampLayout) }

func (r *record) info() Info {
	in := Info{
		ID: r.ID, Revision: r.Revision, Provider: r.Provider, Model: r.Model, Mode: r.Mode, State: r.State,
		CreatedAt: stamp(r.CreatedMs), UpdatedAt: stamp(r.UpdatedMs),
	}
	if r.State != StateRunning {
		in.ExpiresAt = stamp(r.ExpiresMs)
	}
	return in
}

func (r *record) snapshot() []byte {
	h := r.History
	if h == nil {
		h = []protocol.HistoryItem{}
	}
	return mustJSON(Snapshot{Session: r.info(), History: h, Instructions: r.Instructions})
}

// capability is the provider capability a mode needs.
func capability(mode string) string {
	if mode == ModeNative {
		return "nativeContinuation"
	}
	return "historyContinuation"
}

// contextBytes is the size max_record_bytes bounds (package doc).
func contextBytes(history []protocol.HistoryItem, instructions *string, native json.RawMessage) int {
	if history == nil {
		history = []protocol.HistoryItem{}
	}
	n := len(mustJSON(history)) + len(native)
	if instructions != nil {
		n += len(mustJSON(*instructions))
	}
	return n
}

// fits checks the limits of §3.5 for a prospective record.
func (m *Manager) fits(history []protocol.HistoryItem, instructions *string, native json.RawMessage) bool {
	if len(history) > m.cfg.MaxMessages || len(history) > MaxProviderMessages {
		return false
	}
	for _, h := range history {
		if protocol.UTF16Len(h.Content) > MaxMessageUnits {
			return false
		}
	}
	return contextBytes(history, instructions, native) <= m.cfg.MaxRecordBytes
}

// storeErr maps a store failure to what the client sees.
func storeErr(op string, err error) error {
	if errors.Is(err, durable.ErrTooLarge) {
		return protocol.Wrap(protocol.CodeSessionContextLimit, err)
	}
	return fmt.Errorf("sessions: %s: %w", op, err) // INTERNAL_ERROR at the edge
}

// load returns the session's entry and record, or SESSION_NOT_FOUND when
// it is missing, expired (removed on the way) or another subject's.
func (m *Manager) load(ctx context.Context, subject, id string) (durable.Entry, *record, error) {
	e, err := m.kv.Get(ctx, key(id))
	if errors.Is(err, durable.ErrNotFound) {
		return e, nil, protocol.New(protocol.CodeSessionNotFound)
	}
	if err != nil {
		return e, nil, storeErr("get", err)
	}
	var rec record
	if err := json.Unmarshal(e.Value, &rec); err != nil {
		return e, nil, storeErr("decode", err)
	}
	if rec.State != StateRunning && m.nowMs() >= rec.ExpiresMs {
		m.remove(ctx, id, e.Revision)
		return e, nil, protocol.New(protocol.CodeSessionNotFound)
	}
	if rec.Subject != subject {
		return e, nil, protocol.New(protocol.CodeSessionNotFound)
	}
	return e, &rec, nil
}

// remove deletes the session at KV revision rev and forgets it; false
// when someone else changed or removed it first.
func (m *Manager) remove(ctx context.Context, id string, rev uint64) bool {
	if err := m.kv.Delete(ctx, key(id), rev); err != nil {
		if !errors.Is(err, durable.ErrRevision) && !errors.Is(err, durable.ErrNotFound) {
			m.log.Warn("session delete failed", "session", id, "err", err)
		}
		return false
	}
	m.mu.Lock()
	m.count--
	delete(m.expiry, id)
	m.mu.Unlock()
	return true
}

// idle records the session's expiry for the timer (0: running, none).
func (m *Manager) idle(id string, expiresMs int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if expiresMs == 0 {
		delete(m.expiry, id)
		return
	}
	m.expiry[id] = expiresMs
	m.scheduleLocked()
}

// scheduleLocked arms the timer for the earliest expiry.
func (m *Manager) scheduleLocked() {
	if m.closed {
		return
	}
	var first int64
	for _, exp := range m.expiry {
		if first == 0 || exp < first {
			first = exp
		}
	}
	if first == 0 || (m.armed != 0 && m.armed <= first) {
		return
	}
	m.armed = first
	d := time.Until(time.UnixMilli(first))
	if m.cfg.Now != nil {
		d = time.UnixMilli(first).Sub(m.now())
	}
	if m.timer == nil {
		m.timer = time.AfterFunc(max(d, 0), m.onTimer)
	} else {
		m.timer.Reset(max(d, 0))
	}
}

func (m *Manager) onTimer() {
	m.mu.Lock()
	m.armed = 0
	m.mu.Unlock()
	m.sweep(context.Background())
	m.mu.Lock()
	m.scheduleLocked()
	m.mu.Unlock()
}

// sweep removes every session whose idle retention has run out.
func (m *Manager) sweep(ctx context.Context) {
	now := m.nowMs()
	var due []string
	m.mu.Lock()
	for id, exp := range m.expiry {
		if exp <= now {
			due = append(due, id)
		}
	}
	m.mu.Unlock()
	for _, id := range due {
		e, err := m.kv.Get(ctx, key(id))
		if errors.Is(err, durable.ErrNotFound) {
			m.mu.Lock()
			delete(m.expiry, id)
			m.mu.Unlock()
			continue
		}
		if err != nil {
			m.log.Warn("session expiry: read failed", "session", id, "err", err)
			continue
		}
		var rec record
		if json.Unmarshal(e.Value, &rec) != nil || rec.State == StateRunning || rec.ExpiresMs > now {
			continue
		}
		m.remove(ctx, id, e.Revision)
	}
}

// instance returns the configured provider instance id, or nil.
func (m *Manager) instance(id string) *runtime.ProviderInstance {
	if m.cfg.Source == nil {
		return m.insts[id]
	}
	for _, p := range m.cfg.Source.Providers() {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// Create is POST /v1/sessions/create: body is the SessionCreate JSON; the
// answer is the SessionSnapshot JSON.
func (m *Manager) Create(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	c, err := ParseCreate(body)
	if err != nil {
		return nil, err
	}
	if !p.Can("sessions.create") {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	inst := m.instance(c.Provider)
	if inst == nil {
		return nil, protocol.New(protocol.CodeUnknownProvider)
	}
	if !p.Providers[c.Provider] {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	if !inst.Capabilities[capability(c.Mode)] {
		return nil, protocol.New(protocol.CodeUnsupportedContinuation)
	}
	if inst.Models != nil && !contains(inst.Models, c.Model) {
		return nil, protocol.New(protocol.CodeUnsupportedModel)
	}
	if m.cfg.HostID == "" || inst.AccountID == "" {
		return nil, protocol.New(protocol.CodeSessionAccountRequired)
	}
	if !m.fits(c.History, c.Instructions, nil) {
		return nil, protocol.New(protocol.CodeSessionContextLimit)
	}
	if err := m.reserve(ctx); err != nil {
		return nil, err
	}
	now := m.nowMs()
	rec := &record{
		V: 1, ID: newID(), Subject: p.Subject, Provider: c.Provider, Model: c.Model, Mode: c.Mode,
		HostID: m.cfg.HostID, AccountID: inst.AccountID, State: StateReady,
		CreatedMs: now, UpdatedMs: now, ExpiresMs: now + m.retentionMs(),
		History: c.History, Instructions: c.Instructions,
	}
	if _, err := m.kv.Create(ctx, key(rec.ID), mustJSON(rec)); err != nil {
		m.mu.Lock()
		m.count--
		m.mu.Unlock()
		return nil, storeErr("create", err)
	}
	m.idle(rec.ID, rec.ExpiresMs)
	return rec.snapshot(), nil
}

// reserve takes one of max_entries, removing expired sessions first when
// the store is full (SESSION_CAPACITY when it stays full).
func (m *Manager) reserve(ctx context.Context) error {
	for pass := 0; ; pass++ {
		m.mu.Lock()
		if m.count < m.cfg.MaxEntries {
			m.count++
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
		if pass > 0 {
			return protocol.New(protocol.CodeSessionCapacity)
		}
		m.sweep(ctx)
	}
}

// Read is POST /v1/sessions/read: body {id}; the SessionSnapshot JSON.
func (m *Manager) Read(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	id, err := ParseIdentity(body)
	if err != nil {
		return nil, err
	}
	if !p.Can("sessions.read") {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	_, rec, err := m.load(ctx, p.Subject, id)
	if err != nil {
		return nil, err
	}
	if !p.Providers[rec.Provider] {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	return rec.snapshot(), nil
}

// Delete is POST /v1/sessions/delete: body {id}; {"id","deleted":true}. A
// turn of this process in progress is cancelled with SESSION_DELETED
// before the record goes, so the run ends as run.cancelled whatever step
// it is in.
func (m *Manager) Delete(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	id, err := ParseIdentity(body)
	if err != nil {
		return nil, err
	}
	if !p.Can("sessions.delete") {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	for {
		e, rec, err := m.load(ctx, p.Subject, id)
		if err != nil {
			return nil, err
		}
		if !p.Providers[rec.Provider] {
			return nil, protocol.New(protocol.CodeForbidden)
		}
		m.mu.Lock()
		t := m.turns[id]
		m.mu.Unlock()
		if t != nil {
			t.deleteSession()
		}
		if err := m.kv.Delete(ctx, key(id), e.Revision); err != nil {
			if errors.Is(err, durable.ErrRevision) || errors.Is(err, durable.ErrNotFound) {
				continue // changed meanwhile (a commit, an expiry): look again
			}
			return nil, storeErr("delete", err)
		}
		m.mu.Lock()
		m.count--
		delete(m.expiry, id)
		m.mu.Unlock()
		return mustJSON(struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}{id, true}), nil
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newID returns a random lowercase (version 4) UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
