package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Batching of usage records (see the package documentation).
const (
	// usageQueueLen bounds the records waiting for the writer: about a
	// second of a busy host's runs, ~1 MB of records.
	usageQueueLen = 4096
	// usageBatchMax is the most records one write takes.
	usageBatchMax = 256
	// usageFlushInterval is how long the writer lets records gather after
	// the first one of a batch arrives: runs finishing meanwhile share one
	// commit, and a reader polling the JSONL file sees a record within it.
	// Each commit is synced (Badger's SyncWrites: an msync of the value
	// log's mapping, which blocks its thread for ~0.3 ms and wakes the
	// scheduler's monitor each time), so the interval sets the syncs a busy
	// host pays: at 2 ms a gateway at ~4,000 runs/s made ~500 syncs a
	// second; at 10 ms the commit path was still 5.5 % of the host's CPU
	// under make bench-gateway (perf: 4.1 % in msync), at 50 ms a fifth of
	// that. A kill -9 can lose the usage of the runs of the last interval
	// (their results were already answered) — at most 50 ms of them; usage
	// is an observed record (wire-core §14.3: a record that cannot be
	// queued is dropped and counted, never holding up a run), not a ledger.
	usageFlushInterval = 50 * time.Millisecond
)

// errUsageClosed is returned for a record offered after Close.
var errUsageClosed = errors.New("store: usage sink closed")

// usageQueue takes usage records off the run path: put only queues a value
// and one writer goroutine hands everything queued to write in batches.
// Without it every run paid for a transaction (Badger) or a write and an
// fsync (JSONL) of its own, plus the engine's goroutine that bounds it.
//
// While the writer keeps up, put never blocks and wakes the writer only
// for the first value of a batch: values sent to the buffered channel
// while it lingers wake no one. When the queue is full, put waits, bounded
// by its ctx (the engine gives 2 s); a value still not queued then is
// dropped, counted and logged, and its run is unaffected (wire-core §14.3).
// Close writes everything queued before it returns.
type usageQueue[T any] struct {
	name  string // for the log
	log   *slog.Logger
	write func([]T) error

	// mu is held shared by put and exclusively by close, so that no value
	// is sent on q after it is closed and none sent before is missed.
	mu     sync.RWMutex
	closed bool
	q      chan queued[T]
	wake   chan struct{} // size 1: cut the writer's linger short
	done   chan struct{} // closed when the writer has written everything

	dropped atomic.Int64
}

// queued is a value, or a barrier (ack non-nil) that the writer closes
// once everything queued before it is written (or failed and was logged).
type queued[T any] struct {
	v   T
	ack chan struct{}
}

func newUsageQueue[T any](name string, log *slog.Logger, write func([]T) error) *usageQueue[T] {
	q := &usageQueue[T]{
		name:  name,
		log:   log,
		write: write,
		q:     make(chan queued[T], usageQueueLen),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	go q.run()
	return q
}

// put queues v. It returns at once unless the queue is full; it then waits
// until ctx is done and drops v.
func (q *usageQueue[T]) put(ctx context.Context, v T, runID string) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return errUsageClosed
	}
	it := queued[T]{v: v}
	select {
	case q.q <- it:
	default:
		select {
		case q.q <- it:
		case <-ctx.Done():
			n := q.dropped.Add(1)
			q.log.Warn("usage record dropped: the writer is behind", "sink", q.name, "runId", runID, "dropped", n)
			return &UsageDroppedError{Sink: q.name, RunID: runID, Dropped: n}
		}
	}
	if len(q.q) >= usageBatchMax {
		q.kick()
	}
	return nil
}

// UsageDroppedError reports a usage record that its sink could not queue
// within the caller's bound; Dropped counts the records the sink dropped
// since it was opened, this one included.
type UsageDroppedError struct {
	Sink, RunID string
	Dropped     int64
}

func (e *UsageDroppedError) Error() string {
	return "store: " + e.Sink + ": usage record " + e.RunID + " dropped: queue full"
}

// flush waits until everything queued before it is written; a write that
// failed was logged by the writer. After close it returns at once.
func (q *usageQueue[T]) flush(ctx context.Context) error {
	ack := make(chan struct{})
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return nil
	}
	select {
	case q.q <- queued[T]{ack: ack}:
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	q.mu.RUnlock()
	q.kick()
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *usageQueue[T]) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops taking values, writes everything queued and waits for the
// writer to end. It is safe to call more than once.
func (q *usageQueue[T]) close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.q)
	}
	q.mu.Unlock()
	q.kick()
	<-q.done
}

func (q *usageQueue[T]) run() {
	defer close(q.done)
	batch := make([]T, 0, usageBatchMax)
	var acks []chan struct{}
	linger := time.NewTimer(usageFlushInterval)
	linger.Stop()
	for {
		it, ok := <-q.q
		if !ok {
			return
		}
		if it.ack == nil && len(q.q) < usageBatchMax-1 {
			linger.Reset(usageFlushInterval)
			select {
			case <-linger.C:
			case <-q.wake:
				linger.Stop()
			}
		}
		batch, acks = batch[:0], acks[:0]
		for {
			if it.ack != nil {
				acks = append(acks, it.ack)
			} else {
				batch = append(batch, it.v)
			}
			if len(batch) == usageBatchMax {
				break
			}
			more := false
			select {
			case it, more = <-q.q:
			default:
			}
			if !more {
				break
			}
		}
		if len(batch) > 0 {
			if err := q.write(batch); err != nil {
				q.log.Error("usage records not written", "sink", q.name, "records", len(batch), "error", err)
			}
		}
		for _, ack := range acks {
			close(ack)
		}
		clear(batch) // let the records go
	}
}
