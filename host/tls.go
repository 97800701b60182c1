package host

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
)

// TLSConfig loads a PEM certificate chain and key for the listener. The
// minimum protocol version is TLS 1.2 (wire-core §1.4).
func TLSConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}, nil
}

// IsLoopback reports whether addr names a loopback host: exactly one of
// localhost, 127.0.0.1, ::1 or [::1] (wire-core §1.4), with or without a
// port. A listener on any other address must use TLS (TLS_REQUIRED at
// startup). Other spellings of loopback (127.0.0.2, 0:0:0:0:0:0:0:1) are
// deliberately not recognised: the rule is an exact list.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1", "[::1]":
		return true
	}
	return false
}
