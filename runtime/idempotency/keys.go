package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Bounds of a record (wire-extensions §8, §9).
const (
	// DefaultMaxRecordBytes is the default bound of one key's record.
	DefaultMaxRecordBytes = 8_000_000
	// MaxRecordBytesLimit is the largest bound an operator may configure.
	// The spec sets none above 1; a replay holds a whole record in
	// memory, so the bound stays a 32-bit value.
	MaxRecordBytesLimit = 2_147_483_647
)

// namePrefix is the versioned prefix of the claim key and the log name of
// every record (the KV and the logs are separate spaces in a backend).
const namePrefix = "idempotency/v1/"

// Claim states as stored.
const (
	stateRunning   = "running"
	stateFinished  = "finished"
	stateUncertain = "uncertain"
)

// claimRecord is the stored claim: one per (subject, key).
type claimRecord struct {
	V           int    `json:"v"`
	Fingerprint string `json:"fingerprint"`
	State       string `json:"state"`
	// Owner is the process that claimed the key (Keys.owner). A claim of
	// another process that is still running is never taken over.
	Owner string `json:"owner"`
	// Outcome is the recorded terminal event type and, for a failure or
	// cancellation, its code: once finished.
	Outcome string `json:"outcome,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Options configure Keys. Zero values are documented per field.
type Options struct {
	// MaxRecordBytes bounds what one key records (see the package
	// documentation); 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// Logger; nil discards.
	Logger *slog.Logger
	// Presence, when several hosts share the store, is this process's
	// liveness there: its id is the owner of the claims it makes, and a
	// claim of another process that is alive answers
	// OPERATION_IN_PROGRESS, like one of this process, instead of the
	// uncertain replay of a dead one. Nil: one host, a fresh random id.
	Presence *durable.Presence
}

// Keys claims and replays the idempotency keys of one host process on a
// durable store. It is safe for concurrent use.
type Keys struct {
	store    durable.Store
	max      int
	owner    string
	presence *durable.Presence
	log      *slog.Logger

	mu sync.Mutex
	// running are this process's claims whose run has not ended, by
	// record name: the only claims that answer OPERATION_IN_PROGRESS.
	running map[string]*Claim
}

// New returns the keys of a new host process on store. The process gets a
// fresh random owner id: claims left by an earlier process (which
// crashed) are never this process's, so they replay as uncertain.
func New(store durable.Store, opts Options) (*Keys, error) {
	if store == nil {
		return nil, errors.New("idempotency: no store")
	}
	max := opts.MaxRecordBytes
	if max == 0 {
		max = DefaultMaxRecordBytes
	}
	if max < 1 || max > MaxRecordBytesLimit {
		return nil, fmt.Errorf("idempotency: MaxRecordBytes %d out of range 1..%d", max, MaxRecordBytesLimit)
	}
	var b [16]byte
	rand.Read(b[:])
	k := &Keys{store: store, max: max, owner: hex.EncodeToString(b[:]), presence: opts.Presence, log: opts.Logger, running: map[string]*Claim{}}
	if opts.Presence != nil {
		k.owner = opts.Presence.ID()
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k, nil
}

// recordName is the claim key and log name of (subject, key): the SHA-256
// of the JSON array [subject, key], so any client string fits the store's
// key rules and two subjects never share a record.
func recordName(subject, key string) string {
	b, _ := json.Marshal([2]string{subject, key}) // strings only: cannot fail
	sum := sha256.Sum256(b)
	return namePrefix + hex.EncodeToString(sum[:])
}

// Begin looks up the key of req (which must carry one) for subject, after
// the caller has validated and authorized req. Exactly one of its results
// is set:
//
//   - a *Claim: the key was new and is now claimed (committed). The caller
//     runs req with the claim as its event log and completion hook, then
//     calls Claim.Finish.
//   - a *Replay: the key was used before with the same request. Nothing
//     may be executed; the caller sends the replay.
//   - an error (*protocol.Error): IDEMPOTENCY_CONFLICT (the key was used
//     with a different request), OPERATION_IN_PROGRESS (this process is
//     still running it), OPERATION_STORE_FULL or OPERATION_STORE_ERROR (no
//     claim was made).
//
// mode is how the run is answered: a ModeJSON run delivers no events, so
// its claim commits them in fewer writes (Claim.Append).
func (k *Keys) Begin(ctx context.Context, subject string, req *protocol.RunRequest, mode runtime.Mode) (*Claim, *Replay, error) {
	if req == nil || req.IdempotencyKey == nil {
		return nil, nil, errors.New("idempotency: request without a key")
	}
	fp, err := protocol.Fingerprint(req)
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	name := recordName(subject, *req.IdempotencyKey)
	// A claim deleted between our Create and Get (a run that never
	// started gives its key back) makes us look again; twice is plenty.
	for range 3 {
		c, rp, err := k.begin(ctx, name, fp, req, mode)
		if !errors.Is(err, durable.ErrNotFound) {
			return c, rp, err
		}
	}
	return nil, nil, protocol.New(protocol.CodeOperationInProgress)
}

func (k *Keys) begin(ctx context.Context, name, fp string, req *protocol.RunRequest, mode runtime.Mode) (*Claim, *Replay, error) {
	k.mu.Lock()
	if c := k.running[name]; c != nil {
		k.mu.Unlock()
		if c.fp != fp {
			return nil, nil, protocol.New(protocol.CodeIdempotencyConflict)
		}
		return nil, nil, protocol.New(protocol.CodeOperationInProgress)
	}
	// Registered before the claim is written, so a concurrent request
	// for the same key in this process sees it in progress.
	c := &Claim{k: k, name: name, fp: fp, deferred: mode == runtime.ModeJSON}
	k.running[name] = c
	k.mu.Unlock()

	val, _ := json.Marshal(claimRecord{V: 1, Fingerprint: fp, State: stateRunning, Owner: k.owner})
	rev, err := k.store.Create(ctx, name, val)
	if err == nil {
		c.rev = rev
		return c, nil, nil
	}
	k.forget(c)
	switch {
	case errors.Is(err, durable.ErrExists):
		return k.lookup(ctx, name, fp, req)
	case isFull(err):
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreFull, err)
	default:
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, err)
	}
}

// lookup reads an existing claim and its record.
func (k *Keys) lookup(ctx context.Context, name, fp string, req *protocol.RunRequest) (*Claim, *Replay, error) {
	e, err := k.store.Get(ctx, name)
	if errors.Is(err, durable.ErrNotFound) {
		return nil, nil, err // given back meanwhile: Begin looks again
	}
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, err)
	}
	var rec claimRecord
	if err := json.Unmarshal(e.Value, &rec); err != nil || rec.V != 1 {
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, fmt.Errorf("idempotency: claim %s: unreadable (%v)", name, err))
	}
	if rec.Fingerprint != fp {
		return nil, nil, protocol.New(protocol.CodeIdempotencyConflict)
	}
	recs, err := k.store.Read(ctx, name, 0, 0, 0)
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, err)
	}
	rp, err := buildReplay(recs, req)
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, fmt.Errorf("idempotency: record %s: %w", name, err))
	}
	if rp.Err != nil && rp.Err.Code == protocol.CodeOperationUncertain && rec.State == stateRunning &&
		rec.Owner != k.owner && k.presence != nil {
		// Unfinished and another host's: still running there, or that
		// host died and the replay's uncertainty is the answer.
		alive, err := k.presence.Alive(ctx, rec.Owner)
		if err != nil {
			return nil, nil, protocol.Wrap(protocol.CodeOperationStoreError, err)
		}
		if alive {
			return nil, nil, protocol.New(protocol.CodeOperationInProgress)
		}
	}
	return nil, rp, nil
}

// forget ends c's registration as running in this process.
func (k *Keys) forget(c *Claim) {
	k.mu.Lock()
	if k.running[c.name] == c {
		delete(k.running, c.name)
	}
	k.mu.Unlock()
}

// isFull reports a store without room for a new claim.
func isFull(err error) bool {
	return errors.Is(err, durable.ErrFull) || errors.Is(err, syscall.ENOSPC)
}
