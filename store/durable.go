package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"

	"adhost/runtime/durable"
)

// *Store is the embedded backend of the durable-state primitives (see the
// package documentation for the keys, the bounds and the sync policy).
var _ durable.Store = (*Store)(nil)

const (
	kvPrefix      = "v1/kv/"
	logPrefix     = "v1/log/"
	logMetaPrefix = "v1/logmeta/"
	leasePrefix   = "v1/lease/"
	revKey        = "v1/meta/rev"
)

// Bounds of the durable primitives.
const (
	// MaxValueBytes bounds one KV value, one log record and the records of
	// one Append together, on disk: the features' largest record is a job
	// of up to 64,000,000 bytes (wire-extensions §2.5), and a value this
	// size still fits a 128 MiB value-log file with room to spare.
	MaxValueBytes = 64 << 20
	// MaxValueBytesInMemory is the bound of an InMemory store: Badger
	// keeps every value of an in-memory database in its LSM tree, which
	// takes values under 1 MiB only (one of exactly 1 MiB crashes its
	// writer), and a KV value is stored after its 8-byte revision.
	MaxValueBytesInMemory = 1<<20 - 16
	// valueThreshold: values this size and larger go to the value log, so
	// a transaction counts 24 bytes for them against its batch limit and
	// compactions do not rewrite them. Smaller ones stay in the LSM tree,
	// where reads are one lookup.
	valueThreshold = 64 << 10
	// opBatchMax is the most operations one group commit takes.
	opBatchMax = 512
	// deleteLogChunk is the most records one step of DeleteLog removes.
	deleteLogChunk = 2048
)

// dop is one durable write operation waiting for the committer. apply runs
// in the committer's transaction: it reads what it checks, and returns an
// outcome error (ErrExists, ErrRevision, …) before writing anything, or
// writes and returns nil. Any other error is the store's and aborts the
// batch. size and count are Badger's estimate of what apply writes.
type dop struct {
	ctx         context.Context
	size, count int64
	apply       func(txn *badger.Txn) error
	err         error
	done        chan struct{}
}

// isOutcome reports whether err is an answer of the primitives (the
// operation wrote nothing and the batch goes on) rather than a failure.
func isOutcome(err error) bool {
	for _, e := range []error{durable.ErrExists, durable.ErrRevision, durable.ErrSequence,
		durable.ErrHeld, durable.ErrFenced, durable.ErrNotFound, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// do hands op to the committer and waits for its outcome. Once queued, an
// operation is either committed or reported not applied: do never returns
// while the outcome is unknown (the committer skips an operation whose ctx
// ended before it ran), so a caller can trust a nil and an error alike.
func (s *Store) do(ctx context.Context, size, count int64, apply func(txn *badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if size > s.opBudget || count > s.opCount {
		return fmt.Errorf("%w: one operation of %d bytes / %d entries (at most %d / %d)",
			durable.ErrTooLarge, size, count, s.opBudget, s.opCount)
	}
	o := &dop{ctx: ctx, size: size, count: count, apply: apply, done: make(chan struct{})}
	s.dmu.RLock()
	if s.dclosed {
		s.dmu.RUnlock()
		return durable.ErrClosed
	}
	s.ops <- o
	s.dmu.RUnlock()
	<-o.done
	return o.err
}

// view runs fn in a read-only transaction unless the store is closed.
func (s *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.dmu.RLock()
	defer s.dmu.RUnlock()
	if s.dclosed {
		return durable.ErrClosed
	}
	return s.db.View(fn)
}

// commitLoop is the committer: it takes the first waiting operation, adds
// every other one already waiting (up to Badger's transaction limits), and
// commits them in one transaction, which with SyncWrites is one write and
// one sync of the log for all of them (group commit). Operations arriving
// while a batch commits wait for the next one, so batches grow with load
// and a lone operation waits for nothing but its own commit.
func (s *Store) commitLoop() {
	batch := make([]*dop, 0, opBatchMax)
	for {
		first, ok := <-s.ops
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		size, count := first.size, first.count
	gather:
		for len(batch) < opBatchMax {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break gather
				}
				if size+o.size > s.opBudget || count+o.count > s.opCount {
					s.commitBatch(batch)
					batch, size, count = batch[:0], 0, 0
				}
				batch = append(batch, o)
				size, count = size+o.size, count+o.count
			default:
				break gather
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch commits batch, retrying conflicts a bounded number of times,
// and reports each operation's outcome. When the batch fails otherwise,
// each operation is retried alone, so that one operation's failure is
// reported to it and not to the others.
func (s *Store) commitBatch(batch []*dop) {
	s.batches.Add(1)
	var err error
	for range maxTxnRetries {
		if err = s.tryBatch(batch); !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil && len(batch) > 1 {
		for _, o := range batch {
			s.commitBatch([]*dop{o})
		}
		return
	}
	for _, o := range batch {
		if err != nil {
			o.err = commitError(err)
		}
		close(o.done)
	}
}

func commitError(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("store: commit: %w (%v)", durable.ErrTooLarge, err)
	}
	// Badger formats the errors of its files with %v, so a full disk is
	// known by its text.
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		return fmt.Errorf("store: commit: %w (%v)", durable.ErrFull, err)
	}
	return fmt.Errorf("store: commit: %w", err)
}

// tryBatch applies batch in one transaction and commits it. The revision
// counter moves only when the commit succeeds.
func (s *Store) tryBatch(batch []*dop) error {
	rev0 := s.rev
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for _, o := range batch {
		if o.err = o.ctx.Err(); o.err != nil {
			continue
		}
		if o.err = o.apply(txn); o.err != nil && !isOutcome(o.err) {
			s.rev = rev0
			return o.err
		}
	}
	if s.rev != rev0 {
		if err := txn.Set([]byte(revKey), be8u(s.rev)); err != nil {
			s.rev = rev0
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		s.rev = rev0
		return err
	}
	return nil
}

// nextRev issues the next revision (committer goroutine only). One counter
// serves every key and lease: revisions need only grow per key, and the
// counter survives deletes and restarts, which Badger's commit timestamps
// do not promise (see the package documentation).
func (s *Store) nextRev() uint64 {
	s.rev++
	return s.rev
}

// loadRev reads the revision counter at Open.
func (s *Store) loadRev() error {
	return s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(revKey))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: read revision counter: %w", err)
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("store: revision counter of %d bytes", len(v))
			}
			s.rev = binary.BigEndian.Uint64(v)
			return nil
		})
	})
}

// MaxValue returns the bound of one value, record or Append (MaxValueBytes,
// or MaxValueBytesInMemory for an in-memory store).
func (s *Store) MaxValue() int { return s.maxValue }

// estimate is Badger's count of one entry against a transaction's limit
// (key, value or value pointer, metadata, timestamp).
func (s *Store) estimate(key, value int) int64 {
	if int64(value) >= s.threshold {
		value = 12
	}
	return int64(key + value + 2 + 10)
}

func (s *Store) checkValue(n int) error {
	if n > s.maxValue {
		return fmt.Errorf("%w: %d bytes (at most %d)", durable.ErrTooLarge, n, s.maxValue)
	}
	return nil
}

// --- KV ---

func kvKey(key string) []byte { return []byte(kvPrefix + key) }

// kvValue is a stored KV value: its revision (8 bytes big-endian), then the
// value.
func kvValue(rev uint64, v []byte) []byte {
	b := make([]byte, 8+len(v))
	binary.BigEndian.PutUint64(b, rev)
	copy(b[8:], v)
	return b
}

// kvRev reads the revision of a stored KV value.
func kvRev(item *badger.Item) (uint64, error) {
	var rev uint64
	err := item.Value(func(v []byte) error {
		if len(v) < 8 {
			return fmt.Errorf("store: malformed value of %q", item.Key())
		}
		rev = binary.BigEndian.Uint64(v)
		return nil
	})
	return rev, err
}

func kvEntry(item *badger.Item, key string) (durable.Entry, error) {
	v, err := item.ValueCopy(nil)
	if err != nil {
		return durable.Entry{}, err
	}
	if len(v) < 8 {
		return durable.Entry{}, fmt.Errorf("store: malformed value of %q", item.Key())
	}
	return durable.Entry{Key: key, Value: v[8:], Revision: binary.BigEndian.Uint64(v)}, nil
}

// Get returns the key's value and revision (durable.KV).
func (s *Store) Get(ctx context.Context, key string) (durable.Entry, error) {
	if err := durable.CheckKey(key); err != nil {
		return durable.Entry{}, err
	}
	var e durable.Entry
	err := s.view(ctx, func(txn *badger.Txn) error {
		item, err := txn.Get(kvKey(key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return durable.ErrNotFound
		}
		if err != nil {
			return err
		}
		e, err = kvEntry(item, key)
		return err
	})
	return e, err
}

// Create stores value under key if it is absent (durable.KV).
func (s *Store) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.put(ctx, key, value, 0, true)
}

// Update replaces the value if the key is at revision rev (durable.KV).
func (s *Store) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	return s.put(ctx, key, value, rev, false)
}

func (s *Store) put(ctx context.Context, key string, value []byte, expect uint64, create bool) (uint64, error) {
	if err := durable.CheckKey(key); err != nil {
		return 0, err
	}
	if err := s.checkValue(len(value)); err != nil {
		return 0, err
	}
	k := kvKey(key)
	var rev uint64
	err := s.do(ctx, s.estimate(len(k), 8+len(value)), 1, func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if !create {
				return durable.ErrRevision
			}
		case err != nil:
			return err
		case create:
			return durable.ErrExists
		default:
			cur, err := kvRev(item)
			if err != nil {
				return err
			}
			if cur != expect {
				return durable.ErrRevision
			}
		}
		rev = s.nextRev()
		return txn.Set(k, kvValue(rev, value))
	})
	if err != nil {
		return 0, err
	}
	return rev, nil
}

// Delete removes the key if it is at revision rev, or whatever its
// revision when rev is 0 (durable.KV).
func (s *Store) Delete(ctx context.Context, key string, rev uint64) error {
	if err := durable.CheckKey(key); err != nil {
		return err
	}
	k := kvKey(key)
	return s.do(ctx, s.estimate(len(k), 0), 1, func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			if rev != 0 {
				return durable.ErrRevision
			}
			return nil
		}
		if err != nil {
			return err
		}
		if rev != 0 {
			cur, err := kvRev(item)
			if err != nil {
				return err
			}
			if cur != rev {
				return durable.ErrRevision
			}
		}
		return txn.Delete(k)
	})
}

// List returns up to limit entries under prefix after the key after, in
// key order (durable.KV).
func (s *Store) List(ctx context.Context, prefix, after string, limit int) ([]durable.Entry, error) {
	var out []durable.Entry
	err := s.view(ctx, func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(kvPrefix + prefix)
		if limit > 0 {
			opts.PrefetchSize = min(limit, opts.PrefetchSize)
		}
		it := txn.NewIterator(opts)
		defer it.Close()
		start := opts.Prefix
		if after >= prefix {
			// The least key greater than after.
			start = []byte(kvPrefix + after + "\x00")
		}
		for it.Seek(start); it.Valid(); it.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			e, err := kvEntry(item, string(item.Key()[len(kvPrefix):]))
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// --- Logs ---

// A log's records are keyed by its name, a 0 byte (which no name holds, so
// the records of "a" and of "a/b" never share a prefix) and the sequence.
func logRecPrefix(name string) []byte { return []byte(logPrefix + name + "\x00") }

func logKey(name string, seq uint64) []byte {
	return append(logRecPrefix(name), be8u(seq)...)
}

func logMetaKey(name string) []byte { return []byte(logMetaPrefix + name) }

// logLast reads a log's last sequence in txn (0 when absent).
func logLast(txn *badger.Txn, meta []byte) (uint64, error) {
	item, err := txn.Get(meta)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var last uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("store: malformed log meta %q", meta)
		}
		last = binary.BigEndian.Uint64(v)
		return nil
	})
	return last, err
}

// Append adds recs after expectLast, all in one commit (durable.Logs).
func (s *Store) Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (uint64, error) {
	if err := durable.CheckKey(log); err != nil {
		return 0, err
	}
	meta := logMetaKey(log)
	keyLen := len(logRecPrefix(log)) + 8
	size, total := s.estimate(len(meta), 8), 0
	for _, r := range recs {
		if err := s.checkValue(len(r)); err != nil {
			return 0, err
		}
		total += len(r)
		size += s.estimate(keyLen, len(r))
	}
	if err := s.checkValue(total); err != nil {
		return 0, err
	}
	var last uint64
	err := s.do(ctx, size, int64(len(recs))+1, func(txn *badger.Txn) error {
		cur, err := logLast(txn, meta)
		if err != nil {
			return err
		}
		if cur != expectLast {
			return durable.ErrSequence
		}
		for i, r := range recs {
			if err := txn.Set(logKey(log, cur+uint64(i)+1), r); err != nil {
				return err
			}
		}
		last = cur + uint64(len(recs))
		if len(recs) == 0 {
			return nil
		}
		return txn.Set(meta, be8u(last))
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// Read returns the records after sequence after, bounded by limit records
// and maxBytes of data, the first one always (durable.Logs).
func (s *Store) Read(ctx context.Context, log string, after uint64, limit, maxBytes int) ([]durable.Record, error) {
	if err := durable.CheckKey(log); err != nil {
		return nil, err
	}
	if after == math.MaxUint64 {
		return nil, nil // nothing can follow (and after+1 would wrap to the start)
	}
	var out []durable.Record
	err := s.view(ctx, func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = logRecPrefix(log)
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		total := 0
		for it.Seek(logKey(log, after+1)); it.Valid(); it.Next() {
			if len(out) > 0 && limit > 0 && len(out) >= limit {
				break
			}
			item := it.Item()
			k := item.Key()
			if len(k) != len(opts.Prefix)+8 {
				return fmt.Errorf("store: malformed log key %q", k)
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(out) > 0 && maxBytes > 0 && total+len(v) > maxBytes {
				break
			}
			total += len(v)
			out = append(out, durable.Record{Seq: binary.BigEndian.Uint64(k[len(opts.Prefix):]), Data: v})
		}
		return nil
	})
	return out, err
}

// Last returns the log's last sequence, 0 when empty (durable.Logs).
func (s *Store) Last(ctx context.Context, log string) (uint64, error) {
	if err := durable.CheckKey(log); err != nil {
		return 0, err
	}
	var last uint64
	err := s.view(ctx, func(txn *badger.Txn) (err error) {
		last, err = logLast(txn, logMetaKey(log))
		return err
	})
	return last, err
}

// DeleteLog removes the log (durable.Logs). A long log is removed from its
// end in steps of deleteLogChunk records, each its own commit, so that it
// stays within a transaction's limits; after a crash midway the log is a
// shorter log, never one with a hole, and DeleteLog again finishes it.
func (s *Store) DeleteLog(ctx context.Context, log string) error {
	if err := durable.CheckKey(log); err != nil {
		return err
	}
	meta := logMetaKey(log)
	size := s.estimate(len(meta), 8) + deleteLogChunk*s.estimate(len(logRecPrefix(log))+8, 0)
	for {
		done := false
		err := s.do(ctx, size, deleteLogChunk+1, func(txn *badger.Txn) error {
			last, err := logLast(txn, meta)
			if err != nil {
				return err
			}
			end := last - min(last, deleteLogChunk)
			for seq := last; seq > end; seq-- {
				if err := txn.Delete(logKey(log, seq)); err != nil {
					return err
				}
			}
			done = end == 0
			if done {
				return txn.Delete(meta)
			}
			return txn.Set(meta, be8u(end))
		})
		if err != nil || done {
			return err
		}
	}
}

// --- Leases ---

func leaseKey(name string) []byte { return []byte(leasePrefix + name) }

// leaseValue is a stored lease: token (8 bytes big-endian), expiry (Unix
// nanoseconds, 8 bytes big-endian), owner ("" when released).
func leaseValue(l durable.Lease) []byte {
	b := make([]byte, 16, 16+len(l.Owner))
	binary.BigEndian.PutUint64(b, l.Token)
	var exp int64
	if !l.Expires.IsZero() {
		exp = l.Expires.UnixNano()
	}
	binary.BigEndian.PutUint64(b[8:], uint64(exp))
	return append(b, l.Owner...)
}

// getLease reads a lease in txn; ok is false when it was never taken.
func getLease(txn *badger.Txn, name string) (l durable.Lease, ok bool, err error) {
	item, err := txn.Get(leaseKey(name))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return durable.Lease{Name: name}, false, nil
	}
	if err != nil {
		return l, false, err
	}
	err = item.Value(func(v []byte) error {
		if len(v) < 16 {
			return fmt.Errorf("store: malformed lease %q", name)
		}
		l = durable.Lease{Name: name, Token: binary.BigEndian.Uint64(v), Owner: string(v[16:])}
		if ns := int64(binary.BigEndian.Uint64(v[8:])); ns != 0 {
			l.Expires = time.Unix(0, ns)
		}
		return nil
	})
	return l, err == nil, err
}

func (s *Store) leaseOp(ctx context.Context, name string, apply func(txn *badger.Txn) error) error {
	if err := durable.CheckKey(name); err != nil {
		return err
	}
	return s.do(ctx, s.estimate(len(leasePrefix)+len(name), 16+durable.MaxKeyLen), 1, apply)
}

// Acquire takes the lease for owner when it is free, expired or already
// the owner's, with a new fencing token (durable.Leases).
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (durable.Lease, error) {
	if owner == "" || len(owner) > durable.MaxKeyLen {
		return durable.Lease{}, fmt.Errorf("store: lease owner of %d bytes (1..%d)", len(owner), durable.MaxKeyLen)
	}
	var l durable.Lease
	err := s.leaseOp(ctx, name, func(txn *badger.Txn) error {
		cur, _, err := getLease(txn, name)
		if err != nil {
			return err
		}
		now := s.now()
		if cur.Owner != "" && cur.Owner != owner && now.Before(cur.Expires) {
			l = cur
			return durable.ErrHeld
		}
		l = durable.Lease{Name: name, Owner: owner, Token: s.nextRev(), Expires: now.Add(ttl)}
		return txn.Set(leaseKey(name), leaseValue(l))
	})
	if err != nil && !errors.Is(err, durable.ErrHeld) {
		return durable.Lease{}, err
	}
	return l, err
}

// Renew extends the lease held with token by ttl from now (durable.Leases).
func (s *Store) Renew(ctx context.Context, name string, token uint64, ttl time.Duration) (durable.Lease, error) {
	var l durable.Lease
	err := s.leaseOp(ctx, name, func(txn *badger.Txn) error {
		cur, ok, err := getLease(txn, name)
		if err != nil {
			return err
		}
		if !ok || cur.Token != token || cur.Owner == "" {
			return durable.ErrFenced
		}
		cur.Expires = s.now().Add(ttl)
		l = cur
		return txn.Set(leaseKey(name), leaseValue(cur))
	})
	if err != nil {
		return durable.Lease{}, err
	}
	return l, nil
}

// Release frees the lease held with token at once; its token stays, so the
// next holder's is larger (durable.Leases).
func (s *Store) Release(ctx context.Context, name string, token uint64) error {
	return s.leaseOp(ctx, name, func(txn *badger.Txn) error {
		cur, ok, err := getLease(txn, name)
		if err != nil {
			return err
		}
		if !ok || cur.Token != token || cur.Owner == "" {
			return durable.ErrFenced
		}
		return txn.Set(leaseKey(name), leaseValue(durable.Lease{Token: cur.Token}))
	})
}

func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

func be8u(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}
