package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
	"adhost/store/jetstream/natstest"
)

// Several hosts on one JetStream (issue 16): two real binaries, each with
// its own local Badger directory, share sessions, idempotency keys and
// jobs through a JetStream server started in this test process.

// clusterSite is a dev site on the JetStream at url under prefix, with
// sessions and idempotency on, and jobs when jobs is set.
func clusterSite(t *testing.T, url, prefix string, jobs bool) *site {
	t.Helper()
	s := newSite(t)
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	head := "version = 1\n\n[sessions]\nenabled = true\nretention_ms = 3600000\n\n[idempotency]\nenabled = true\n"
	grants := "\n[tokens.grants]\nsessions = [\"create\", \"read\", \"continue\", \"delete\"]\n"
	if jobs {
		head += "\n[jobs]\nenabled = true\nretention_ms = 3600000\nworkers = 8\npoll_interval_ms = 20\n"
		grants += "jobs = [\"submit\", \"read\", \"cancel\"]\n"
	}
	text := strings.Replace(string(doc), "version = 1\n", head, 1) + grants +
		fmt.Sprintf("\n[store]\nbackend = \"jetstream\"\n\n[store.jetstream]\nurl = %q\nbucket_prefix = %q\n", url, prefix)
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func clusterClient(t *testing.T, srv *server, s *site) *client.Client {
	t.Helper()
	c, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterSessions: a session created on one host continues on the
// other; 100 rounds of both hosts continuing the same revision at once
// give exactly one success each, and the revision read from either host
// never goes backwards; a turn running on a host killed with kill -9 is
// busy on the survivor until the dead host's presence lapses, then
// interrupted.
func TestClusterSessions(t *testing.T) {
	js := natstest.Start(t, "")
	sa, sb := clusterSite(t, js.URL, "E2ES", false), clusterSite(t, js.URL, "E2ES", false)
	a, b := startServer(t, sa), startServer(t, sb)
	ca, cb := clusterClient(t, a, sa), clusterClient(t, b, sb)
	ctx := t.Context()

	// A session holds 100 visible messages (50 turns): the 100 rounds
	// use a new session every 40.
	var id string
	var rev int64
	for round := range 100 {
		if round%40 == 0 {
			snap, err := ca.CreateSession(ctx, &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
			if err != nil {
				t.Fatal(err)
			}
			id, rev = snap.Session.ID, 0
			if _, err := cb.Run(ctx, sessionTurn("conformance:text", id, 0)); err != nil {
				t.Fatalf("continue on the other host: %v", err)
			}
			if got, err := ca.ReadSession(ctx, id); err != nil || got.Session.Revision != 1 || len(got.History) != 2 {
				t.Fatalf("read back on the first host: %+v %v", got, err)
			}
			rev = 1
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*client.Client{ca, cb} {
			wg.Go(func() { _, errs[i] = c.Run(ctx, sessionTurn("conformance:text", id, rev)) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch code := client.CodeOf(err); {
			case err == nil:
				won++
			case code != protocol.CodeSessionRevisionConflict && code != protocol.CodeSessionBusy:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d hosts won revision %d (%v)", round, won, rev, errs)
		}
		for _, c := range []*client.Client{ca, cb} {
			got, err := c.ReadSession(ctx, id)
			if err != nil || got.Session.Revision != rev+1 {
				t.Fatalf("round %d: revision %+v, want %d (%v)", round, got, rev+1, err)
			}
		}
		rev++
	}

	// kill -9 of the host running a turn.
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended, _ := pendingTurn(streamCtx, t, ca, sessionTurn("conformance:cancel", id, rev))
	killHard(t, a)
	<-ended
	sawBusy := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cb.Run(ctx, sessionTurn("conformance:text", id, rev))
		code := client.CodeOf(err)
		if code == protocol.CodeSessionInterrupted {
			break
		}
		if code != protocol.CodeSessionBusy {
			t.Fatalf("on the survivor: %v", err)
		}
		sawBusy = true
		if time.Now().After(deadline) {
			t.Fatal("the dead host's turn was never interrupted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !sawBusy {
		t.Error("the turn was interrupted at once: the dead host's presence should hold it busy for a while")
	}
	if got, err := cb.ReadSession(ctx, id); err != nil || got.Session.State != client.SessionInterrupted || got.Session.Revision != rev {
		t.Fatalf("after the kill: %+v %v", got, err)
	}
}

// TestClusterIdempotency: a key accepted on one host replays on the
// other with the same run id, a changed request there is
// IDEMPOTENCY_CONFLICT, and another subject's key is independent.
func TestClusterIdempotency(t *testing.T) {
	js := natstest.Start(t, "")
	sa, sb := clusterSite(t, js.URL, "E2EI", false), clusterSite(t, js.URL, "E2EI", false)
	a, b := startServer(t, sa), startServer(t, sb)
	ca, cb := clusterClient(t, a, sa), clusterClient(t, b, sb)
	ctx := t.Context()
	for i := range 20 {
		key := fmt.Sprintf("k-%d", i)
		req := &protocol.RunRequest{Provider: fixtureProvider, Model: fixtureModel, Input: "conformance:text", IdempotencyKey: &key}
		first, second := ca, cb
		if i%2 == 1 {
			first, second = cb, ca
		}
		r1, err := first.Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := second.Run(ctx, req)
		if err != nil || r2.RunID != r1.RunID || r2.Text != r1.Text {
			t.Fatalf("key %s replayed on the other host: %+v %v (first %s)", key, r2, err, r1.RunID)
		}
		changed := *req
		changed.Input = "conformance:other"
		if _, err := second.Run(ctx, &changed); client.CodeOf(err) != protocol.CodeIdempotencyConflict {
			t.Fatalf("changed request on the other host: %v", err)
		}
	}
}

// TestClusterStoreOutage: jobs on both hosts of the JetStream store; a
// JetStream restart (same store directory) while both run: submissions
// during the outage fail JOB_STORE_ERROR (503, uncertain, retryable), session reads
// fail, and both succeed again after it with everything acknowledged
// before it still there.
func TestClusterStoreOutage(t *testing.T) {
	dir := t.TempDir()
	js := natstest.Start(t, dir)
	sa := clusterSite(t, js.URL, "E2EO", true)
	a := startServer(t, sa)
	ca := clusterClient(t, a, sa)
	ctx := t.Context()

	sb := clusterSite(t, js.URL, "E2EO", true)
	b := startServer(t, sb)
	cb := clusterClient(t, b, sb)

	before, err := ca.SubmitJob(ctx, "before", jobReq("conformance:text"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := cb.CreateSession(ctx, &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
	if err != nil {
		t.Fatal(err)
	}

	waitJob(t, cb, before.ID, jobState("completed"))

	js.Shutdown()
	_, err = ca.SubmitJob(ctx, "during", jobReq("conformance:text"))
	var ce *client.Error
	// 503 with outcome uncertain: the client retries with the same key,
	// which finds the job if the write did land.
	if !errors.As(err, &ce) || ce.Code != protocol.CodeJobStoreError || ce.Status != 503 || ce.Outcome != protocol.OutcomeUncertain || !ce.Retryable {
		t.Fatalf("submit during the outage: %v", err)
	}
	if _, err := ca.ReadSession(ctx, snap.Session.ID); err == nil {
		t.Fatal("a session read succeeded with the store down")
	}
	if err := js.Restart(); err != nil {
		t.Fatal(err)
	}
	var during *client.JobInfo
	for i := 0; ; i++ {
		if during, err = ca.SubmitJob(ctx, "during", jobReq("conformance:text")); err == nil || i > 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("submit after the restart: %v", err)
	}
	waitJob(t, ca, during.ID, jobState("completed"))
	if got, err := ca.ReadJob(ctx, before.ID); err != nil || got.State != "completed" {
		t.Fatalf("the job acknowledged before the outage: %+v %v", got, err)
	}
	if got, err := ca.ReadSession(ctx, snap.Session.ID); err != nil || got.Session.Revision != 0 {
		t.Fatalf("session after the restart, read on the other host: %+v %v", got, err)
	}
}

func jobState(state string) func(*client.JobInfo) bool {
	return func(j *client.JobInfo) bool { return j.State == state }
}

// siteBackend, when set, rewrites every new site's host.toml: the backend
// matrix runs the durable-state crash tests on JetStream with it.
var siteBackend func(doc string) string

// TestJetStreamBackendMatrix runs the durable-state crash tests of the
// Badger store unchanged on a JetStream store (one in-process server per
// test, one host at a time): kill -9 at the same points, the same
// promises. A host restarted after kill -9 is the same presence (its id is
// in its local directory), so it recovers its own work at once, as on
// Badger.
func TestJetStreamBackendMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash tests again, on JetStream")
	}
	for name, test := range map[string]func(*testing.T){
		"SessionsSurviveKill":     TestSessionsSurviveKill,
		"IdempotencyAcrossKill9":  TestIdempotencyAcrossKill9,
		"JobsSurviveKill9":        TestJobsSurviveKill9,
		"JobsThousandAcrossKills": TestJobsThousandAcrossKills,
	} {
		t.Run(name, func(t *testing.T) {
			js := natstest.Start(t, "")
			siteBackend = func(doc string) string {
				return strings.Replace(doc, "version = 1\n", fmt.Sprintf("version = 1\n\n[store]\nbackend = \"jetstream\"\n\n[store.jetstream]\nurl = %q\nbucket_prefix = \"M\"\n", js.URL), 1)
			}
			defer func() { siteBackend = nil }()
			test(t)
		})
	}
}

// TestClusterCredentials: a host on a JetStream server that requires
// authentication starts with the credentials file of host.toml and
// serves sessions from it; a missing credentials file stops serve with
// the key and the file named.
func TestClusterCredentials(t *testing.T) {
	js, creds := natstest.StartWithCredentials(t)
	s := clusterSite(t, js.URL, "E2EC", false)
	appendCredentials := func(path string) {
		t.Helper()
		doc, err := os.ReadFile(s.config)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(doc), "bucket_prefix = \"E2EC\"\n", fmt.Sprintf("bucket_prefix = \"E2EC\"\ncredentials = %q\n", path), 1)
		if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	original, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	appendCredentials("missing.creds")
	if code, _, stderr := adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0"); code == 0 ||
		!strings.Contains(stderr, "store.jetstream.credentials") || !strings.Contains(stderr, "missing.creds") {
		t.Fatalf("missing credentials file: exit %d:\n%s", code, stderr)
	}
	if err := os.WriteFile(s.config, original, 0o644); err != nil {
		t.Fatal(err)
	}
	appendCredentials(creds)
	srv := startServer(t, s)
	c := clusterClient(t, srv, s)
	snap, err := c.CreateSession(t.Context(), &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
	if err != nil {
		t.Fatalf("session on the authenticated store: %v", err)
	}
	if got, err := c.ReadSession(t.Context(), snap.Session.ID); err != nil || got.Session.ID != snap.Session.ID {
		t.Fatalf("read back: %+v %v", got, err)
	}
}

// TestClusterHostID: a host whose usage.host_id differs from the one the
// other hosts with jobs on the store use is refused at start, with the key
// and its line: its jobs and theirs would fail JOB_ACCOUNT_CHANGED on each
// other.
func TestClusterHostID(t *testing.T) {
	js := natstest.Start(t, "")
	sa := clusterSite(t, js.URL, "E2EH", true)
	startServer(t, sa)
	sb := clusterSite(t, js.URL, "E2EH", true)
	doc, err := os.ReadFile(sb.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sb.config, []byte(strings.Replace(string(doc), `host_id = "e2e"`, `host_id = "elsewhere"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := adhost(t, "serve", "--config", sb.config, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "usage.host_id") || !strings.Contains(stderr, `"e2e"`) || !regexp.MustCompile(`host\.toml:\d+: usage\.host_id`).MatchString(stderr) {
		t.Fatalf("another host id: exit %d:\n%s", code, stderr)
	}
}

// TestClusterCancelAcross: a job running on host A (the only one up when
// it was taken) is cancelled from host B: B persists cancelRequested at
// once, and A stops the run, which ends run.cancelled — read on B.
func TestClusterCancelAcross(t *testing.T) {
	js := natstest.Start(t, "")
	sa, sb := clusterSite(t, js.URL, "E2EX", true), clusterSite(t, js.URL, "E2EX", true)
	a := startServer(t, sa)
	ca := clusterClient(t, a, sa)
	ctx := t.Context()
	job, err := ca.SubmitJob(ctx, "long", jobReq("conformance:cancel"))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, ca, job.ID, func(i *client.JobInfo) bool {
		return i.State == client.JobRunning && strings.Contains(jobTypes(jobLog(t, ca, job.ID)), "run.progress")
	})
	b := startServer(t, sb)
	cb := clusterClient(t, b, sb)
	got, err := cb.CancelJob(ctx, job.ID)
	if err != nil || !got.CancelRequested || got.State != client.JobRunning {
		t.Fatalf("cancel on B: %+v %v", got, err)
	}
	done := waitJob(t, cb, job.ID, (*client.JobInfo).Terminal)
	evs := jobLog(t, cb, job.ID)
	if done.State != client.JobCancelled || !done.CancelRequested || evs[len(evs)-1].Type != client.EventRunCancelled {
		t.Fatalf("after the cancel: %+v, events %s", done, jobTypes(evs))
	}
}
