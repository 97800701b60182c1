package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Refusals of Open, for the host to tell apart (errors.Is). The errors
// Open returns say which directory and why in words an operator can act
// on; these are what they wrap.
var (
	// ErrInUse: another process (another adhost, or a CLI command such as
	// qualify) holds the directory.
	ErrInUse = errors.New("store: data directory in use")
	// ErrForeign: the directory holds something that is not an adhost
	// store (a file, another application's Badger database, the remains
	// of one).
	ErrForeign = errors.New("store: not an adhost data directory")
	// ErrUnsafe: others could change or replace the store: a symbolic
	// link, a directory writable by group or others, or one owned by
	// another user.
	ErrUnsafe = errors.New("store: unsafe data directory")
)

// dirError is a refusal: the operator's message, and the sentinel.
type dirError struct {
	kind error
	msg  string
}

func (e *dirError) Error() string { return e.msg }
func (e *dirError) Unwrap() error { return e.kind }

func refuse(kind error, format string, a ...any) error {
	return &dirError{kind: kind, msg: "store: data directory " + fmt.Sprintf(format, a...)}
}

// badgerFiles are the names Badger writes into its directory. A directory
// with any of them but no MANIFEST is a damaged or half-copied database:
// opening it would start an empty one beside the remains.
func isBadgerFile(name string) bool {
	switch name {
	case "MANIFEST", "KEYREGISTRY", "DISCARD", "LOCK":
		return true
	}
	for _, ext := range []string{".vlog", ".sst", ".mem"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// prepareDir creates dir (mode 0700) when it does not exist and refuses
// one that is unsafe or foreign, before Badger writes anything into it.
// It reports whether dir already holds a Badger database.
//
// Other files may share the directory: the host keeps its compiled-module
// cache, the dev token and by default the usage JSONL there. So a
// directory without Badger's files is a new store whatever else it holds;
// one with them is checked for adhost's layout key after opening
// (checkLayout).
func prepareDir(dir string) (existing bool, err error) {
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("store: %w", err)
		}
		st, err = os.Lstat(dir)
	}
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, _ := filepath.EvalSymlinks(dir)
		return false, refuse(ErrUnsafe, "%s is a symbolic link (to %s): set store.path to the directory itself", dir, target)
	}
	if !st.IsDir() {
		return false, refuse(ErrForeign, "%s is not a directory", dir)
	}
	if err := checkOwner(dir, st); err != nil {
		return false, err
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return false, refuse(ErrUnsafe, "%s is writable by group or others (mode %04o): chmod 700 it", dir, perm)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	var badger []string
	for _, e := range ents {
		if e.Name() == "MANIFEST" {
			existing = true
		}
		if isBadgerFile(e.Name()) && e.Name() != "LOCK" {
			badger = append(badger, e.Name())
		}
	}
	if !existing && len(badger) > 0 {
		return false, refuse(ErrForeign, "%s holds database files (%s) but no MANIFEST: not an adhost store, or a damaged one", dir, strings.Join(badger, ", "))
	}
	return existing, nil
}

// inUse reports whether another process holds dir, with the holder's pid
// from Badger's LOCK file (Badger writes its pid there and flocks the
// directory; 0 when the file cannot be read).
func inUse(dir string) error {
	held, err := dirLocked(dir)
	if err != nil || !held {
		return err
	}
	b, _ := os.ReadFile(filepath.Join(dir, "LOCK"))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return refuse(ErrInUse, "%s is in use: is another adhost running? (pid %d)", dir, pid)
	}
	return refuse(ErrInUse, "%s is in use: is another adhost running?", dir)
}
