//go:build unix

package wasm

import (
	"net"
	"syscall"
)

// peerClosed reports whether an idle connection is unusable: the server
// closed it (a read would return EOF), reset it, or sent bytes nobody asked
// for. net/http's Transport learns this from the read loop it keeps on
// every idle connection; a peek that does not wait costs one system call
// on reuse instead of a goroutine per connection. For TLS the bytes are
// records (a close_notify alert, usually), which an idle connection
// should not receive either.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
				closed = false // nothing to read: open and quiet
			case err == nil && n >= 0:
				closed = true // EOF, or unexpected bytes
			}
			return true
		}
	})
	return closed || err != nil
}
