package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

// Fair scheduling over real HTTP (wire-extensions §11.1): the admission
// queue of the real binary, observed through the event streams of
// conformance:cancel runs (each reports run.progress once admitted and then
// waits until its client goes away).

// queuedRun is one SSE run whose events the test watches.
type queuedRun struct {
	subject string
	cancel  context.CancelFunc
	started chan struct{} // closed at run.started
	running chan struct{} // closed at the first run.progress: admitted
	mu      sync.Mutex
	types   []string // every event type, in order
	done    chan error
}

func streamQueued(t *testing.T, c *client.Client, subject string, onAdmit func(*queuedRun)) *queuedRun {
	t.Helper()
	return streamQueuedWith(t, c, subject, nil, onAdmit)
}

// streamQueuedWith is streamQueued with mod applied to the request (nil:
// none).
func streamQueuedWith(t *testing.T, c *client.Client, subject string, mod func(*protocol.RunRequest), onAdmit func(*queuedRun)) *queuedRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	q := &queuedRun{subject: subject, cancel: cancel, started: make(chan struct{}), running: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(cancel)
	go func() {
		admitted := false
		req := runRequest("conformance:cancel")
		if mod != nil {
			mod(req)
		}
		_, err := c.Stream(ctx, req, func(ev client.Event) error {
			q.mu.Lock()
			q.types = append(q.types, ev.Type)
			q.mu.Unlock()
			switch {
			case ev.Type == client.EventRunStarted:
				close(q.started)
			case ev.Type == client.EventRunProgress && !admitted:
				admitted = true
				close(q.running)
				if onAdmit != nil {
					onAdmit(q)
				}
			}
			return nil
		})
		q.done <- err
	}()
	select {
	case <-q.started:
	case err := <-q.done:
		t.Fatalf("stream of %s ended before run.started: %v", subject, err)
	}
	return q
}

func (q *queuedRun) isRunning() bool {
	select {
	case <-q.running:
		return true
	default:
		return false
	}
}

func (q *queuedRun) eventTypes() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.types...)
}

func (q *queuedRun) waitRunning(t *testing.T) {
	t.Helper()
	select {
	case <-q.running:
	case err := <-q.done:
		t.Fatalf("run of %s ended before it was admitted: %v", q.subject, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("run of %s not admitted", q.subject)
	}
}

func (q *queuedRun) stop() {
	q.cancel()
	<-q.done
}

// TestSchedulingQueueFairness: with 2 slots and 1 per subject, subject A
// queues 10 runs behind its running one, then B submits one: B's run is
// admitted at once, before A's third. A queued stream shows run.started
// and nothing else until it is admitted.
func TestSchedulingQueueFairness(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs = 2\nmax_concurrent_runs_per_subject = 1\nqueue_total = 64\nqueue_per_subject = 16\n")
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	alice, other := newRunClient(t, srv, s.token), newRunClient(t, srv, bob)

	first := streamQueued(t, alice, "A", nil)
	first.waitRunning(t)
	var queued []*queuedRun
	for range 10 {
		queued = append(queued, streamQueued(t, alice, "A", nil))
	}
	b := streamQueued(t, other, "B", nil)
	b.waitRunning(t)
	for i, q := range queued {
		if q.isRunning() {
			t.Fatalf("A's queued run %d admitted beside A's running one", i+2)
		}
		if got := q.eventTypes(); len(got) != 1 || got[0] != client.EventRunStarted {
			t.Fatalf("A's queued run %d sent %v, want only run.started", i+2, got)
		}
	}
	// A's running run ends: its second is admitted, the third still waits.
	first.stop()
	queued[0].waitRunning(t)
	if queued[1].isRunning() {
		t.Fatal("A's third run admitted while A's second runs")
	}
	// B's run ends: A's third still waits (A holds its one slot).
	b.stop()
	if _, err := other.Run(t.Context(), runRequest("conformance:text")); err != nil {
		t.Fatalf("B's next run beside A's queue: %v", err)
	}
	if queued[1].isRunning() {
		t.Fatal("A's third run admitted over A's per-subject cap")
	}
	if got := queued[0].eventTypes(); len(got) < 3 || got[0] != client.EventRunStarted || got[1] != client.EventStepStarted {
		t.Fatalf("admitted run's events %v: want run.started, then step.started", got)
	}
}

// TestSchedulingQueueBounds: QUEUE_FULL exactly at queue_per_subject and
// at queue_total (429, retryable, before any event, in both modes); a
// queued run whose client disconnects frees its place at once.
func TestSchedulingQueueBounds(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs = 1\nmax_concurrent_runs_per_subject = 1\nqueue_total = 3\nqueue_per_subject = 2\n")
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, nil)
	carol := addSiteToken(t, s, "carol", "carol", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	alice, b, c := newRunClient(t, srv, s.token), newRunClient(t, srv, bob), newRunClient(t, srv, carol)

	streamQueued(t, alice, "A", nil).waitRunning(t)
	a1 := streamQueued(t, alice, "A", nil)
	streamQueued(t, alice, "A", nil)
	refused := func(c *client.Client, who string) {
		t.Helper()
		_, err := c.Run(t.Context(), runRequest("conformance:text"))
		checkClientError(t, err, protocol.CodeQueueFull, http.StatusTooManyRequests, true)
		events := 0
		_, err = c.Stream(t.Context(), runRequest("conformance:text"), func(client.Event) error { events++; return nil })
		checkClientError(t, err, protocol.CodeQueueFull, http.StatusTooManyRequests, true)
		if events != 0 {
			t.Fatalf("%s: a refused stream delivered %d events", who, events)
		}
	}
	refused(alice, "A over queue_per_subject")
	streamQueued(t, b, "B", nil)
	refused(c, "C over queue_total")

	// A's first queued client goes away: its place is free again.
	a1.stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Stream(t.Context(), runRequest("conformance:cancel"), func(ev client.Event) error {
			return errStop // queued: run.started arrived
		})
		if err == errStop {
			break
		}
		if !isCode(err, protocol.CodeQueueFull) || time.Now().After(deadline) {
			t.Fatalf("after a queued client left: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var errStop = fmt.Errorf("stop")

// TestSchedulingRotation: 4 subjects queue 50 runs each while another
// subject (override: 2 runs) holds both slots; then the slots free one at
// a time. Over the 200 admissions no subject with runs still waiting is
// ever more than one admission behind another.
func TestSchedulingRotation(t *testing.T) {
	t.Parallel()
	const subjects, each = 4, 50
	s := newSite(t)
	appendSiteConfig(t, s, fmt.Sprintf("[limits]\nmax_concurrent_runs = 2\nmax_concurrent_runs_per_subject = 1\nqueue_total = %d\nqueue_per_subject = %d\n[limits.subjects]\nholder = 2\n",
		subjects*each, each))
	holder := addSiteToken(t, s, "holder", "holder", []string{fixtureProvider}, nil)
	var tokens []string
	for i := range subjects {
		tokens = append(tokens, addSiteToken(t, s, fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i), []string{fixtureProvider}, nil))
	}
	srv := startServer(t, s)
	hc := newRunClient(t, srv, holder)
	h1, h2 := streamQueued(t, hc, "holder", nil), streamQueued(t, hc, "holder", nil)
	h1.waitRunning(t)
	h2.waitRunning(t)

	admissions := make(chan *queuedRun, subjects*each)
	onAdmit := func(q *queuedRun) { admissions <- q }
	for si := range subjects {
		c := newRunClient(t, srv, tokens[si])
		for range each {
			streamQueued(t, c, fmt.Sprintf("s%d", si), onAdmit)
		}
	}
	h1.stop()
	h2.stop()
	count := map[string]int{}
	var running []*queuedRun
	for n := 0; n < subjects*each; n++ {
		var q *queuedRun
		select {
		case q = <-admissions:
		case <-time.After(30 * time.Second):
			t.Fatalf("after %d admissions nothing more admitted: %v", n, count)
		}
		count[q.subject]++
		hi, lo := 0, each
		for si := range subjects {
			c := count[fmt.Sprintf("s%d", si)]
			hi = max(hi, c)
			if c < each {
				lo = min(lo, c)
			}
		}
		if hi-lo > 1 {
			t.Fatalf("after %d admissions: %v (more than one apart)", n+1, count)
		}
		running = append(running, q)
		if len(running) == 2 || n == subjects*each-1 {
			// Both slots are taken: end the older run.
			running[0].stop()
			running = running[1:]
		}
	}
	for si := range subjects {
		if c := count[fmt.Sprintf("s%d", si)]; c != each {
			t.Fatalf("subject s%d admitted %d runs, want %d", si, c, each)
		}
	}
}

// TestBudgetsOverHTTP: the fixture's echo reports one input token per
// word and one output token per delta. At max_tokens the run completes;
// one token over it fails with RESOURCE_LIMIT (403 in JSON, run.failed on
// a stream). A subject whose own budget rejects unknown usage stops at the
// first response that reports no cost, before the tool the model asked
// for. (That a limit reached at a tool-calling step stops the run before
// its tool is runtime's TestBudgets: no fixture scenario reports usage
// with a tool call.)
func TestBudgetsOverHTTP(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, []string{"conformance_lookup"})
	appendSiteConfig(t, s, "[resources.default]\nmax_tokens = 6\n\n[resources.subjects.bob]\nmax_cost_usd = 1.0\nunknown_usage = \"reject\"\n")
	srv := startServer(t, s)
	alice, b := newRunClient(t, srv, s.token), newRunClient(t, srv, bob)

	if res, err := alice.Run(t.Context(), runRequest("at the edge")); err != nil || res.Usage.InputTokens == nil || *res.Usage.InputTokens+*res.Usage.OutputTokens != 6 {
		t.Fatalf("at the budget: %+v %v", res, err)
	}
	_, err := alice.Run(t.Context(), runRequest("one over the edge"))
	checkClientError(t, err, protocol.CodeResourceLimit, http.StatusForbidden, false)
	var types []string
	_, err = alice.Stream(t.Context(), runRequest("one over the edge"), func(ev client.Event) error { types = append(types, ev.Type); return nil })
	if client.CodeOf(err) != protocol.CodeResourceLimit {
		t.Fatalf("stream: %v, want RESOURCE_LIMIT", err)
	}
	if types[len(types)-1] != client.EventRunFailed || !contains(types, client.EventUsageReported) {
		t.Fatalf("events %v", types)
	}

	// bob's own table replaces the default: his tokens are not limited,
	// his cost is, and the fixture reports none.
	_, err = b.Run(t.Context(), runRequest("one over the edge"))
	checkClientError(t, err, protocol.CodeResourceUsageUnknown, http.StatusForbidden, false)
	types = nil
	_, err = b.Stream(t.Context(), withTools(runRequest("conformance:tools"), "conformance_lookup"), func(ev client.Event) error {
		types = append(types, ev.Type)
		return nil
	})
	if client.CodeOf(err) != protocol.CodeResourceUsageUnknown || contains(types, client.EventToolCalled) {
		t.Fatalf("stream: %v with events %v, want RESOURCE_USAGE_UNKNOWN before any tool", err, types)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSoak is `make soak` (ADHOST_SOAK=duration; skipped otherwise): 32
// concurrent clients of 4 subjects mix JSON and SSE runs, tool runs,
// cancellations and runs that wait in the admission queue against the real
// binary. Afterwards there is no unexpected error, nothing runs or waits,
// no extension instance is busy, and the host's goroutines and RSS are
// back near the baseline.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("ADHOST_SOAK"))
	if err != nil {
		t.Skip("ADHOST_SOAK=duration runs the soak (make soak)")
	}
	s := newSite(t)
	// The tool extension is capped below the slots: tool runs also wait
	// in the queue for its units (admitted with them as they free).
	setExtensionKeys(t, s, "conformance-tools", "max_instances = 2")
	appendSiteConfig(t, s, "[tokens.grants]\nmetrics = true\n\n[metrics]\nenabled = true\n\n"+
		"[limits]\nmax_concurrent_runs = 8\nmax_concurrent_runs_per_subject = 4\nqueue_total = 64\nqueue_per_subject = 16\n")
	// OpenTelemetry at level steps, to a receiver that counts the spans
	// by name: the mix makes every child span but context's.
	spans := newSpanCounter(t)
	appendSiteConfig(t, s, fmt.Sprintf("[diagnostics]\notlp_endpoint = %q\nlevel = \"steps\"\nexport_interval_ms = 1000\n", spans.URL))
	var tokens []string
	for i := range 4 {
		tokens = append(tokens, addSiteToken(t, s, fmt.Sprintf("soak%d", i), fmt.Sprintf("soak%d", i), []string{fixtureProvider}, []string{"conformance_lookup"}))
	}
	srv := startServer(t, s)
	scrape := func() map[string]float64 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, body := doRaw(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("metrics: %d", resp.StatusCode)
		}
		out := map[string]float64{}
		for line := range strings.SplitSeq(string(body), "\n") {
			for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "adhost_runs_active", "adhost_admission_queue_depth",
				"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_sys_bytes",
				"adhost_store_bytes", `adhost_telemetry_dropped_total{signal="spans"}`} {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					out[name], _ = strconv.ParseFloat(v, 64)
				}
			}
			for _, x := range []string{"fixture", "conformance-tools"} {
				if v, ok := strings.CutPrefix(line, `adhost_extension_instances{extension="`+x+`",state="busy"} `); ok {
					n, _ := strconv.ParseFloat(v, 64)
					out["busy"] += n
				}
			}
		}
		return out
	}
	warmClient := newRunClient(t, srv, tokens[0])
	for range 8 {
		if _, err := warmClient.Run(t.Context(), withTools(runRequest("conformance:tools"), "conformance_lookup")); err != nil {
			t.Fatal(err)
		}
	}
	base := scrape()
	baseMem := procMemory(srv.cmd.Process.Pid)

	var (
		mu         sync.Mutex
		counts     = map[string]int{}
		unexpected []string
	)
	note := func(k string) { mu.Lock(); counts[k]++; mu.Unlock() }
	bad := func(format string, a ...any) {
		mu.Lock()
		if len(unexpected) < 20 {
			unexpected = append(unexpected, fmt.Sprintf(format, a...))
		}
		counts["unexpected"]++
		mu.Unlock()
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 32 {
		c := newRunClient(t, srv, tokens[w%4])
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				var err error
				kind := []string{"json", "sse", "tools", "cancel", "json", "sse-tools"}[(w+i)%6]
				switch kind {
				case "json":
					_, err = c.Run(ctx, runRequest("conformance:text"))
				case "sse":
					_, err = c.Stream(ctx, runRequest("conformance:text"), func(client.Event) error { return nil })
				case "tools":
					_, err = c.Run(ctx, withTools(runRequest("conformance:tools"), "conformance_lookup"))
				case "sse-tools":
					_, err = c.Stream(ctx, withTools(runRequest("conformance:tools"), "conformance_lookup"), func(client.Event) error { return nil })
				case "cancel":
					sctx, scancel := context.WithCancel(ctx)
					_, err = c.Stream(sctx, runRequest("conformance:cancel"), func(ev client.Event) error {
						if ev.Type == client.EventRunProgress {
							scancel()
						}
						return nil
					})
					scancel()
					if errors.Is(err, context.Canceled) {
						err = nil
					}
				}
				cancel()
				switch {
				case err == nil:
					note(kind)
				case isCode(err, protocol.CodeQueueFull) || isCode(err, protocol.CodeBusy):
					note("refused")
				default:
					bad("%s: %v", kind, err)
				}
			}
		})
	}
	wg.Wait()

	// The engine keeps an idle run goroutine per run that was in flight
	// at once (at most the 32 clients' runs: running and queued ones), so
	// the bound is the baseline plus those and a margin for connections.
	const goroutineSlack = 32 + 16
	// RSS: the baseline plus 96 MiB for what the host allocated and
	// keeps (Badger's bounded caches and memtables, the idle run
	// goroutines), plus the growth of the store's files on disk. Badger
	// maps its table files, so the kernel's cache of every table the
	// soak read or wrote is resident in the host, as file-backed pages
	// the kernel reclaims whenever it needs the memory: they grow with
	// the data stored (10 minutes of usage records: 88 MiB of tables),
	// not with a leak. Where /proc shows it, the anonymous part — the
	// memory the host itself holds — must be back within 96 MiB of its
	// own baseline as well.
	const rssSlack = 96 << 20
	rssBound := func(m map[string]float64) float64 {
		return base["process_resident_memory_bytes"] + rssSlack + max(0, m["adhost_store_bytes"]-base["adhost_store_bytes"])
	}
	pid := srv.cmd.Process.Pid
	var after map[string]float64
	var afterMem procMem
	// Up to 150 s: an idle Go process collects garbage only when the
	// runtime forces a GC (every two minutes), and returns the freed
	// pages after it, so the heap of the soak's last seconds stays
	// resident until then — what counts is that it comes back.
	deadline := time.Now().Add(150 * time.Second)
	for {
		after, afterMem = scrape(), procMemory(pid)
		settled := after["adhost_runs_active"] == 0 && after["adhost_admission_queue_depth"] == 0 && after["busy"] == 0 &&
			after["go_goroutines"] <= base["go_goroutines"]+goroutineSlack &&
			after["process_resident_memory_bytes"] <= rssBound(after) && afterMem.anon <= baseMem.anon+rssSlack
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("soak %v: %v", d, counts)
	t.Logf("goroutines %v -> %v, RSS %.0f MiB -> %.0f MiB (bound %.0f MiB), store files %.0f MiB -> %.0f MiB, running %v, queued %v, busy instances %v",
		base["go_goroutines"], after["go_goroutines"], base["process_resident_memory_bytes"]/(1<<20),
		after["process_resident_memory_bytes"]/(1<<20), rssBound(after)/(1<<20),
		base["adhost_store_bytes"]/(1<<20), after["adhost_store_bytes"]/(1<<20),
		after["adhost_runs_active"], after["adhost_admission_queue_depth"], after["busy"])
	// Where the RSS is: the Go heap in use, the heap kept for reuse and
	// not yet returned (idle − released), and what the runtime holds in
	// all; then the anonymous and file-backed resident sizes and the
	// mappings holding the most (wazero's compiled code and linear
	// memories are anonymous mappings outside the Go heap, Badger's
	// tables file-backed ones).
	for i, m := range []map[string]float64{base, after} {
		t.Logf("heap in use %.0f MiB, idle unreturned %.0f MiB, runtime total %.0f MiB; %s",
			m["go_memstats_heap_inuse_bytes"]/(1<<20), (m["go_memstats_heap_idle_bytes"]-m["go_memstats_heap_released_bytes"])/(1<<20), m["go_memstats_sys_bytes"]/(1<<20),
			[]procMem{baseMem, afterMem}[i].desc)
	}
	exports, names := spans.counts()
	t.Logf("telemetry: %d trace exports, spans %v, %v dropped at the export queue's bounds",
		exports, names, after[`adhost_telemetry_dropped_total{signal="spans"}`])
	for _, n := range []string{"agenticdriver.host", "agenticdriver.run", "agenticdriver.queue", "agenticdriver.provider", "agenticdriver.tool"} {
		if names[n] == 0 {
			t.Errorf("no %s span exported (got %v)", n, names)
		}
	}
	if strings.Contains(srv.stderr.String(), "telemetry exporter disabled") {
		t.Error("the telemetry exporter was switched off during the soak")
	}
	if len(unexpected) > 0 {
		t.Errorf("%d unexpected errors, e.g. %v", counts["unexpected"], unexpected)
	}
	if after["adhost_runs_active"] != 0 || after["adhost_admission_queue_depth"] != 0 || after["busy"] != 0 {
		t.Errorf("left behind: %v", after)
	}
	if after["go_goroutines"] > base["go_goroutines"]+goroutineSlack {
		t.Errorf("goroutines %v, baseline %v", after["go_goroutines"], base["go_goroutines"])
	}
	if after["process_resident_memory_bytes"] > rssBound(after) {
		t.Errorf("RSS %.0f MiB, baseline %.0f MiB, bound %.0f MiB", after["process_resident_memory_bytes"]/(1<<20),
			base["process_resident_memory_bytes"]/(1<<20), rssBound(after)/(1<<20))
	}
	if afterMem.anon > baseMem.anon+rssSlack {
		t.Errorf("anonymous RSS %.0f MiB, baseline %.0f MiB", afterMem.anon/(1<<20), baseMem.anon/(1<<20))
	}
}

// procMem is where a process's resident memory is (procMemory).
type procMem struct {
	anon float64 // anonymous resident bytes (RssAnon); 0 when unknown
	desc string  // RssAnon, RssFile, RssShmem and the largest mappings
}

// procMemory reads where process pid's resident memory is from Linux's
// /proc/PID/status and smaps (nothing elsewhere): the anonymous,
// file-backed and shared resident sizes, and the mappings holding the
// most — files by extension (*.sst, *.mem), anonymous ones by
// permissions and size.
func procMemory(pid int) procMem {
	var m procMem
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	var out []string
	for line := range strings.SplitSeq(string(status), "\n") {
		for _, k := range []string{"RssAnon:", "RssFile:", "RssShmem:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f := strings.Fields(v) // "123 kB"
				kb, _ := strconv.ParseFloat(f[0], 64)
				out = append(out, fmt.Sprintf("%s %.0f MiB", strings.TrimSuffix(k, ":"), kb/1024))
				if k == "RssAnon:" {
					m.anon = kb * 1024
				}
			}
		}
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		m.desc = strings.Join(out, ", ")
		return m
	}
	byName := map[string]int{} // resident kB
	name := ""
	for line := range strings.SplitSeq(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			var lo, hi uint64
			fmt.Sscanf(f[0], "%x-%x", &lo, &hi)
			name = fmt.Sprintf("[anon %s %d MiB]", f[1], (hi-lo)>>20)
			if len(f) >= 6 {
				name = f[len(f)-1]
				if i := strings.LastIndexByte(name, '/'); i >= 0 {
					name = name[i+1:]
				}
				if j := strings.LastIndexByte(name, '.'); j > 0 {
					name = "*" + name[j:]
				}
			}
		case len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.Atoi(f[1])
			byName[name] += kb
		}
	}
	names := slices.Collect(maps.Keys(byName))
	sort.Slice(names, func(i, j int) bool { return byName[names[i]] > byName[names[j]] })
	for _, n := range names[:min(len(names), 6)] {
		out = append(out, fmt.Sprintf("%s %d MiB", n, byName[n]>>10))
	}
	m.desc = strings.Join(out, ", ")
	return m
}

// TestSchedulingReplayAdmission: an idempotent replay answers admission as
// its run would, for its provider's account (wire-core §15.2): while the
// account's cap is full and the queue has room it replays at once (its run
// would wait; a replay never does); once the queue is full too it is
// QUEUE_FULL, like a new run of the subject.
func TestSchedulingReplayAdmission(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[idempotency]\nenabled = true\n\n[limits]\nmax_concurrent_runs_per_account = 1\nqueue_total = 1\nqueue_per_subject = 1\n")
	srv := startServer(t, s)
	c := newRunClient(t, srv, s.token)
	key := "sched-replay"
	req := runRequest("conformance:text")
	req.IdempotencyKey = &key
	first, err := c.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	held := streamQueued(t, c, "dev", nil)
	held.waitRunning(t) // the fixture's account "local" is at its cap
	again, err := c.Run(t.Context(), req)
	if err != nil || again.Text != first.Text {
		t.Fatalf("replay while the account is full and the queue has room: %v", err)
	}
	waiting := streamQueued(t, c, "dev", nil) // fills the queue
	_, err = c.Run(t.Context(), req)
	checkClientError(t, err, protocol.CodeQueueFull, http.StatusTooManyRequests, true)
	fresh := runRequest("conformance:text")
	_, err = c.Run(t.Context(), fresh)
	checkClientError(t, err, protocol.CodeQueueFull, http.StatusTooManyRequests, true)
	held.stop()
	waiting.waitRunning(t)
	waiting.stop()
}

// TestSchedulingRetrievalSlots: retrieval calls take a run slot of their
// subject (wire-extensions §1.5) but never a queue place: with the
// subject's one slot held by a run, a search is BUSY even though a queue
// is configured; once the run ends it is answered.
func TestSchedulingRetrievalSlots(t *testing.T) {
	t.Parallel()
	s := retrievalSite(t, "hash-ngram-256", 256)
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs_per_subject = 1\nqueue_total = 4\nqueue_per_subject = 4\n")
	srv := startServer(t, s)
	c := newRunClient(t, srv, s.token)
	const search = `{"corpus":"docs","query":"battery","limit":1}`
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/search", search); st != http.StatusOK {
		t.Fatalf("search on an idle host: %d %s", st, b)
	}
	held := streamQueued(t, c, "dev", nil)
	held.waitRunning(t)
	st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/search", search)
	if st != http.StatusTooManyRequests || !strings.Contains(b, `"BUSY"`) {
		t.Fatalf("search with the subject's slot taken: %d %s, want 429 BUSY", st, b)
	}
	held.stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/search", search)
		if st == http.StatusOK {
			break
		}
		if st != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("search after the run ended: %d %s", st, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
