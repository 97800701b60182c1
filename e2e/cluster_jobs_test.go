package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
	"adhost/store/jetstream/natstest"
)

// effects is the side effect the cluster's jobs have: an HTTP server in
// the test process that http_fetch calls once per tool execution, counting
// the calls per job key. While closed, calls wait at the gate; a call
// whose connection goes away while waiting (its host was killed) is noted
// as cut.
type effects struct {
	srv *httptest.Server

	mu      sync.Mutex
	calls   map[string]int
	waiting map[string]bool
	cut     map[string]bool
	gate    chan struct{} // nil: open
}

func newEffects(t *testing.T) *effects {
	e := &effects{calls: map[string]int{}, waiting: map[string]bool{}, cut: map[string]bool{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/effect/")
		e.mu.Lock()
		e.calls[key]++
		gate := e.gate
		if gate != nil {
			e.waiting[key] = true
		}
		e.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				e.mu.Lock()
				e.cut[key] = true
				delete(e.waiting, key)
				e.mu.Unlock()
				return
			}
			e.mu.Lock()
			delete(e.waiting, key)
			e.mu.Unlock()
		}
		fmt.Fprint(w, "done "+key)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *effects) close() {
	e.mu.Lock()
	e.gate = make(chan struct{})
	e.mu.Unlock()
}

func (e *effects) open() {
	e.mu.Lock()
	if e.gate != nil {
		close(e.gate)
		e.gate = nil
	}
	e.mu.Unlock()
}

func (e *effects) count(f func(calls, waiting, cut map[string]int) int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := func(m map[string]bool) map[string]int {
		out := map[string]int{}
		for k := range m {
			out[k] = 1
		}
		return out
	}
	return f(e.calls, n(e.waiting), n(e.cut))
}

// clusterJobSite is a cluster site whose dev token may also use http_fetch,
// allowed to reach the effects server only, with short job leases so a
// dead host's jobs are interrupted by the survivor within the test.
func clusterJobSite(t *testing.T, url, prefix string, fx *effects, workers int) *site {
	t.Helper()
	s := clusterSite(t, url, prefix, true)
	p := copyPlugin(t, s.dir, "http-fetch", "1.0.0")
	s.plugins["http-fetch"] = p
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	ext := fmt.Sprintf("[[extensions]]\nid = \"http-fetch\"\nversion = \"1.0.0\"\nmodule = %q\nsha256 = %q\n\n"+
		"[[tools]]\nextension = \"http-fetch@1.0.0\"\nnames = [\"http_fetch\"]\nsettings = { allow_origins = [%q] }\n\n[[tokens]]\n",
		filepath.Base(p.path), p.digest, fx.srv.URL)
	text = strings.Replace(text, "\n[[tokens]]\n", "\n"+ext, 1)
	text = strings.Replace(text, `tools = ["conformance_lookup"]`, `tools = ["conformance_lookup", "http_fetch"]`, 1)
	text = strings.Replace(text, "workers = 8\npoll_interval_ms = 20\n", fmt.Sprintf("workers = %d\npoll_interval_ms = 20\nlease_ms = 1500\nmax_jobs = 5000\nmax_jobs_per_subject = 5000\n", workers), 1)
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// clusterJobCount is how many jobs TestClusterJobsKill submits: 200 in
// make test, ADHOST_CLUSTER_JOBS (make soak: 1,000) otherwise.
func clusterJobCount(t *testing.T) int {
	if v := os.Getenv("ADHOST_CLUSTER_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 {
			t.Fatalf("ADHOST_CLUSTER_JOBS=%q: want a count ≥ 16", v)
		}
		return n
	}
	return 200
}

// TestClusterJobsKill: two hosts on one JetStream; 8 clients submit jobs
// round-robin to both (a submission the down host cannot take goes to the
// other, same key). Each job makes one HTTP call through http_fetch, the
// side effect counted per key. Mid-way, with calls held at the gate on
// both hosts, host A is killed with kill -9: the survivor interrupts A's
// running jobs once their leases lapse, and takes the queued ones; A
// restarts. Then: every acknowledged key names one job on either host,
// no job ran twice (at most one call per key, one run.started per log),
// every completed job made its call, every other job is interrupted with
// outcome uncertain — those cut at the kill included.
func TestClusterJobsKill(t *testing.T) {
	if testing.Short() {
		t.Skip("jobs across a kill -9 in a two-host cluster")
	}
	total := clusterJobCount(t)
	const clients = 8
	js := natstest.Start(t, "")
	fx := newEffects(t)
	sa, sb := clusterJobSite(t, js.URL, "E2EJ", fx, 8), clusterJobSite(t, js.URL, "E2EJ", fx, 8)
	a, b := startServer(t, sa), startServer(t, sb)
	var hosts [2]atomic.Pointer[client.Client]
	hosts[0].Store(clusterClient(t, a, sa))
	hosts[1].Store(clusterClient(t, b, sb))
	ctx := t.Context()
	req := func(key string) *protocol.RunRequest {
		return jobReq(`tool:http_fetch:{"url":"`+fx.srv.URL+"/effect/"+key+`"}`, "http_fetch")
	}

	var acked atomic.Int64
	ids := make([]map[string]string, clients) // key → job id
	var wg sync.WaitGroup
	for ci := range clients {
		ids[ci] = map[string]string{}
		wg.Go(func() {
			for i := ci; i < total; i += clients {
				key := fmt.Sprintf("k%d", i)
				for try := 0; ; try++ {
					c := hosts[(i+try)%2].Load()
					info, err := c.SubmitJob(ctx, key, req(key))
					if err == nil {
						ids[ci][key] = info.ID
						acked.Add(1)
						break
					}
					if ctx.Err() != nil {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}

	// Mid-way: hold the calls until more wait than one host's http-fetch
	// instances can hold (4), so both hosts have jobs in a tool call; then
	// kill A.
	for acked.Load() < int64(total/2) {
		time.Sleep(time.Millisecond)
	}
	fx.close()
	deadline := time.Now().Add(30 * time.Second)
	for fx.count(func(_, w, _ map[string]int) int { return len(w) }) < 6 {
		if time.Now().After(deadline) {
			for ci := range clients {
				for key, id := range ids[ci] {
					t.Logf("%s: %s", key, jobTypes(jobLog(t, hosts[1].Load(), id)))
					break
				}
			}
			t.Logf("A:\n%s\nB:\n%s", tail(a.stderr.String(), 3000), tail(b.stderr.String(), 3000))
			t.Fatalf("the calls never reached the gate on both hosts: %d calls, %d waiting, %d acknowledged",
				fx.count(func(c, _, _ map[string]int) int { return len(c) }), fx.count(func(_, w, _ map[string]int) int { return len(w) }), acked.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	killHard(t, a)
	// The killed host's calls are cut (their connections close).
	for deadline := time.Now().Add(10 * time.Second); fx.count(func(_, _, c map[string]int) int { return len(c) }) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no call was cut by the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	fx.open()
	fx.mu.Lock()
	var cut []string
	for k := range fx.cut {
		cut = append(cut, k)
	}
	fx.mu.Unlock()

	// The survivor interrupts the dead host's running jobs once their
	// leases lapse (1.5 s), before A is back.
	cb := hosts[1].Load()
	for _, key := range cut {
		info, err := cb.SubmitJob(ctx, key, req(key)) // the key finds its job on the survivor
		if err != nil {
			t.Fatalf("key %s on the survivor: %v", key, err)
		}
		got := waitJob(t, cb, info.ID, (*client.JobInfo).Terminal)
		checkInterrupted(t, "job cut at the kill "+key, got, jobLog(t, cb, info.ID))
	}
	a = startServer(t, sa)
	hosts[0].Store(clusterClient(t, a, sa))
	wg.Wait()

	ca := hosts[0].Load()
	seen := map[string]bool{}
	completed, interrupted := 0, 0
	for ci := range clients {
		for key, id := range ids[ci] {
			if seen[id] {
				t.Fatalf("job %s acknowledged for two keys", id)
			}
			seen[id] = true
			c := []*client.Client{ca, cb}[len(seen)%2]
			info := waitJob(t, c, id, (*client.JobInfo).Terminal)
			again, err := []*client.Client{cb, ca}[len(seen)%2].SubmitJob(ctx, key, req(key))
			if err != nil || again.ID != id {
				t.Fatalf("key %s on the other host: %+v %v, want %s", key, again, err, id)
			}
			evs := jobLog(t, c, id)
			if strings.Count(jobTypes(evs), "run.started") != 1 {
				t.Fatalf("job %s: %s", id, jobTypes(evs))
			}
			calls := fx.count(func(c, _, _ map[string]int) int { return c[key] })
			switch info.State {
			case client.JobCompleted:
				completed++
				if calls != 1 || strings.Count(jobTypes(evs), "tool.called") != 1 {
					t.Errorf("completed job %s: %d calls, events %s", key, calls, jobTypes(evs))
				}
			case client.JobInterrupted:
				interrupted++
				checkInterrupted(t, "job "+key, info, evs)
				if calls > 1 {
					t.Errorf("interrupted job %s: %d calls", key, calls)
				}
			default:
				t.Fatalf("job %s ended %s", key, info.State)
			}
		}
	}
	if len(seen) != total {
		t.Fatalf("%d distinct jobs acknowledged, want %d", len(seen), total)
	}
	for key, n := range fx.calls {
		if n > 1 {
			t.Errorf("key %s: the tool ran %d times", key, n)
		}
	}
	for _, srv := range []*server{a, b} {
		if code := srv.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("SIGTERM exit %d:\n%s", code, srv.stderr)
		}
	}
	t.Logf("%d jobs: %d completed, %d interrupted (%d cut at the kill)", total, completed, interrupted, len(cut))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
