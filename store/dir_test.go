//go:build unix

package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"adhost/store"
)

// openRefused opens dir, expects a refusal wrapping want whose message
// names dir and says why (never Badger's own text), and returns it.
func openRefused(t *testing.T, dir string, want error, why string) error {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded, want %v", dir, want)
	}
	msg := err.Error()
	if !errors.Is(err, want) || !strings.Contains(msg, dir) || !strings.Contains(msg, why) || strings.Contains(msg, "Badger database.") {
		t.Fatalf("Open(%s) = %q (%T), want %v saying %q", dir, msg, err, want, why)
	}
	return err
}

func TestOpenRefusesDirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	// Twice: a refusal leaves the holder's lock and pid alone.
	for range 2 {
		openRefused(t, dir, store.ErrInUse, fmt.Sprintf("is in use: is another adhost running? (pid %d)", os.Getpid()))
	}
	if _, err := s.Create(t.Context(), "still/mine", nil); err != nil {
		t.Fatalf("the holder after a refused Open: %v", err)
	}
	s.Close()
	s = open(t, dir) // free again once closed
	s.Close()
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	root := t.TempDir()

	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o600)
	openRefused(t, file, store.ErrForeign, "is not a directory")

	remains := filepath.Join(root, "remains")
	os.Mkdir(remains, 0o700)
	os.WriteFile(filepath.Join(remains, "000001.vlog"), []byte("x"), 0o600)
	openRefused(t, remains, store.ErrForeign, "000001.vlog")

	// Another application's Badger database: refused, and not written to.
	other := filepath.Join(root, "other")
	db, err := badger.Open(badger.DefaultOptions(other).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("their/key"), []byte("v")) })
	db.Close()
	openRefused(t, other, store.ErrForeign, "without adhost's layout key")
	db, err = badger.Open(badger.DefaultOptions(other).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Fatalf("the foreign database holds %d keys after the refusal, want its 1", n)
	}
}

// The host keeps its own files beside the database (compiled-module cache,
// dev token, usage JSONL): a directory holding only such files is a new
// store, and it stays one after a restart.
func TestOpenSharesDirectoryWithHostFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "dev.token"), []byte("t\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "wasm-cache"), 0o700)
	s := open(t, dir)
	if _, err := s.Create(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	if e, err := s.Get(t.Context(), "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("Get after reopen: %+v %v", e, err)
	}
}

func TestOpenRefusesUnsafeDirectory(t *testing.T) {
	root := t.TempDir()

	real := filepath.Join(root, "real")
	link := filepath.Join(root, "link")
	os.Mkdir(real, 0o700)
	os.Symlink(real, link)
	openRefused(t, link, store.ErrUnsafe, "is a symbolic link")
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Fatalf("the link's target was written to: %v", ents)
	}

	for _, mode := range []os.FileMode{0o770, 0o702, 0o777} {
		d := filepath.Join(root, fmt.Sprintf("mode%o", mode))
		os.Mkdir(d, 0o700)
		os.Chmod(d, mode)
		openRefused(t, d, store.ErrUnsafe, fmt.Sprintf("is writable by group or others (mode %04o)", mode))
	}
	for _, mode := range []os.FileMode{0o700, 0o750, 0o755} {
		d := filepath.Join(root, fmt.Sprintf("ok%o", mode))
		os.Mkdir(d, 0o700)
		os.Chmod(d, mode)
		s, err := store.Open(d, store.Options{})
		if err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
		s.Close()
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the other-owner case needs chown")
		return
	}
	theirs := filepath.Join(root, "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	openRefused(t, theirs, store.ErrUnsafe, "is owned by uid 65534, not by this user (uid 0)")
}
