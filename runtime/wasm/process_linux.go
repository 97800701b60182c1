package wasm

import (
	"os"
	"syscall"
)

// fileID is what identifies a file's content without reading it: a binary
// replaced (new inode) or modified in place (new size, mtime or ctime)
// gets another one. ctime cannot be set back by an unprivileged writer.
type fileID struct {
	valid            bool
	dev, ino         uint64
	size             int64
	mtimeNs, ctimeNs int64
	mode             uint32
}

func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileID{}, &os.PathError{Op: "stat", Path: path, Err: syscall.EINVAL}
	}
	return fileID{
		valid: true, dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano(), mode: st.Mode,
	}, nil
}

// groupAttr starts the process as the leader of a new process group, so
// that the group — the CLI and every child it spawns — can be signalled at
// once, and kills it if the host dies without cleaning up (Pdeathsig
// fires when the thread that started it exits; Go threads live as long as
// the process unless a goroutine exits while locked to one, which the
// host's goroutines that start processes never do).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends SIGTERM (or SIGKILL) to the process group pgid. A group
// that is already gone is no error.
func signalGroup(pgid int, kill bool) {
	if pgid <= 1 {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

func signalOf(ps *os.ProcessState) (int, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}
