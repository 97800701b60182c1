package jetstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"adhost/runtime/durable"
	"adhost/runtime/durable/durabletest"
	"adhost/store/jetstream"
	"adhost/store/jetstream/natstest"
)

// TestReplicas3: on a three-server cluster, a store opened with replicas 3
// creates every bucket and the log stream with three replicas, passes the
// conformance suite, and keeps acknowledged writes and serving with one
// server of the three gone.
func TestReplicas3(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server JetStream cluster")
	}
	servers := natstest.StartCluster(t, 3)
	urls := []string{servers[0].URL, servers[1].URL, servers[2].URL}
	ctx := context.Background()
	st, err := jetstream.Open(ctx, jetstream.Options{URLs: urls, Replicas: 3, BucketPrefix: "R3"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KV_R3_KV_0", "KV_R3_KV_3", "KV_R3_LEASES", "R3_LOGS_0", "R3_LOGS_3"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Replicas != 3 {
			t.Errorf("stream %s: %d replicas", name, cfg.Replicas)
		}
		if strings.HasPrefix(name, "KV_") && cfg.AllowDirect {
			t.Errorf("stream %s: direct gets on (a follower may answer an older revision)", name)
		}
	}
	t.Run("conformance", func(t *testing.T) {
		n := 0
		durabletest.Run(t, func(t *testing.T) durable.Store {
			n++
			s, err := jetstream.Open(ctx, jetstream.Options{URLs: urls, Replicas: 3, BucketPrefix: "C" + strings.Repeat("x", n)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})

	rev, err := st.Create(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "l", 0, []byte("a")); err != nil {
		t.Fatal(err)
	}
	// One server of three gone: a majority still acknowledges.
	servers[2].Shutdown()
	var e durable.Entry
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err = st.Get(ctx, "k")
		if err == nil {
			_, err = st.Update(ctx, "k", []byte("w"), rev)
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || string(e.Value) != "v" {
		t.Fatalf("with one server down: %+v %v", e, err)
	}
	if last, err := st.Append(ctx, "l", 1, []byte("b")); err != nil || last != 2 {
		t.Fatalf("append with one server down: %d %v", last, err)
	}
}

// TestPlacementWait: a host opening its store while two servers of a
// three-server cluster restart waits for one of them, where the meta
// leader answers at first that it has no peers to place three replicas
// on, instead of refusing to start; and a store the cluster cannot place
// fails once Open's time is up, with the server's reason. (The meta
// leader keeps its place for ten seconds without a quorum, longer than
// the test.)
func TestPlacementWait(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server JetStream cluster")
	}
	servers := natstest.StartCluster(t, 3)
	var leader *natstest.Server
	var followers []*natstest.Server
	for _, s := range servers {
		if s.MetaLeader() {
			leader = s
		} else {
			followers = append(followers, s)
		}
	}
	if leader == nil {
		t.Fatal("no meta leader")
	}
	for _, s := range followers {
		s.Shutdown()
	}
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		restarted <- followers[0].Restart()
	}()
	ctx := context.Background()
	st, err := jetstream.Open(ctx, jetstream.Options{URLs: []string{leader.URL}, Replicas: 3, BucketPrefix: "W"})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("open during a restart: %v", err)
	}
	defer st.Close()
	if _, err := st.Create(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	followers[0].Shutdown()
	start := time.Now()
	_, err = jetstream.Open(ctx, jetstream.Options{URLs: []string{leader.URL}, Replicas: 3, BucketPrefix: "N", Timeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no suitable peers") {
		t.Fatalf("open with two servers of three gone: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("open with two servers of three gone took %v, its timeout is 0.5 s", d)
	}
}

// TestCredentials: a server that requires authentication is reached with
// the credentials file and refused without it; a missing or unreadable
// file is an error naming the file (jetstream.ErrCredentials), before any
// connection is tried.
func TestCredentials(t *testing.T) {
	srv, creds := natstest.StartWithCredentials(t)
	ctx := context.Background()
	o := jetstream.Options{URLs: []string{srv.URL}, BucketPrefix: "A", Timeout: time.Second}
	if _, err := jetstream.Open(ctx, o); err == nil {
		t.Fatal("opened without credentials")
	}
	o.CredentialsFile = creds
	st, err := jetstream.Open(ctx, o)
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	if _, err := st.Create(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("write with credentials: %v", err)
	}
	st.Close()

	missing := filepath.Join(t.TempDir(), "nope.creds")
	o.CredentialsFile = missing
	if _, err := jetstream.Open(ctx, o); !errors.Is(err, jetstream.ErrCredentials) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
	if os.Geteuid() != 0 {
		unreadable := filepath.Join(t.TempDir(), "locked.creds")
		if err := os.WriteFile(unreadable, []byte("x"), 0o000); err != nil {
			t.Fatal(err)
		}
		o.CredentialsFile = unreadable
		if _, err := jetstream.Open(ctx, o); !errors.Is(err, jetstream.ErrCredentials) {
			t.Fatalf("unreadable file: %v", err)
		}
	}
	garbage := filepath.Join(t.TempDir(), "garbage.creds")
	if err := os.WriteFile(garbage, []byte("not a credentials file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.CredentialsFile = garbage
	if _, err := jetstream.Open(ctx, o); !errors.Is(err, jetstream.ErrCredentials) {
		t.Fatalf("not a credentials file: %v", err)
	}
}
