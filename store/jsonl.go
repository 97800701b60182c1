package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"adhost/runtime"
)

// JSONL is an append-only usage sink: one runtime.UsageRecord per line
// (see the package documentation for batching and the fsync policy).
type JSONL struct {
	f     *os.File
	path  string
	usage *usageQueue[*runtime.UsageRecord]
	buf   bytes.Buffer  // the writer's batch (writer goroutine only)
	enc   *json.Encoder // into buf

	closeOnce sync.Once
	closeErr  error
}

var _ runtime.AsyncUsageSink = (*JSONL)(nil)

// JSONLOptions configure a JSONL sink. The zero value discards the log.
type JSONLOptions struct {
	// Logger receives the sink's write failures and dropped records.
	Logger *slog.Logger
}

// OpenJSONL opens (creating with mode 0600, and creating its directory
// with 0700) the usage file at path for appending.
func OpenJSONL(path string, opts JSONLOptions) (*JSONL, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("usage sink: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("usage sink: %w", err)
	}
	j := &JSONL{f: f, path: path}
	j.enc = json.NewEncoder(&j.buf)
	j.usage = newUsageQueue("jsonl "+path, log, j.writeBatch)
	return j, nil
}

// Path returns the file's path.
func (j *JSONL) Path() string { return j.path }

// RecordUsage queues rec (runtime.AsyncUsageSink); the sink's writer
// appends it, with the other records of its batch, a few milliseconds
// later. The sink keeps rec: the caller must not change it afterwards.
// When the writer is so far behind that the queue stays full until ctx is
// done, the record is dropped, logged and counted (*UsageDroppedError).
func (j *JSONL) RecordUsage(ctx context.Context, rec *runtime.UsageRecord) error {
	if rec == nil {
		return errors.New("usage sink: no record")
	}
	return j.usage.put(ctx, rec, rec.RunID)
}

// QueuesUsage reports that RecordUsage only queues (runtime.AsyncUsageSink).
func (j *JSONL) QueuesUsage() bool { return true }

// Flush waits until every record queued before it is in the file and
// synced, or ctx is done.
func (j *JSONL) Flush(ctx context.Context) error { return j.usage.flush(ctx) }

// writeBatch appends a batch with one write call and syncs the file. A
// record that cannot be encoded is logged and skipped; its batch goes on.
func (j *JSONL) writeBatch(batch []*runtime.UsageRecord) error {
	j.buf.Reset()
	for _, rec := range batch {
		n := j.buf.Len()
		if err := j.enc.Encode(rec); err != nil { // Encode ends each with '\n'
			j.buf.Truncate(n)
			j.usage.log.Error("usage record not written", "sink", j.usage.name, "runId", rec.RunID, "error", err)
		}
	}
	if _, err := j.f.Write(j.buf.Bytes()); err != nil {
		return fmt.Errorf("usage sink: write %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("usage sink: sync %s: %w", j.path, err)
	}
	return nil
}

// Close writes the queued records, syncs and closes the file. It is safe
// to call more than once.
func (j *JSONL) Close() error {
	j.closeOnce.Do(func() {
		j.usage.close() // the writer syncs each batch it writes
		j.closeErr = j.f.Close()
	})
	return j.closeErr
}
