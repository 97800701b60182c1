package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"adhost/client"
	"adhost/internal/testenv"
	"adhost/runtime/protocol"
)

// Capacity over real HTTP (DESIGN.md §3: the pool is never a hidden
// concurrency limit). The fixture is re-embedded with poolSize = 1, so
// every run beyond the first needs an instance the pool has to create.

// setFixturePoolSize rewrites the site's fixture module with poolSize n
// and re-pins it.
func setFixturePoolSize(t *testing.T, s *site, n int) {
	t.Helper()
	fx := s.plugins["fixture"]
	mod, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(testenv.RepoRoot(t) + "/manifests/fixture.toml")
	if err != nil {
		t.Fatal(err)
	}
	repl := bytes.Replace(orig, []byte("\npoolSize = 4\n"), fmt.Appendf(nil, "\npoolSize = %d\n", n), 1)
	if bytes.Equal(repl, orig) {
		t.Fatal("manifests/fixture.toml has no `poolSize = 4` line to change")
	}
	if err := os.WriteFile(fx.path, reembedManifest(t, mod, orig, repl), 0o644); err != nil {
		t.Fatal(err)
	}
	editSiteConfig(t, s, fx.digest, digestOf(t, fx.path))
}

// setFixtureExtension adds keys to the fixture's [[extensions]] entry.
func setFixtureExtension(t *testing.T, s *site, keys string) {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "id = \"fixture\"\nversion = \"1.0.0\"\n"
	if strings.Count(string(b), anchor) != 1 {
		t.Fatal("host.toml: no single fixture [[extensions]] entry")
	}
	if err := os.WriteFile(s.config, []byte(strings.Replace(string(b), anchor, anchor+keys+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

type hostStatus struct {
	Runs struct {
		Running, MaxConcurrent, MaxPerSubject int
	}
	Extensions []struct {
		ID                           string
		Live, Idle, InUse, Warm, Cap int
		Reserved                     int
		IdleMs                       int64
	}
}

func fetchStatus(t *testing.T, srv *server, token string) hostStatus {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/adhost/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, body := doRaw(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status endpoint: %d %s", resp.StatusCode, body)
	}
	var st hostStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status body %s: %v", body, err)
	}
	return st
}

func (st hostStatus) fixture(t *testing.T) (live, idle, inUse, warm, capacity int) {
	t.Helper()
	for _, x := range st.Extensions {
		if x.ID == "fixture" {
			return x.Live, x.Idle, x.InUse, x.Warm, x.Cap
		}
	}
	t.Fatalf("no fixture in the status: %+v", st)
	return
}

// rssKiB reads the server process's resident set.
func rssKiB(t *testing.T, srv *server) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestCapacityPoolGrowsAndShrinks: subject A holds its per-subject maximum
// of pending runs on an extension whose poolSize is 1; subject B's run
// still completes at once. When A's runs end, the idle instances fall back
// to poolSize within the idle period and the host's RSS comes back.
func TestCapacityPoolGrowsAndShrinks(t *testing.T) {
	t.Parallel()
	const perSubject, idleMs = 30, 300
	s := newSite(t)
	setFixturePoolSize(t, s, 1)
	setFixtureExtension(t, s, fmt.Sprintf("instance_idle_ms = %d", idleMs))
	appendSiteConfig(t, s, fmt.Sprintf("[limits]\nmax_concurrent_runs_per_subject = %d\n", perSubject))
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	alice, other := newRunClient(t, srv, s.token), newRunClient(t, srv, bob)

	// Warm up once so the baseline includes what any first run allocates.
	if _, err := other.Run(t.Context(), runRequest("conformance:text")); err != nil {
		t.Fatal(err)
	}
	before := rssKiB(t, srv)

	var held []*heldRun
	for range perSubject {
		held = append(held, holdRun(t, alice))
	}
	if _, err := alice.Run(t.Context(), runRequest("conformance:text")); !isCode(err, protocol.CodeBusy) {
		t.Fatalf("run %d of subject A: %v, want BUSY", perSubject+1, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := other.Run(ctx, runRequest("conformance:text"))
	if err != nil {
		t.Fatalf("subject B beside %d held runs of A: %v", perSubject, err)
	}
	if res.Text == "" {
		t.Fatal("subject B's run has no text")
	}
	live, _, inUse, warm, _ := fetchStatus(t, srv, s.token).fixture(t)
	if inUse != perSubject || live < perSubject || warm != 1 {
		t.Fatalf("while held: live %d in use %d warm %d", live, inUse, warm)
	}
	grown := rssKiB(t, srv)

	for _, h := range held {
		h.stop(t)
	}
	deadline := time.Now().Add(20 * idleMs * time.Millisecond)
	for {
		live, idle, inUse, _, _ := fetchStatus(t, srv, s.token).fixture(t)
		if live == 1 && idle == 1 && inUse == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle instances not back to poolSize 1: live %d idle %d in use %d", live, idle, inUse)
		}
		time.Sleep(idleMs * time.Millisecond / 4)
	}
	// The Go runtime returns freed heap to the OS in the background: give
	// it up to 30 s to come within 64 MiB of the start.
	var after int
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		after = rssKiB(t, srv)
		if after-before <= 64<<10 || time.Now().After(end) {
			break
		}
	}
	t.Logf("RSS: before %d MiB, with %d runs held %d MiB, after reaping %d MiB", before>>10, perSubject, grown>>10, after>>10)
	if after-before > 64<<10 {
		t.Errorf("RSS after reaping %d MiB, start %d MiB: more than 64 MiB kept", after>>10, before>>10)
	}
}

// TestCapacityOperatorCap: with max_instances = N, N runs hold the
// extension's instances and run N+1 gets BUSY before any event, in both
// modes; when one ends, the next run is admitted.
func TestCapacityOperatorCap(t *testing.T) {
	t.Parallel()
	const capN = 3
	s := newSite(t)
	setFixturePoolSize(t, s, 1)
	setFixtureExtension(t, s, fmt.Sprintf("max_instances = %d", capN))
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	alice, other := newRunClient(t, srv, s.token), newRunClient(t, srv, bob)

	var held []*heldRun
	for range capN - 1 {
		held = append(held, holdRun(t, alice))
	}
	held = append(held, holdRun(t, other))
	if _, _, _, _, c := fetchStatus(t, srv, s.token).fixture(t); c != capN {
		t.Fatalf("status cap %d, want %d", c, capN)
	}
	code, out, errOut := adhost(t, "status", "--config", s.config, "--url", srv.URL,
		"--token-file", filepath.Join(s.dir, "data", "dev.token"))
	if code != 0 || !strings.Contains(out, "runs     running=3 ") ||
		!regexp.MustCompile(`extension fixture@1\.0\.0 \(provider\) live=3 idle=0 in-use=3 warm=1 idle-ms=30000 cap=3 \(reserved 3\)`).MatchString(out) {
		t.Fatalf("adhost status: exit %d\n%s%s", code, out, errOut)
	}
	_, err := other.Run(t.Context(), runRequest("conformance:text"))
	checkClientError(t, err, protocol.CodeBusy, http.StatusTooManyRequests, true)
	events := 0
	_, err = other.Stream(t.Context(), runRequest("conformance:text"), func(client.Event) error { events++; return nil })
	checkClientError(t, err, protocol.CodeBusy, http.StatusTooManyRequests, true)
	if events != 0 {
		t.Fatalf("a refused stream delivered %d events", events)
	}
	held[0].stop(t)
	// The slot is free once the held run has ended on the host.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := other.Run(t.Context(), runRequest("conformance:text"))
		if err == nil {
			break
		}
		if !isCode(err, protocol.CodeBusy) || time.Now().After(deadline) {
			t.Fatalf("run after one held run ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, h := range held[1:] {
		h.stop(t)
	}
	if live, _, _, _, _ := fetchStatus(t, srv, s.token).fixture(t); live > capN {
		t.Fatalf("live instances %d above the cap %d", live, capN)
	}
}

// TestCapacityPerSubjectLimits: a per-subject limit of 32 admits 32
// concurrent runs of one subject; one over the total refuses to start,
// naming the key.
func TestCapacityPerSubjectLimits(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs = 32\nmax_concurrent_runs_per_subject = 32\n")
	srv := startServer(t, s)
	c := newRunClient(t, srv, s.token)
	var held []*heldRun
	for range 32 {
		held = append(held, holdRun(t, c))
	}
	_, err := c.Run(t.Context(), runRequest("conformance:text"))
	checkClientError(t, err, protocol.CodeBusy, http.StatusTooManyRequests, true)
	for _, h := range held {
		h.stop(t)
	}

	bad := newSite(t)
	appendSiteConfig(t, bad, "[limits]\nmax_concurrent_runs = 8\nmax_concurrent_runs_per_subject = 9\n")
	code, _, stderr := adhost(t, "serve", "--config", bad.config, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "limits.max_concurrent_runs_per_subject") || !strings.Contains(stderr, "1..8") {
		t.Fatalf("serve with per subject 9 > total 8: exit %d\n%s", code, stderr)
	}
}

func isCode(err error, code protocol.Code) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == code
}

// setExtensionKeys adds keys to the [[extensions]] entry of id@1.0.0.
func setExtensionKeys(t *testing.T, s *site, id, keys string) {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	anchor := fmt.Sprintf("id = %q\nversion = \"1.0.0\"\n", id)
	if strings.Count(string(b), anchor) != 1 {
		t.Fatalf("host.toml: no single %s [[extensions]] entry", id)
	}
	if err := os.WriteFile(s.config, []byte(strings.Replace(string(b), anchor, anchor+keys+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCapacityQueuedOnCappedExtension: with an admission queue, runs that
// need an extension at its operator cap (the tool extension, max_instances
// = 1) wait in the queue — run.started and nothing else, never BUSY once
// accepted — and are admitted in the fair order as its unit frees. Runs
// that need only the uncapped provider extension are not held back by
// them: they start at once, and on a full host a subject's later run
// without the tool is admitted before its own earlier run that waits for
// the capped extension.
func TestCapacityQueuedOnCappedExtension(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	setExtensionKeys(t, s, "conformance-tools", "max_instances = 1")
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs = 4\nmax_concurrent_runs_per_subject = 4\nqueue_total = 16\nqueue_per_subject = 8\n")
	ta := addSiteToken(t, s, "amy", "A", []string{fixtureProvider}, []string{lookupTool})
	tb := addSiteToken(t, s, "bob", "B", []string{fixtureProvider}, []string{lookupTool})
	srv := startServer(t, s)
	a, b := newRunClient(t, srv, ta), newRunClient(t, srv, tb)
	withTool := func(r *protocol.RunRequest) { r.Tools = []string{lookupTool} }

	a1 := streamQueuedWith(t, a, "A", withTool, nil)
	a1.waitRunning(t) // holds the tool extension's only instance
	a2 := streamQueuedWith(t, a, "A", withTool, nil)
	b1 := streamQueuedWith(t, b, "B", withTool, nil)
	// Runs without the tool complete at once beside them, JSON and SSE.
	for _, c := range []*client.Client{a, b} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		if _, err := c.Run(ctx, runRequest("conformance:text")); err != nil {
			t.Fatalf("JSON run on the uncapped extension: %v", err)
		}
		if _, err := c.Stream(ctx, runRequest("conformance:text"), func(client.Event) error { return nil }); err != nil {
			t.Fatalf("SSE run on the uncapped extension: %v", err)
		}
		cancel()
	}
	if a2.isRunning() || b1.isRunning() {
		t.Fatal("a run needing the full extension was admitted")
	}
	// Fill the host (4 slots: a1 and three of B's without the tool); A's
	// next run without the tool queues behind its own a2.
	var bh []*queuedRun
	for range 3 {
		h := streamQueued(t, b, "B", nil)
		h.waitRunning(t)
		bh = append(bh, h)
	}
	a3 := streamQueued(t, a, "A", nil)
	bh[0].stop()
	a3.waitRunning(t) // a2 waits for the capped extension: a3 goes first
	if a2.isRunning() || b1.isRunning() {
		t.Fatal("a run needing the full extension was admitted when a slot freed")
	}
	for _, q := range []*queuedRun{a2, b1} {
		if got := q.eventTypes(); len(got) != 1 || got[0] != client.EventRunStarted {
			t.Fatalf("waiting run of %s sent %v, want only run.started", q.subject, got)
		}
	}
	// The tool extension's unit frees: B's turn (A was served last), then
	// A's.
	a1.stop()
	b1.waitRunning(t)
	if a2.isRunning() {
		t.Fatal("a2 admitted beside b1 on an extension capped at 1")
	}
	b1.stop()
	a2.waitRunning(t)
	for _, q := range []*queuedRun{a2, b1} {
		types := q.eventTypes()
		if types[0] != client.EventRunStarted || contains(types, client.EventRunFailed) {
			t.Fatalf("queued run of %s failed: %v", q.subject, types)
		}
	}
	for _, q := range append([]*queuedRun{a2, a3}, bh[1:]...) {
		q.stop()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := fetchStatus(t, srv, s.token)
		reserved := -1
		for _, x := range st.Extensions {
			if x.ID == "conformance-tools" {
				reserved = x.Reserved
			}
		}
		if st.Runs.Running == 0 && reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every run ended: running %d, tool units reserved %d", st.Runs.Running, reserved)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
