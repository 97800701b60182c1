package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"adhost/store/jetstream"
	"adhost/store/jetstream/natstest"
)

// rawJS is a plain client of srv, to lay out buckets as another version
// of the backend would have.
func rawJS(t *testing.T, srv *natstest.Server) njs.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func openPrefix(prefix string, srv *natstest.Server) (*jetstream.Store, error) {
	return jetstream.Open(context.Background(), jetstream.Options{URLs: []string{srv.URL}, BucketPrefix: prefix, Timeout: 2 * time.Second})
}

// A store holding state in the one KV bucket or the one log stream of the
// unsharded layout, or written with other shard counts, is refused at
// Open, naming what it found: a host must not take it for an empty store
// (and answer JOB_NOT_FOUND for jobs that exist) or put keys where the
// other hosts do not look.
func TestOpenRefusesAnotherLayout(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	js := rawJS(t, srv)

	old, err := js.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: "OLD_KV"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "jobs.v1.job.x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix("OLD", srv); err == nil || !strings.Contains(err.Error(), "OLD_KV") {
		t.Fatalf("Open over the unsharded KV bucket: %v", err)
	}

	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "OLDLOG_LOGS", Subjects: []string{"OLDLOG.log.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "OLDLOG.log.jobs.v1.ev.x.1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix("OLDLOG", srv); err == nil || !strings.Contains(err.Error(), "OLDLOG_LOGS") {
		t.Fatalf("Open over the unsharded log stream: %v", err)
	}

	if _, err := js.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: "WIDE_KV_0",
		Metadata: map[string]string{"adhost_layout": "kv=8 logs=8"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix("WIDE", srv); err == nil || !strings.Contains(err.Error(), "kv=8 logs=8") {
		t.Fatalf("Open over another shard count: %v", err)
	}

	// Empty leftovers of the old layout are no state: Open goes on, and a
	// second host opens the same layout.
	if _, err := js.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: "EMPTY_KV"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, err := openPrefix("EMPTY", srv)
		if err != nil {
			t.Fatalf("Open beside an empty unsharded bucket: %v", err)
		}
		st.Close()
	}
}

// Keys and logs spread over the shards, and List still returns one
// ordered, paged view of every shard's keys.
func TestShardsSpreadAndListMerges(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	s := open(t, srv)
	var want []string
	for i := range 64 {
		k := fmt.Sprintf("jobs/v1/q/%03d", i)
		want = append(want, k)
		if _, err := s.Create(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, fmt.Sprintf("jobs/v1/ev/%d", i), 0, []byte("e")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "jobs/v1/r", []byte("other prefix")); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, s, "jobs/v1/q/", 10)
	if !slices.Equal(got, want) {
		t.Fatalf("List pages: %v", got)
	}
	w := s.Writes()
	if len(w.Streams) != 4+1+4 {
		t.Fatalf("streams counted: %v", w.Streams)
	}
	for i, n := range w.Streams {
		if i != 4 && n == 0 { // every KV and log shard took some of 65 keys and 64 logs
			t.Errorf("stream %d took no write: %v", i, w.Streams)
		}
	}
}

// Writes counts each acknowledged message once, by kind, and nothing for
// a refused compare-and-set.
func TestWritesCounts(t *testing.T) {
	srv := natstest.Start(t, "")
	ctx := context.Background()
	s := open(t, srv)
	rev, err := s.Create(ctx, "a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "a", []byte("2"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "a", []byte("3"), rev); err == nil {
		t.Fatal("stale Update accepted")
	}
	if err := s.Delete(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "l", 0, []byte("x"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, "lease", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "lease", l.Token); err != nil {
		t.Fatal(err)
	}
	w := s.Writes()
	got := [...]uint64{w.KVCreate, w.KVUpdate, w.KVDelete, w.Lease, w.LogMsgs, w.LogRecs, w.Total(), w.Busiest()}
	if want := [...]uint64{1, 1, 1, 2, 1, 2, 6, 3}; got != want { // busiest: the shard of "a"
		t.Fatalf("create, update, delete, lease, log messages, records, total, busiest = %v, want %v", got, want)
	}
}
