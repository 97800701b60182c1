//go:build !unix

package wasm

import "net"

// peerClosed cannot peek without waiting here; a reused connection the
// server closed is then caught by the retry in h1Client.roundTrip.
func peerClosed(net.Conn) bool { return false }
