package store

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"adhost/runtime/durable"
)

func TestOpenRejectsUnknownLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(layoutKey), []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), `unsupported layout "2"`) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want unsupported layout", err)
	}
}

// A full disk reaches the features as durable.ErrFull, a transaction past
// Badger's limit as durable.ErrTooLarge, whatever Badger's wording around
// them.
func TestCommitErrorKinds(t *testing.T) {
	full := fmt.Errorf("While opening memtable: %v", syscall.ENOSPC) // Badger flattens with %v
	if err := commitError(full); !errors.Is(err, durable.ErrFull) {
		t.Errorf("ENOSPC: %v", err)
	}
	if err := commitError(badger.ErrTxnTooBig); !errors.Is(err, durable.ErrTooLarge) {
		t.Errorf("ErrTxnTooBig: %v", err)
	}
	if err := commitError(errors.New("disk on fire")); errors.Is(err, durable.ErrFull) || errors.Is(err, durable.ErrTooLarge) {
		t.Errorf("other: %v", err)
	}
}
