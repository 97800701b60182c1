package store

import (
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
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
