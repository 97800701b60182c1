//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a directory another user owns: that user could
// replace the database under the host.
func checkOwner(dir string, st os.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(sys.Uid) != uid {
		return refuse(ErrUnsafe, "%s is owned by uid %d, not by this user (uid %d)", dir, sys.Uid, uid)
	}
	return nil
}

// dirLocked probes the flock Badger holds on an open database's directory
// (taking it for a moment and giving it back at once).
func dirLocked(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: lock %s: %w", dir, err)
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
