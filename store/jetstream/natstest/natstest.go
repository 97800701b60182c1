// Package natstest starts a NATS server with JetStream inside the test
// process — loopback, a random port, a store directory of the caller's —
// so the JetStream backend and the features on it are tested offline,
// with no service to install.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
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

// StartDefaultSync starts a server in a temp dir that syncs its store
// only at NATS's default interval (every two minutes) instead of before
// every acknowledgement: a kill of it loses what it acknowledged since.
// Only for benchmarks, to tell the cost of the disk syncs from the rest.
func StartDefaultSync(t testing.TB) *Server {
	t.Helper()
	s := &Server{opts: baseOptions(t.TempDir(), -1)}
	s.opts.SyncAlways = false
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// New starts a server on 127.0.0.1:port (-1: a random port) storing in
// dir. Writes are synced before they are acknowledged (sync_interval
// "always"), so a kill of the server loses nothing acknowledged.
func New(dir string, port int) (*Server, error) {
	s := &Server{opts: baseOptions(dir, port)}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func baseOptions(dir string, port int) *server.Options {
	return &server.Options{
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
	// A restart listens where the clients reconnect to.
	s.opts.Port = srv.Addr().(*net.TCPAddr).Port
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

// MetaLeader reports whether the server leads its cluster's JetStream
// meta group, the one that places streams.
func (s *Server) MetaLeader() bool { return s.srv != nil && s.srv.JetStreamIsLeader() }

// Restart stops the server and starts it again on the same port and
// store directory, as after a crash or an upgrade.
func (s *Server) Restart() error {
	s.Shutdown()
	return s.start()
}

// StartWithCredentials starts a server in operator mode (decentralised
// JWT authentication, as a managed NATS deployment runs): one account
// with JetStream enabled and one user of it, whose credentials file
// (.creds: the user JWT and its nkey seed) it writes into the test's temp
// directory and returns. A connection without it is refused.
func StartWithCredentials(t testing.TB) (*Server, string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	skp, err := nkeys.CreateAccount()
	must(err)
	spub, _ := skp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "adhost-test"
	oc.SystemAccount = spub
	sysc := jwt.NewAccountClaims(spub)
	sysc.Name = "SYS"
	sysJWT, err := sysc.Encode(okp)
	must(err)
	akp, err := nkeys.CreateAccount()
	must(err)
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "adhost"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := ac.Encode(okp)
	must(err)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "adhost-host"
	userJWT, err := uc.Encode(akp)
	must(err)
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	must(err)
	path := filepath.Join(t.TempDir(), "adhost.creds")
	must(os.WriteFile(path, creds, 0o600))

	resolver := &server.MemAccResolver{}
	must(resolver.Store(spub, sysJWT))
	must(resolver.Store(apub, accJWT))
	opts := baseOptions(t.TempDir(), -1)
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.AccountResolver = resolver
	opts.SystemAccount = spub
	s := &Server{opts: opts}
	must(s.start())
	t.Cleanup(s.Shutdown)
	return s, path
}

// StartCluster starts a JetStream cluster of n servers in the process
// (routes on loopback, a temp store directory each) and waits until it
// has a meta leader, so streams with replicas up to n can be created. It
// returns the servers; any one's URL reaches the cluster.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	servers := make([]*Server, n)
	errs := make(chan error, n)
	for i := range servers {
		opts := baseOptions(t.TempDir(), -1)
		opts.ServerName = fmt.Sprintf("adhost-test-%d", i+1)
		opts.Cluster = server.ClusterOpts{Name: "adhost-test", Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = routes
		servers[i] = &Server{opts: opts}
		go func() { errs <- servers[i].start() }()
	}
	for range servers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range servers {
		t.Cleanup(s.Shutdown)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		for _, s := range servers {
			if s.srv.JetStreamIsClustered() && s.srv.JetStreamIsCurrent() {
				ready++
			}
		}
		if ready == n && leaderSeesAll(servers) {
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatal("natstest: the cluster elected no meta leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderSeesAll reports whether a meta leader is elected and counts every
// server as an online JetStream peer with current stats: until it does,
// placing a replicated stream can fail with "no suitable peers for
// placement, peer offline" (TestReplicas3 did, once in a while, right after
// the cluster formed).
func leaderSeesAll(servers []*Server) bool {
	for _, s := range servers {
		if s.srv.JetStreamIsLeader() {
			return len(s.srv.JetStreamClusterPeers()) == len(servers)
		}
	}
	return false
}
