package durable

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxKeyLen bounds a key or log name.
const MaxKeyLen = 512

// CheckKey reports whether key is a valid key or log name (see KV).
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("durable: key length %d out of 1..%d", len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '/', c == '=', c == '-':
		default:
			return fmt.Errorf("durable: key %q: byte %q not allowed", key, c)
		}
	}
	return nil
}

// Memory is an in-memory Store for tests: every primitive with the
// semantics of the interfaces, nothing durable. Now, when set, is its
// clock (leases).
type Memory struct {
	Now func() time.Time

	mu     sync.Mutex
	kv     map[string]Entry
	rev    uint64 // last revision issued (one counter: revisions only need to grow per key)
	logs   map[string][][]byte
	leases map[string]Lease
	closed bool
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{kv: map[string]Entry{}, logs: map[string][][]byte{}, leases: map[string]Lease{}}
}

var _ Store = (*Memory)(nil)

// Close makes every later operation fail with ErrClosed.
func (m *Memory) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Memory) lock(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func (m *Memory) Get(ctx context.Context, key string) (Entry, error) {
	if err := m.lock(ctx, key); err != nil {
		return Entry{}, err
	}
	defer m.mu.Unlock()
	e, ok := m.kv[key]
	if !ok {
		return Entry{}, ErrNotFound
	}
	e.Value = clone(e.Value)
	return e, nil
}

func (m *Memory) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := m.lock(ctx, key); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if _, ok := m.kv[key]; ok {
		return 0, ErrExists
	}
	m.rev++
	m.kv[key] = Entry{Key: key, Value: clone(value), Revision: m.rev}
	return m.rev, nil
}

func (m *Memory) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if err := m.lock(ctx, key); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	e, ok := m.kv[key]
	if !ok || e.Revision != rev {
		return 0, ErrRevision
	}
	m.rev++
	m.kv[key] = Entry{Key: key, Value: clone(value), Revision: m.rev}
	return m.rev, nil
}

func (m *Memory) Delete(ctx context.Context, key string, rev uint64) error {
	if err := m.lock(ctx, key); err != nil {
		return err
	}
	defer m.mu.Unlock()
	e, ok := m.kv[key]
	if rev != 0 && (!ok || e.Revision != rev) {
		return ErrRevision
	}
	delete(m.kv, key)
	return nil
}

func (m *Memory) List(ctx context.Context, prefix, after string, limit int) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	var keys []string
	for k := range m.kv {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]Entry, len(keys))
	for i, k := range keys {
		e := m.kv[k]
		e.Value = clone(e.Value)
		out[i] = e
	}
	return out, nil
}

func (m *Memory) Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (uint64, error) {
	if err := m.lock(ctx, log); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	l := m.logs[log]
	if uint64(len(l)) != expectLast {
		return 0, ErrSequence
	}
	for _, r := range recs {
		l = append(l, clone(r))
	}
	m.logs[log] = l
	return uint64(len(l)), nil
}

func (m *Memory) Read(ctx context.Context, log string, after uint64, limit, maxBytes int) ([]Record, error) {
	if err := m.lock(ctx, log); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	l := m.logs[log]
	var out []Record
	total := 0
	for seq := after + 1; seq <= uint64(len(l)); seq++ {
		d := l[seq-1]
		if len(out) > 0 && ((limit > 0 && len(out) >= limit) || (maxBytes > 0 && total+len(d) > maxBytes)) {
			break
		}
		out = append(out, Record{Seq: seq, Data: clone(d)})
		total += len(d)
	}
	return out, nil
}

func (m *Memory) Last(ctx context.Context, log string) (uint64, error) {
	if err := m.lock(ctx, log); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return uint64(len(m.logs[log])), nil
}

func (m *Memory) DeleteLog(ctx context.Context, log string) error {
	if err := m.lock(ctx, log); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.logs, log)
	return nil
}

func (m *Memory) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error) {
	if err := m.lock(ctx, name); err != nil {
		return Lease{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	cur, ok := m.leases[name]
	if ok && cur.Owner != "" && cur.Owner != owner && now.Before(cur.Expires) {
		return cur, ErrHeld
	}
	l := Lease{Name: name, Owner: owner, Token: cur.Token + 1, Expires: now.Add(ttl)}
	m.leases[name] = l
	return l, nil
}

func (m *Memory) Renew(ctx context.Context, name string, token uint64, ttl time.Duration) (Lease, error) {
	if err := m.lock(ctx, name); err != nil {
		return Lease{}, err
	}
	defer m.mu.Unlock()
	cur, ok := m.leases[name]
	if !ok || cur.Token != token || cur.Owner == "" {
		return Lease{}, ErrFenced
	}
	cur.Expires = m.now().Add(ttl)
	m.leases[name] = cur
	return cur, nil
}

func (m *Memory) Release(ctx context.Context, name string, token uint64) error {
	if err := m.lock(ctx, name); err != nil {
		return err
	}
	defer m.mu.Unlock()
	cur, ok := m.leases[name]
	if !ok || cur.Token != token || cur.Owner == "" {
		return ErrFenced
	}
	// The token stays, so the next holder's is larger.
	m.leases[name] = Lease{Name: name, Token: cur.Token}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
