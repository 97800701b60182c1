package host

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
	"adhost/store"
)

// The durable-jobs endpoints over real HTTP (wire-extensions §2): a Server
// with a jobs.Service on a durable.Memory store, the fake provider, and
// tokens of two subjects with and without the job grants.

const (
	jobAlice   = "job-alice-token-0123456789abcdef0123456789"
	jobAlice2  = "job-alice2-token-0123456789abcdef012345678"
	jobBob     = "job-bob-token-0123456789abcdef0123456789ab"
	jobNoGrant = "job-nogrant-token-0123456789abcdef01234567"
)

type jobEnv struct {
	srv    *Server
	ts     *httptest.Server
	store  *durable.Memory
	engine *runtime.Engine
	prov   *fakeProvider
	tokens []Token
}

func newJobEnv(t *testing.T, maxPerSubject int) *jobEnv {
	t.Helper()
	fp := &fakeProvider{started: make(chan struct{}, 16)}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: testProvider, Vendor: "test", AuthMode: "none", AccountID: "acct-1",
			Models: []string{testModel}, Capabilities: map[string]bool{"textStreaming": true},
			UsageSource: "synthetic", Provider: fp,
		}},
		MaxPerSubject: maxPerSubject,
	})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"jobs.submit", "jobs.read", "jobs.cancel"}
	tokens := []Token{
		{ID: "a", Subject: "alice", Secret: jobAlice, Providers: []string{testProvider}, Ops: all},
		{ID: "a2", Subject: "alice", Secret: jobAlice2, Providers: []string{testProvider}, Ops: []string{"jobs.read"}},
		{ID: "b", Subject: "bob", Secret: jobBob, Providers: []string{testProvider}, Ops: all},
		{ID: "n", Subject: "alice", Secret: jobNoGrant, Providers: []string{testProvider}},
	}
	e := &jobEnv{store: durable.NewMemory(), engine: eng, prov: fp, tokens: tokens}
	svc := e.openJobs(t)
	e.srv = NewServer(ServerOptions{Engine: eng, Tokens: tokens, Jobs: svc, Features: []string{"durable-jobs"}})
	e.srv.SetReady()
	svc.Start()
	e.ts = httptest.NewUnstartedServer(e.srv.Handler())
	e.ts.Config = e.srv.newHTTPServer()
	e.ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		e.ts.Close()
	})
	return e
}

func (e *jobEnv) openJobs(t *testing.T) *jobs.Service {
	t.Helper()
	byDigest := map[string]*runtime.Principal{}
	for _, te := range newTokenEntries(e.tokens) {
		byDigest[te.principal.CredentialDigest] = te.principal
	}
	svc, err := jobs.Open(context.Background(), jobs.Options{
		Store: e.store, Engine: e.engine, HostID: "host-test",
		Resolve:   func(d string) *runtime.Principal { return byDigest[d] },
		Account:   func(p string) string { return map[string]string{testProvider: "acct-1"}[p] },
		Retention: time.Hour, PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *jobEnv) post(t *testing.T, token, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *jobEnv) client(t *testing.T, token string) *client.Client {
	c, err := client.New(e.ts.URL, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jobWait(t *testing.T, c *client.Client, id string, ok func(*client.JobInfo) bool) *client.JobInfo {
	t.Helper()
	var info *client.JobInfo
	waitFor(t, "job "+id, func() bool {
		var err error
		info, err = c.ReadJob(context.Background(), id)
		if err != nil {
			t.Fatalf("ReadJob: %v", err)
		}
		return ok(info)
	})
	return info
}

func TestJobsOverHTTP(t *testing.T) {
	e := newJobEnv(t, 0)
	alice := e.client(t, jobAlice)
	ctx := context.Background()
	p, err := alice.Protocol(ctx)
	if err != nil || !p.HasFeature("durable-jobs") {
		t.Fatalf("protocol: %+v %v", p, err)
	}
	req := &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "hello"}
	info, err := alice.SubmitJob(ctx, "job-1", req)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != client.JobQueued && info.State != client.JobRunning && !info.Terminal() {
		t.Fatalf("submitted: %+v", info)
	}
	done := jobWait(t, alice, info.ID, (*client.JobInfo).Terminal)
	if done.State != client.JobCompleted {
		t.Fatalf("done: %+v", done)
	}
	// The whole log, in pages of two, with the same sequences every time.
	var types []string
	after := int64(0)
	for {
		page, err := alice.JobEvents(ctx, info.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			types = append(types, ev.Type)
			if bytes.Contains(ev.Raw, []byte("ticket")) {
				t.Fatalf("a job page shows a ticket: %s", ev.Raw)
			}
		}
		after = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	if got := strings.Join(types, ","); got != "run.started,step.started,text.delta,run.completed" {
		t.Fatalf("events: %s", got)
	}
	// Same key, same request: the same job; another request: 409.
	again, err := alice.SubmitJob(ctx, "job-1", req)
	if err != nil || again.ID != info.ID {
		t.Fatalf("resubmit: %+v %v", again, err)
	}
	changed := *req
	changed.Input = "other"
	if _, err := alice.SubmitJob(ctx, "job-1", &changed); client.CodeOf(err) != protocol.CodeIdempotencyConflict {
		t.Fatalf("conflict: %v", err)
	}
	// Another token of the subject with read reads it; bob does not see it.
	if _, err := e.client(t, jobAlice2).ReadJob(ctx, info.ID); err != nil {
		t.Fatalf("same subject: %v", err)
	}
	for _, path := range []string{"/v1/jobs/read", "/v1/jobs/cancel"} {
		status, body := e.post(t, jobBob, path, `{"id":"`+info.ID+`"}`)
		wantError(t, "bob "+path, status, body, http.StatusNotFound, protocol.CodeJobNotFound)
	}
	status, body := e.post(t, jobBob, "/v1/jobs/events", `{"id":"`+info.ID+`","after":0}`)
	wantError(t, "bob events", status, body, http.StatusNotFound, protocol.CodeJobNotFound)
	// Missing grants.
	for _, tc := range []struct{ token, path, body string }{
		{jobNoGrant, "/v1/jobs/submit", `{"key":"k","request":{"provider":"fake","model":"fake-model","input":"x"}}`},
		{jobAlice2, "/v1/jobs/submit", `{"key":"k","request":{"provider":"fake","model":"fake-model","input":"x"}}`},
		{jobNoGrant, "/v1/jobs/read", `{"id":"` + info.ID + `"}`},
		{jobAlice2, "/v1/jobs/cancel", `{"id":"` + info.ID + `"}`},
		{jobNoGrant, "/v1/jobs/events", `{"id":"` + info.ID + `","after":0}`},
	} {
		status, body := e.post(t, tc.token, tc.path, tc.body)
		wantError(t, tc.path, status, body, http.StatusForbidden, protocol.CodeForbidden)
	}
}

func TestJobsStrictBodies(t *testing.T) {
	e := newJobEnv(t, 0)
	alice := e.client(t, jobAlice)
	info, err := alice.SubmitJob(context.Background(), "strict", &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	jobWait(t, alice, info.ID, (*client.JobInfo).Terminal)
	id := info.ID
	okReq := `{"provider":"fake","model":"fake-model","input":"x"}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             protocol.Code
	}{
		{"not JSON", "/v1/jobs/submit", `{"key":`, 400, protocol.CodeInvalidRequest},
		{"not an object", "/v1/jobs/submit", `[]`, 502, protocol.CodeInvalidJob},
		{"unknown member", "/v1/jobs/submit", `{"key":"k","request":` + okReq + `,"x":1}`, 502, protocol.CodeInvalidJob},
		{"cased member", "/v1/jobs/submit", `{"Key":"k","request":` + okReq + `}`, 502, protocol.CodeInvalidJob},
		{"missing key", "/v1/jobs/submit", `{"request":` + okReq + `}`, 502, protocol.CodeInvalidJob},
		{"null key", "/v1/jobs/submit", `{"key":null,"request":` + okReq + `}`, 502, protocol.CodeInvalidJob},
		{"key pattern", "/v1/jobs/submit", `{"key":"-k","request":` + okReq + `}`, 502, protocol.CodeInvalidJob},
		{"key too long", "/v1/jobs/submit", `{"key":"` + strings.Repeat("k", 129) + `","request":` + okReq + `}`, 502, protocol.CodeInvalidJob},
		{"request unknown field", "/v1/jobs/submit", `{"key":"k","request":{"provider":"fake","model":"fake-model","input":"x","zz":1}}`, 502, protocol.CodeInvalidJob},
		{"request session", "/v1/jobs/submit", `{"key":"k","request":{"provider":"fake","model":"fake-model","input":"x","session":{"id":"a","revision":0}}}`, 502, protocol.CodeJobRequestUnsupported},
		{"request idempotencyKey", "/v1/jobs/submit", `{"key":"k","request":{"provider":"fake","model":"fake-model","input":"x","idempotencyKey":"i"}}`, 502, protocol.CodeJobRequestUnsupported},
		{"unknown provider", "/v1/jobs/submit", `{"key":"k","request":{"provider":"nope","model":"fake-model","input":"x"}}`, 400, protocol.CodeUnknownProvider},
		{"read id pattern", "/v1/jobs/read", `{"id":"` + strings.ToUpper(id) + `"}`, 502, protocol.CodeInvalidJob},
		{"read extra", "/v1/jobs/read", `{"id":"` + id + `","after":0}`, 502, protocol.CodeInvalidJob},
		{"cancel no id", "/v1/jobs/cancel", `{}`, 502, protocol.CodeInvalidJob},
		{"events missing after", "/v1/jobs/events", `{"id":"` + id + `"}`, 502, protocol.CodeInvalidJobCursor},
		{"events negative", "/v1/jobs/events", `{"id":"` + id + `","after":-1}`, 502, protocol.CodeInvalidJobCursor},
		{"events fraction", "/v1/jobs/events", `{"id":"` + id + `","after":1.5}`, 502, protocol.CodeInvalidJobCursor},
		{"events over 2^53", "/v1/jobs/events", `{"id":"` + id + `","after":9007199254740992}`, 502, protocol.CodeInvalidJobCursor},
		{"events after cursor", "/v1/jobs/events", `{"id":"` + id + `","after":5}`, 502, protocol.CodeInvalidJobCursor},
		{"limit 0", "/v1/jobs/events", `{"id":"` + id + `","after":0,"limit":0}`, 502, protocol.CodeInvalidJobCursor},
		{"limit 101", "/v1/jobs/events", `{"id":"` + id + `","after":0,"limit":101}`, 502, protocol.CodeInvalidJobCursor},
		{"events bad id", "/v1/jobs/events", `{"id":"x","after":0}`, 502, protocol.CodeInvalidJobCursor},
		{"unknown job", "/v1/jobs/read", `{"id":"00000000-0000-4000-8000-000000000000"}`, 404, protocol.CodeJobNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.post(t, jobAlice, tc.path, tc.body)
			wantError(t, tc.name, status, body, tc.status, tc.code)
		})
	}
	// The edges that are accepted: limit 1 and 100, after at the cursor.
	for _, body := range []string{
		`{"id":"` + id + `","after":0,"limit":1}`,
		`{"id":"` + id + `","after":0,"limit":100}`,
		`{"id":"` + id + `","after":4}`,
	} {
		if status, b := e.post(t, jobAlice, "/v1/jobs/events", body); status != 200 {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
}

// Job endpoints take no run slot: with the subject's only slot held by a
// foreground run, jobs are still submitted, read and cancelled, and the
// job waits queued rather than failing.
func TestJobsWithoutRunSlots(t *testing.T) {
	e := newJobEnv(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alice := e.client(t, jobAlice)
	fg := make(chan error, 1)
	go func() {
		_, err := alice.Run(ctx, &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: blockingInput})
		fg <- err
	}()
	<-e.prov.started
	info, err := alice.SubmitJob(context.Background(), "queued", &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ReadJob(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	// BUSY keeps it queued.
	time.Sleep(50 * time.Millisecond)
	if got, _ := alice.ReadJob(context.Background(), info.ID); got.State != client.JobQueued {
		t.Fatalf("while the slot is taken: %+v", got)
	}
	cancel()
	<-fg
	if done := jobWait(t, alice, info.ID, (*client.JobInfo).Terminal); done.State != client.JobCompleted {
		t.Fatalf("after the slot is free: %+v", done)
	}
	// Cancel of a running job over HTTP.
	run, err := alice.SubmitJob(context.Background(), "running", &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: blockingInput})
	if err != nil {
		t.Fatal(err)
	}
	<-e.prov.started
	c, err := alice.CancelJob(context.Background(), run.ID)
	if err != nil || !c.CancelRequested {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if done := jobWait(t, alice, run.ID, (*client.JobInfo).Terminal); done.State != client.JobCancelled {
		t.Fatalf("cancelled: %+v", done)
	}
}

// A clean shutdown interrupts a running job (it is never run again) and
// leaves queued ones queued.
func TestJobsShutdownInterrupts(t *testing.T) {
	e := newJobEnv(t, 1)
	alice := e.client(t, jobAlice)
	run, err := alice.SubmitJob(context.Background(), "running", &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: blockingInput})
	if err != nil {
		t.Fatal(err)
	}
	<-e.prov.started
	queued, err := alice.SubmitJob(context.Background(), "queued", &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	svc := e.openJobs(t)
	defer svc.Stop(context.Background())
	var p *runtime.Principal
	for _, te := range newTokenEntries(e.tokens) {
		if te.principal.TokenID == "a" {
			p = te.principal
		}
	}
	got, err := svc.Read(context.Background(), p, run.ID)
	if err != nil || got.State != jobs.StateInterrupted {
		t.Fatalf("running job after shutdown: %+v %v", got, err)
	}
	page, err := svc.Events(context.Background(), p, run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last struct {
		Type  string
		Error protocol.ErrorInfo
	}
	_ = json.Unmarshal(page.Events[len(page.Events)-1], &last)
	if last.Type != "run.failed" || last.Error.Code != protocol.CodeJobInterrupted || last.Error.Outcome != "uncertain" {
		t.Fatalf("last event %s", page.Events[len(page.Events)-1])
	}
	if q, _ := svc.Read(context.Background(), p, queued.ID); q.State != jobs.StateQueued {
		t.Fatalf("queued job after shutdown: %+v", q)
	}
}

func TestJobsOff(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, path := range []string{"/v1/jobs/submit", "/v1/jobs/read", "/v1/jobs/cancel", "/v1/jobs/events"} {
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s with jobs off: %d", path, resp.StatusCode)
		}
	}
}

// benchJobs is a jobs.Service on a Badger store (durable commits, group
// commit) with the fake provider, for the benchmarks of make bench.
func benchJobs(b *testing.B, retention time.Duration) (*jobs.Service, *store.Store, []*runtime.Principal) {
	b.Helper()
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fp := &fakeProvider{}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: testProvider, Vendor: "test", AuthMode: "none", AccountID: "acct-1",
			Models: []string{testModel}, Capabilities: map[string]bool{"textStreaming": true},
			UsageSource: "synthetic", Provider: fp,
		}},
		MaxConcurrent: 64, MaxPerSubject: 64,
	})
	if err != nil {
		b.Fatal(err)
	}
	var tokens []Token
	for i := range 8 {
		tokens = append(tokens, Token{ID: "b" + strconv.Itoa(i), Subject: "bench-" + strconv.Itoa(i), Secret: benchToken(i),
			Providers: []string{testProvider}, Ops: []string{"jobs.submit", "jobs.read", "jobs.cancel"}})
	}
	byDigest := map[string]*runtime.Principal{}
	var ps []*runtime.Principal
	for _, te := range newTokenEntries(tokens) {
		byDigest[te.principal.CredentialDigest] = te.principal
		ps = append(ps, te.principal)
	}
	svc, err := jobs.Open(context.Background(), jobs.Options{
		Store: st, Engine: eng, HostID: "bench-host",
		Resolve:   func(d string) *runtime.Principal { return byDigest[d] },
		Account:   func(string) string { return "acct-1" },
		Retention: retention, MaxJobs: 100_000, MaxJobsPerSubject: 100_000, MaxBytes: 1 << 40, Workers: 64,
		PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	svc.Start()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
		_ = eng.Shutdown(ctx)
		_ = st.Close()
	})
	return svc, st, ps
}

// runBenchJobs submits n jobs from 8 subjects at once and waits until all
// have completed.
func runBenchJobs(b *testing.B, svc *jobs.Service, ps []*runtime.Principal, prefix string, n int) []string {
	ids := make([][]string, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			for k := i; k < n; k += len(ps) {
				info, err := svc.Submit(context.Background(), p, prefix+strconv.Itoa(k), &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: "hello"})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = append(ids[i], info.ID)
			}
			for _, id := range ids[i] {
				for {
					info, err := svc.Read(context.Background(), p, id)
					if protocol.CodeOf(err) == protocol.CodeJobExpired {
						break // completed, and its retention is over already
					}
					if err != nil {
						b.Error(err)
						return
					}
					if info.State == jobs.StateCompleted {
						break
					}
					if info.State != jobs.StateQueued && info.State != jobs.StateRunning {
						b.Errorf("job %s: %s", id, info.State)
						return
					}
					time.Sleep(200 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	var all []string
	for _, l := range ids {
		all = append(all, l...)
	}
	return all
}

// BenchmarkJobsSubmitToCompleted: jobs/s from submission to the committed
// run.completed, 8 subjects submitting at once, every commit durable
// (target ≥ 500/s on the 2-core machine).
func BenchmarkJobsSubmitToCompleted(b *testing.B) {
	svc, _, ps := benchJobs(b, time.Hour)
	b.ResetTimer()
	start := time.Now()
	runBenchJobs(b, svc, ps, "k", b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkJobsEventPages: full pages of a completed job read from the
// store (target ≥ 5,000 pages/s).
func BenchmarkJobsEventPages(b *testing.B) {
	svc, _, ps := benchJobs(b, time.Hour)
	ids := runBenchJobs(b, svc, ps[:1], "p", 64)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			page, err := svc.Events(context.Background(), ps[0], ids[i%len(ids)], 0, 0)
			if err != nil || len(page.Events) < 3 {
				b.Errorf("page: %d events, %v", len(page.Events), err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pages/s")
}

// BenchmarkJobsStoreGrowth: what a completed job leaves in the store once
// its retention has erased the payload — the tombstone and the key claim
// (target ≤ 2 KiB per job).
func BenchmarkJobsStoreGrowth(b *testing.B) {
	svc, st, ps := benchJobs(b, time.Millisecond)
	n := max(b.N, 200)
	runBenchJobs(b, svc, ps, "g", n)
	var entries []durable.Entry
	waitFor(b, "tombstones", func() bool {
		var err error
		if entries, err = st.List(context.Background(), "jobs/v1/", "", 0); err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Key, "jobs/v1/job/") && !bytes.Contains(e.Value, []byte(`"tomb":true`)) {
				return false
			}
		}
		return true
	})
	total := 0
	for _, e := range entries {
		total += len(e.Key) + len(e.Value)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Key, "jobs/v1/job/") {
			id := strings.TrimPrefix(e.Key, "jobs/v1/job/")
			if last, _ := st.Last(context.Background(), "jobs/v1/ev/"+id); last != 0 {
				b.Fatalf("log of %s kept after retention", id)
			}
		}
	}
	b.ReportMetric(float64(total)/float64(n), "bytes/job")
}

// FuzzJobBodies: the job body decoders never panic, fail only with their
// schema codes, and accept only what re-encodes to the same request.
func FuzzJobBodies(f *testing.F) {
	for _, s := range []string{
		`{"key":"k","request":{"provider":"p","model":"m","input":"x"}}`,
		`{"id":"5b2e0c1a-8d4f-4e7b-9a31-0c6d2f8e4b17"}`,
		`{"id":"5b2e0c1a-8d4f-4e7b-9a31-0c6d2f8e4b17","after":3,"limit":100}`,
		`{"id":"x","after":-0}`, `{"after":1e2}`, `[]`, `{"key":null}`, `{"request":{"session":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, req, err := decodeJobSubmit(body); err != nil {
			if c := protocol.CodeOf(err); c != protocol.CodeInvalidJob {
				t.Fatalf("submit: %s", c)
			}
		} else if _, err := protocol.Fingerprint(req); err != nil {
			t.Fatalf("accepted request has no fingerprint: %v", err)
		}
		if _, err := jobID(body); err != nil && protocol.CodeOf(err) != protocol.CodeInvalidJob {
			t.Fatalf("id: %v", err)
		}
		if _, after, limit, err := decodeJobEvents(body); err != nil {
			if protocol.CodeOf(err) != protocol.CodeInvalidJobCursor {
				t.Fatalf("events: %v", err)
			}
		} else if after > maxJobCursor || limit < 1 || limit > jobs.MaxPageEvents {
			t.Fatalf("events accepted after %d limit %d", after, limit)
		}
	})
}
