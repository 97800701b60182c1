// Package natstest starts a NATS server with JetStream inside the test
// process — loopback, a random port, a store directory of the caller's —
// so the JetStream backend and the features on it are tested offline,
// with no service to install.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an embedded JetStream server.
type Server struct {
	opts *server.Options
	srv  *server.Server
	URL  string
}

// Start starts a server storing in dir (a temp dir when empty) and shuts
// it down when the test ends.
func Start(t testing.TB, dir string) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := New(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// New starts a server on 127.0.0.1:port (-1: a random port) storing in
// dir. Writes are synced before they are acknowledged (sync_interval
// "always"), so a kill of the server loses nothing acknowledged.
func New(dir string, port int) (*Server, error) {
	opts := &server.Options{
		ServerName: "adhost-test",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
		// Enough for the largest job record a test writes.
		MaxPayload: 8 << 20,
	}
	s := &Server{opts: opts}
	if err := s.start(); err != nil {
		return nil, err
	}
	// A restart listens where the clients reconnect to.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	return s, nil
}

func (s *Server) start() error {
	srv, err := server.NewServer(s.opts)
	if err != nil {
		return fmt.Errorf("natstest: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("natstest: server not ready")
	}
	s.srv = srv
	s.URL = srv.ClientURL()
	return nil
}

// Shutdown stops the server (again: nothing).
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server and starts it again on the same port and
// store directory, as after a crash or an upgrade.
func (s *Server) Restart() error {
	s.Shutdown()
	return s.start()
}
