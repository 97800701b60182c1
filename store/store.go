package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"adhost/runtime"
	"adhost/runtime/durable"
)

// ErrNotFound is returned when a looked-up item does not exist.
var ErrNotFound = errors.New("store: not found")

// Options configure a Store. The zero value is a file-backed store with a
// value-log GC pass every 10 minutes and Badger's logs discarded.
type Options struct {
	// InMemory keeps everything in memory (tests); dir is then ignored.
	InMemory bool
	// GCInterval is the period of the value-log GC; 0 means 10 minutes.
	GCInterval time.Duration
	// Logger receives Badger's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// Store is the Badger-backed persistence of one host. It is safe for
// concurrent use.
type Store struct {
	db   *badger.DB
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	// usage batches RecordUsage into one transaction per batch.
	usage *usageQueue[usageEntry]
	buf   bytes.Buffer  // the values of the writer's batch
	enc   *json.Encoder // into buf

	// The durable primitives (durable.go): operations queue on ops for
	// the committer goroutine, which alone writes their keys and owns rev.
	// dmu is held shared by operations and exclusively by Close, so that
	// none is sent after ops is closed and none reads a closed database.
	dmu       sync.RWMutex
	dclosed   bool
	ops       chan *dop
	rev       uint64       // last revision issued (committer only, after Open)
	batches   atomic.Int64 // group commits made (benchmarks)
	opBudget  int64        // Badger's transaction limits, less the revision counter
	opCount   int64
	maxValue  int
	threshold int64
	clock     func() time.Time // leases; nil: time.Now
	inMemory  bool
}

// usageEntry is a usage record and its key, computed by RecordUsage so
// that a record the writer would refuse is refused to the caller.
type usageEntry struct {
	key []byte
	rec *runtime.UsageRecord
}

var _ runtime.AsyncUsageSink = (*Store)(nil)

const (
	layoutKey     = "v1/meta/layout"
	layoutVersion = "1"
	usagePrefix   = "v1/usage/"
	qualPrefix    = "v1/qual/"
	maxTxnRetries = 5
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log}).
		WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20).
		// Memtables are Go heap (Badger's skiplist arenas without
		// jemalloc): the default five let a busy host's live heap swing by
		// 80 MiB as they fill and flush, twice that in RSS at GOGC=100 —
		// more than the rest of the host. Two are enough at a host's write
		// rates (a 16 MiB flush takes a fraction of a second).
		WithNumMemtables(2).
		WithValueLogFileSize(128 << 20).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueThreshold(valueThreshold).
		WithSyncWrites(true)
	maxValue := MaxValueBytes
	if opts.InMemory {
		bo = bo.WithDir("").WithValueDir("").WithInMemory(true).WithValueThreshold(1 << 20)
		maxValue = MaxValueBytesInMemory
	} else {
		if dir == "" {
			return nil, errors.New("store: no directory")
		}
		if _, err := prepareDir(dir); err != nil {
			return nil, err
		}
		if err := inUse(dir); err != nil {
			return nil, err
		}
	}
	db, err := badger.Open(bo)
	if err != nil {
		if !opts.InMemory {
			// Another process may have taken the directory since inUse.
			if e := inUse(dir); e != nil {
				return nil, e
			}
		}
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{db: db, log: log, stop: make(chan struct{}),
		ops: make(chan *dop, opBatchMax), maxValue: maxValue, threshold: bo.ValueThreshold, inMemory: opts.InMemory,
		opBudget: db.MaxBatchSize() - 64, opCount: db.MaxBatchCount() - 1}
	if err := s.initLayout(dir); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadRev(); err != nil {
		db.Close()
		return nil, err
	}
	s.wg.Go(s.commitLoop)
	s.enc = json.NewEncoder(&s.buf)
	s.usage = newUsageQueue("store", log, s.writeUsage)
	if !opts.InMemory {
		interval := opts.GCInterval
		if interval <= 0 {
			interval = 10 * time.Minute
		}
		s.wg.Go(func() { s.gcLoop(interval) })
	}
	return s, nil
}

// initLayout records the key layout on first open and refuses a database
// written with a layout this build does not know, and one with keys but
// no layout: another application's Badger database, which adhost must
// not write into.
func (s *Store) initLayout(dir string) error {
	return s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(layoutKey))
		if errors.Is(err, badger.ErrKeyNotFound) {
			it := txn.NewIterator(badger.IteratorOptions{})
			it.Rewind()
			foreign := it.Valid()
			it.Close()
			if foreign {
				return refuse(ErrForeign, "%s holds a Badger database without adhost's layout key: not an adhost store", dir)
			}
			return txn.Set([]byte(layoutKey), []byte(layoutVersion))
		}
		if err != nil {
			return fmt.Errorf("store: read layout: %w", err)
		}
		return item.Value(func(v []byte) error {
			if string(v) != layoutVersion {
				return fmt.Errorf("store: data directory %s: unsupported layout %q (this build knows %q)", dir, v, layoutVersion)
			}
			return nil
		})
	})
}

func (s *Store) gcLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.collect(gcRatio); err != nil {
				s.log.Warn("store: value-log GC", "error", err)
			}
		}
	}
}

// gcRatio: a value-log file is rewritten when at least half of it is
// garbage (overwritten or deleted values).
const gcRatio = 0.5

// collect rewrites value-log files while one holds at least ratio garbage,
// and returns how many it rewrote. It stops early when the store closes.
func (s *Store) collect(ratio float64) (int, error) {
	for n := 0; ; n++ {
		select {
		case <-s.stop:
			return n, nil
		default:
		}
		switch err := s.db.RunValueLogGC(ratio); {
		case err == nil:
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return n, nil // nothing (more) to rewrite, or a pass already running
		default:
			return n, err
		}
	}
}

// CollectGarbage runs the value-log GC now rather than at the next
// interval (tests and benchmarks that measure the store's size): it
// rewrites files while at least ratio of one is garbage (0 < ratio < 1)
// and returns how many it rewrote.
func (s *Store) CollectGarbage(ctx context.Context, ratio float64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.dmu.RLock()
	defer s.dmu.RUnlock()
	if s.dclosed {
		return 0, durable.ErrClosed
	}
	if s.inMemory {
		return 0, nil
	}
	return s.collect(ratio)
}

// Close writes the queued usage records, commits the durable operations
// already queued (later ones fail with durable.ErrClosed), stops the GC
// goroutine and closes the database. It is safe to call more than once.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.usage.close()
		s.dmu.Lock()
		s.dclosed = true
		close(s.ops)
		s.dmu.Unlock()
		close(s.stop)
		s.wg.Wait()
		err = s.db.Close()
	})
	return err
}

// update runs fn in a read-write transaction, retrying conflicts a bounded
// number of times.
func (s *Store) update(ctx context.Context, fn func(txn *badger.Txn) error) error {
	var err error
	for range maxTxnRetries {
		if err = ctx.Err(); err != nil {
			return err
		}
		err = s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
	}
	return err
}

// be8 encodes n as 8 bytes big-endian (negative values clamp to 0).
func be8(n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(max(n, 0)))
	return b[:]
}

func key(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// RecordUsage queues one usage record (runtime.AsyncUsageSink) for the
// store's writer, which commits the records of concurrent runs in one
// transaction a few milliseconds later; Close and Usage wait for it.
// Records are keyed by finish time, then run id, so listing is
// chronological; recording the same run twice overwrites. The store keeps
// rec: the caller must not change it afterwards. When the writer is so far
// behind that the queue stays full until ctx is done, the record is
// dropped, logged and counted (*UsageDroppedError).
func (s *Store) RecordUsage(ctx context.Context, rec *runtime.UsageRecord) error {
	if rec == nil || rec.RunID == "" {
		return errors.New("store: usage record without run id")
	}
	finished, err := time.Parse(time.RFC3339Nano, rec.FinishedAt)
	if err != nil {
		return fmt.Errorf("store: usage record %s: finishedAt: %w", rec.RunID, err)
	}
	k := key([]byte(usagePrefix), be8(finished.UnixNano()), []byte("/"+rec.RunID))
	return s.usage.put(ctx, usageEntry{key: k, rec: rec}, rec.RunID)
}

// QueuesUsage reports that RecordUsage only queues (runtime.AsyncUsageSink).
func (s *Store) QueuesUsage() bool { return true }

// writeUsage commits a batch of usage records in as few transactions as
// Badger's size limit allows (writer goroutine only). The transactions only
// write keys unique to their runs, so they cannot conflict. The values are
// encoded into one buffer, reused by the next batch: a transaction keeps
// them only until its Commit returns.
func (s *Store) writeUsage(batch []usageEntry) error {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	s.buf.Reset()
	for _, e := range batch {
		n := s.buf.Len()
		if err := s.enc.Encode(e.rec); err != nil {
			s.buf.Truncate(n)
			s.log.Error("usage record not written", "runId", e.rec.RunID, "error", err)
			continue
		}
		b := s.buf.Bytes()[n : s.buf.Len()-1 : s.buf.Len()-1] // without Encode's '\n'
		err := txn.Set(e.key, b)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("store: usage records: %w", err)
			}
			txn = s.db.NewTransaction(true)
			err = txn.Set(e.key, b)
		}
		if err != nil {
			return fmt.Errorf("store: usage record %s: %w", e.rec.RunID, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: usage records: %w", err)
	}
	return nil
}

// Usage calls fn for each usage record finished at or after since, oldest
// first, until fn returns false. It first waits for the records queued
// before it to be committed, so a caller reads what it recorded.
func (s *Store) Usage(ctx context.Context, since time.Time, fn func(*runtime.UsageRecord) bool) error {
	if err := s.usage.flush(ctx); err != nil {
		return err
	}
	return scanTimed(ctx, s, usagePrefix, "usage record", since, fn)
}

// scanTimed calls fn for each JSON record of type T under prefix whose key
// continues with its time (be8 Unix nanoseconds), from since on, oldest
// first, until fn returns false: the reading side of the usage and the
// embedding usage records.
func scanTimed[T any](ctx context.Context, s *Store, prefix, what string, since time.Time, fn func(*T) bool) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		p := []byte(prefix)
		start := p
		if !since.IsZero() {
			start = key(p, be8(since.UnixNano()))
		}
		for it.Seek(start); it.ValidForPrefix(p); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			var rec T
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &rec) }); err != nil {
				return fmt.Errorf("store: %s %q: %w", what, it.Item().Key(), err)
			}
			if !fn(&rec) {
				return nil
			}
		}
		return nil
	})
}

// Qualification is a stored qualification report of one extension digest.
type Qualification struct {
	Digest  string
	Created time.Time
	Report  json.RawMessage
}

// PutQualification stores a qualification report (JSON) for the extension
// module with the given sha256 digest. Reports accumulate; Latest returns
// the newest.
func (s *Store) PutQualification(ctx context.Context, digest string, created time.Time, report json.RawMessage) error {
	if len(digest) != 64 {
		return fmt.Errorf("store: qualification: digest %q is not a sha256 hex digest", digest)
	}
	if !json.Valid(report) {
		return errors.New("store: qualification: report is not valid JSON")
	}
	k := key([]byte(qualPrefix+digest+"/"), be8(created.UnixNano()))
	v := bytes.Clone(report)
	return s.update(ctx, func(txn *badger.Txn) error { return txn.Set(k, v) })
}

// LatestQualification returns the newest report for digest, or ErrNotFound.
func (s *Store) LatestQualification(ctx context.Context, digest string) (*Qualification, error) {
	var q *Qualification
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Reverse = true
		prefix := []byte(qualPrefix + digest + "/")
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		// In reverse mode Seek finds the last key ≤ the seek key.
		it.Seek(key(prefix, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
		if !it.ValidForPrefix(prefix) {
			return ErrNotFound
		}
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("store: malformed qualification key %q", k)
		}
		ns := int64(binary.BigEndian.Uint64(k[len(prefix):]))
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		q = &Qualification{Digest: digest, Created: time.Unix(0, ns).UTC(), Report: v}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// badgerLogger forwards Badger's warnings and errors to slog; its info and
// debug chatter (compactions, replays) is dropped.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error("badger: " + trim(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn("badger: " + trim(fmt.Sprintf(f, a...))) }
func (badgerLogger) Infof(string, ...any)          {}
func (badgerLogger) Debugf(string, ...any)         {}

func trim(s string) string { return string(bytes.TrimRight([]byte(s), "\n")) }
