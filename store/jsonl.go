package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"adhost/runtime"
)

// JSONL is an append-only usage sink: one runtime.UsageRecord per line
// (see the package documentation for the fsync policy).
type JSONL struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	closed bool
}

var _ runtime.UsageSink = (*JSONL)(nil)

// OpenJSONL opens (creating with mode 0600, and creating its directory
// with 0700) the usage file at path for appending.
func OpenJSONL(path string) (*JSONL, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("usage sink: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("usage sink: %w", err)
	}
	return &JSONL{f: f, path: path}, nil
}

// Path returns the file's path.
func (j *JSONL) Path() string { return j.path }

// RecordUsage appends rec as one line and syncs the file.
func (j *JSONL) RecordUsage(ctx context.Context, rec *runtime.UsageRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("usage sink: %w", err)
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("usage sink: closed")
	}
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("usage sink: write %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("usage sink: sync %s: %w", j.path, err)
	}
	return nil
}

// Close syncs and closes the file. It is safe to call more than once.
func (j *JSONL) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	return errors.Join(j.f.Sync(), j.f.Close())
}
