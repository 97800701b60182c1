package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"adhost/runtime/durable"
)

// Expiry keys: retention finds terminal jobs by the keys under
// prefixExpiry, in time order. One key per job cost a synced write per
// job; a worker instead writes the expiries of the jobs it settles within
// expiryLinger as one batch key, "jobs/v1/exp/<ms>-b.<uuid>" (ms: the
// latest expiry in it, so the batch is due when all its jobs are), whose
// value lists the job ids. The settling waits for the batch, so as before
// a job's expiry is durable before its queue entry goes. Keys of one job
// ("…-<id>", written by migrate and by earlier versions) are read as
// before. A job in two keys (a settle retried) is tombstoned once: the
// tombstone is idempotent.

// expiryLinger is how long a batch collects settled jobs before it is
// written: a worker's settling is off every client's path (the record is
// terminal already), so a batch may wait for the jobs that end after it.
const expiryLinger = 20 * time.Millisecond

// maxExpiryBatch bounds the ids of one batch key (a few tens of KB).
const maxExpiryBatch = 512

// batchMark starts the id part of a batch key; job ids are UUIDs, which
// have no '.'.
const batchMark = "b."

// expiryBatch is the value of a batch key.
type expiryBatch struct {
	IDs []string `json:"ids"`
}

// expiries is a worker's batch writer.
type expiries struct {
	mu      sync.Mutex
	pending []*expiring
	writing bool
}

type expiring struct {
	id   string
	ms   int64
	err  error
	done chan struct{}
}

// addExpiry records that job id expires at ms and returns once it is
// durable (or failed): in the next batch when batch is set (a settling on
// the dispatch path), else at once in a key of its own (a cancel, whose
// client waits; recovery at Open, which settles jobs one after another).
func (s *Service) addExpiry(ctx context.Context, id string, ms int64, batch bool) error {
	if !batch {
		return ignoreExists(s.st.Create(ctx, expiryKey(ms, id), nil))
	}
	x := &s.expiries
	e := &expiring{id: id, ms: ms, done: make(chan struct{})}
	x.mu.Lock()
	x.pending = append(x.pending, e)
	lead := !x.writing
	x.writing = true
	x.mu.Unlock()
	if lead {
		s.writeExpiries(context.WithoutCancel(ctx))
	}
	<-e.done
	return e.err
}

// writeExpiries is the leader's loop: linger, then write what is pending
// in batches, until nothing is.
func (s *Service) writeExpiries(ctx context.Context) {
	x := &s.expiries
	for {
		time.Sleep(expiryLinger)
		x.mu.Lock()
		batch := x.pending
		if len(batch) > maxExpiryBatch {
			batch = batch[:maxExpiryBatch]
		}
		x.pending = x.pending[len(batch):]
		x.mu.Unlock()
		var v expiryBatch
		var ms int64
		for _, e := range batch {
			v.IDs = append(v.IDs, e.id)
			ms = max(ms, e.ms)
		}
		b, _ := json.Marshal(v)
		_, err := s.st.Create(ctx, expiryKey(ms, batchMark+newUUID()), b)
		for _, e := range batch {
			e.err = err
			close(e.done)
		}
		x.mu.Lock()
		if len(x.pending) == 0 {
			x.writing = false
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
	}
}

// expiredIDs are the jobs an expiry key that is due names: its own job, or
// a batch's.
func expiredIDs(e durable.Entry, id string) []string {
	if !strings.HasPrefix(id, batchMark) {
		return []string{id}
	}
	var v expiryBatch
	if json.Unmarshal(e.Value, &v) != nil {
		return nil
	}
	return v.IDs
}
