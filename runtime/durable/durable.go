// Package durable declares the storage operations the durable features
// (runtime/jobs, runtime/sessions, runtime/idempotency) are written in, and
// nothing else: a key-value space with compare-and-set on a per-key
// revision, ordered append-only logs with an expected-last-sequence check
// and cursor reads, and named leases with fencing tokens.
//
// These are the primitives a distributed engine offers natively — NATS
// JetStream's KV buckets (per-key revisions, Create/Update with the
// expected revision) and streams (per-subject sequences, the
// expected-last-subject-sequence header, ordered consumers from a start
// sequence) — so that a second backend implements this package's
// interfaces and no feature package changes. The embedded implementation
// is package store (Badger); Memory here is for tests.
//
// There are no multi-key transactions on purpose: JetStream has none.
// Features order their writes so that every crash point leaves a state
// they recover from (documented in each feature package), and use the
// per-key and per-log checks for exclusion.
//
// Durability: an operation that returns nil has been committed durably
// (it survives kill -9 and loss of power to the process, within what the
// disk promises). Implementations may batch concurrent commits into one
// sync (group commit); they may not acknowledge before the sync.
package durable

import (
	"context"
	"errors"
	"time"
)

// Errors of the primitives. Implementations return these (wrapped or not)
// so features can tell a lost race from a failed store with errors.Is.
var (
	// ErrNotFound: the key, log or lease does not exist.
	ErrNotFound = errors.New("durable: not found")
	// ErrExists: Create found the key present.
	ErrExists = errors.New("durable: key exists")
	// ErrRevision: the key's current revision is not the expected one
	// (it changed, or was deleted, since it was read).
	ErrRevision = errors.New("durable: revision mismatch")
	// ErrSequence: the log's last sequence is not the expected one.
	ErrSequence = errors.New("durable: sequence mismatch")
	// ErrHeld: another owner holds the lease and it has not expired.
	ErrHeld = errors.New("durable: lease held by another owner")
	// ErrFenced: the lease was taken over (or released) since the token
	// was issued; the holder must stop acting on it.
	ErrFenced = errors.New("durable: lease fenced")
	// ErrTooLarge: a value or record exceeds the backend's bound.
	ErrTooLarge = errors.New("durable: value too large")
	// ErrFull: the backend has no room left (a capacity bound or its
	// disk); nothing was written. Features answer their "store full" code.
	ErrFull = errors.New("durable: store full")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("durable: store closed")
)

// Entry is one key's value at a revision.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
}

// KV is a key-value space with compare-and-set. Keys are non-empty ASCII
// strings of at most 512 bytes made of [A-Za-z0-9._/=-] (the characters
// JetStream KV keys allow plus '/'), so a feature must hash or encode
// client-chosen strings; '/' separates the levels of a prefix. Revisions
// are positive and increase with every write of a key; 0 means "absent".
type KV interface {
	// Get returns the key's current value and revision, or ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)
	// Create stores value under key if the key is absent, or ErrExists.
	Create(ctx context.Context, key string, value []byte) (rev uint64, err error)
	// Update replaces the value if the key's revision is rev, or
	// ErrRevision (ErrNotFound-free: a deleted key is a mismatch too).
	Update(ctx context.Context, key string, value []byte, rev uint64) (newRev uint64, err error)
	// Delete removes the key if its revision is rev (0: whatever it is).
	// Deleting an absent key with rev 0 is not an error.
	Delete(ctx context.Context, key string, rev uint64) error
	// List returns up to limit entries whose keys start with prefix and
	// sort after after (byte order), in key order. limit <= 0: all.
	List(ctx context.Context, prefix, after string, limit int) ([]Entry, error)
}

// Record is one entry of a log.
type Record struct {
	Seq  uint64
	Data []byte
}

// Logs are named, ordered, append-only logs (one JetStream subject each,
// or one key range in Badger). Sequences start at 1 and have no gaps.
// Names follow the KV key rules.
type Logs interface {
	// Append adds recs after sequence expectLast, which must be the log's
	// last sequence (0 for an empty or absent log), or ErrSequence; on
	// success it returns the new last sequence. The records of one call
	// commit together or not at all.
	Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (last uint64, err error)
	// Read returns the records after sequence after, in order: at most
	// limit of them (limit <= 0: no count bound), and stopping before a
	// record that would take the total of Data bytes past maxBytes — but
	// the first record is always returned (maxBytes <= 0: no byte bound).
	Read(ctx context.Context, log string, after uint64, limit, maxBytes int) ([]Record, error)
	// Last returns the log's last sequence (0 when empty or absent).
	Last(ctx context.Context, log string) (uint64, error)
	// DeleteLog removes the whole log. Deleting an absent log is not an
	// error.
	DeleteLog(ctx context.Context, log string) error
}

// Lease is a held lease: its fencing token increases with every
// acquisition of the name, so a write checked against the token a holder
// was issued fails once someone else has taken over.
type Lease struct {
	Name    string
	Owner   string
	Token   uint64
	Expires time.Time
}

// Leases are named single-owner leases with fencing tokens.
type Leases interface {
	// Acquire takes the named lease for owner for ttl when it is free,
	// expired, or already held by the same owner (which starts a new
	// token: a restarted process is a new holder). Otherwise ErrHeld,
	// with the current holder in the returned Lease.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)
	// Renew extends the lease held with token by ttl from now, or
	// ErrFenced when the token is no longer current.
	Renew(ctx context.Context, name string, token uint64, ttl time.Duration) (Lease, error)
	// Release gives the lease up (it is free at once); ErrFenced when the
	// token is no longer current.
	Release(ctx context.Context, name string, token uint64) error
}

// Store is a backend: all three primitives over one durable space.
type Store interface {
	KV
	Logs
	Leases
}
