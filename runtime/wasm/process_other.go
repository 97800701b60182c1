//go:build !linux

package wasm

import (
	"errors"
	"os"
	"syscall"
)

// The process capability needs process groups and a stable file identity;
// this build serves it on Linux only. Elsewhere every binary is refused.
type fileID struct{ valid bool }

var errNoProcesses = errors.New("the process capability is available on Linux only")

func statID(path string) (fileID, error) {
	return fileID{}, &os.PathError{Op: "stat", Path: path, Err: errNoProcesses}
}

func groupAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, bool) {}

func signalOf(*os.ProcessState) (int, bool) { return 0, false }
