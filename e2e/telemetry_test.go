package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"adhost/client"
	"adhost/runtime/protocol"
)

// otlpReceiver is a loopback OTLP/HTTP collector that keeps the raw bytes
// of every export.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	traces  [][]byte
	metrics [][]byte
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		if r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export %s with content type %q", r.URL.Path, r.Header.Get("Content-Type"))
		}
		rc.mu.Lock()
		switch r.URL.Path {
		case "/v1/traces":
			rc.traces = append(rc.traces, b)
		case "/v1/metrics":
			rc.metrics = append(rc.metrics, b)
		default:
			t.Errorf("export to %s", r.URL.Path)
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// spanCounter is a loopback OTLP/HTTP collector that keeps only how many
// spans of each name it was sent (a long run's exports would not fit in
// memory as bytes).
type spanCounter struct {
	*httptest.Server
	mu      sync.Mutex
	exports int
	names   map[string]int
}

func newSpanCounter(t *testing.T) *spanCounter {
	sc := &spanCounter{names: map[string]int{}}
	sc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		if r.URL.Path != "/v1/traces" {
			return
		}
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("traces export is not OTLP protobuf: %v", err)
			return
		}
		sc.mu.Lock()
		defer sc.mu.Unlock()
		sc.exports++
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					sc.names[sp.Name]++
				}
			}
		}
	}))
	t.Cleanup(sc.Close)
	return sc
}

func (sc *spanCounter) counts() (exports int, names map[string]int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.exports, maps.Clone(sc.names)
}

func (rc *otlpReceiver) raw() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return bytes.Join(append(append([][]byte{}, rc.traces...), rc.metrics...), nil)
}

// TestTelemetryRedaction: the conformance scenarios (text, structured,
// tools, a tool call with marked arguments, a private provider error, a
// cancellation, an echoed prompt, an attachment, a run that waits in the
// admission queue), in JSON and SSE, exported over OTLP/HTTP protobuf at
// level progress to a capturing receiver: the spans and metrics of §11.2
// arrive, a valid traceparent is their remote parent, and the raw
// exported bytes hold none of the prompts, answers, tool arguments or
// results, attached text, markers, the subject, the model or the token.
func TestTelemetryRedaction(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	s := newSite(t)
	appendSiteConfig(t, s, fmt.Sprintf("[diagnostics]\notlp_endpoint = %q\nlevel = \"progress\"\nexport_interval_ms = 1000\n", rc.URL)+
		"[limits]\nqueue_total = 4\nqueue_per_subject = 4\n[limits.subjects]\nqueuer = 1\n")
	queuer := addSiteToken(t, s, "queuer", "queuer", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	hc := &http.Client{Transport: headerTransport{
		"Traceparent":              "00-" + traceID + "-00f067aa0ba902b7-01",
		"Agenticdriver-Request-Id": "6F9619FF-8B86-4011-B42D-00C04FC964FF",
		"Tracestate":               "vendor=tracestate-marker",
		"Baggage":                  "k=baggage-marker",
	}}
	c, err := client.New(srv.URL, client.WithToken(s.token), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "echo-prompt-marker words"
	scenarios := []struct {
		name string
		run  func(mode string) error
	}{
		{"text", func(m string) error { return runMode(t, c, m, runRequest("conformance:text")) }},
		{"structured", func(m string) error {
			return runMode(t, c, m, withSchema(runRequest("conformance:structured"), `{"type":"object"}`))
		}},
		{"tools", func(m string) error {
			return runMode(t, c, m, withTools(runRequest("conformance:tools"), "conformance_lookup"))
		}},
		{"marked tool arguments", func(m string) error {
			return runMode(t, c, m, withTools(runRequest(`tool:conformance_lookup:{"value":9,"note":"argument-marker"}`), "conformance_lookup"))
		}},
		{"private error", func(m string) error { return runMode(t, c, m, runRequest("conformance:private-error")) }},
		{"echo", func(m string) error { return runMode(t, c, m, runRequest(prompt)) }},
		{"attachment", func(m string) error {
			req := runRequest("conformance:text")
			req.Attachments = json.RawMessage(`[{"type":"text","source":{"id":"notes","revision":"1"},"mediaType":"text/plain","text":"attachment-marker words"}]`)
			return runMode(t, c, m, req)
		}},
	}
	for _, sc := range scenarios {
		for _, m := range []string{"json", "sse"} {
			_ = sc.run(m) // failures are scenarios too; only what is exported matters
		}
	}
	// A run that waits for admission behind another of its subject's
	// (queuer: one at a time), the only run that waits.
	qc, err := client.New(srv.URL, client.WithToken(queuer), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	holder := streamQueued(t, qc, "queuer", nil)
	holder.waitRunning(t)
	waiting := streamQueued(t, qc, "queuer", nil)
	holder.stop()
	waiting.waitRunning(t)
	waiting.stop()
	cancelOnFirstProgress(t, c, runRequest("conformance:cancel"))
	// SIGTERM: the host flushes what is queued before it exits.
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, srv.stderr)
	}
	raw := rc.raw()
	if len(raw) == 0 {
		t.Fatal("nothing exported")
	}
	for _, marker := range []string{
		"conformance:", "Hello", "fixture-model", "dev-user", s.token, secretMarker, "argument-marker", "receipt",
		"echo-prompt-marker", `{"ok"`, "upstream", "/v1/runs", "tracestate-marker", "baggage-marker", "attachment-marker", "notes", "queuer",
	} {
		if bytes.Contains(raw, []byte(marker)) {
			t.Errorf("exported bytes contain %q", marker)
		}
	}

	if !bytes.Contains(raw, []byte("6f9619ff-8b86-4011-b42d-00c04fc964ff")) {
		t.Error("the request id is not exported, lowercased")
	}
	names := map[string]int{}
	parented := 0
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, b := range rc.traces {
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("traces export is not OTLP protobuf: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names[sp.Name]++
					if sp.Name == "agenticdriver.run" || sp.Name == "agenticdriver.host" {
						// Every run request carried the traceparent and
						// the request id: its host span and its run's
						// span both take them.
						attrs := map[string]string{}
						for _, kv := range sp.Attributes {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
						if attrs["agenticdriver.operation"] == "run" &&
							(fmt.Sprintf("%x", sp.TraceId) != traceID || attrs["agenticdriver.request_id"] != "6f9619ff-8b86-4011-b42d-00c04fc964ff") {
							t.Errorf("%s span of a run request without its correlation: trace %x, %v", sp.Name, sp.TraceId, attrs)
						}
					}
					if sp.Name == "agenticdriver.run" {
						// Every run that started names its run id (from
						// the engine, not from event data, which a JSON
						// run does not encode for telemetry).
						attrs := map[string]string{}
						for _, kv := range sp.Attributes {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
						if attrs["agenticdriver.outcome"] == "completed" && !uuidPattern.MatchString(attrs["agenticdriver.run_id"]) {
							t.Errorf("completed run span without a run id: %v", attrs)
						}
					}
					if fmt.Sprintf("%x", sp.TraceId) == traceID {
						parented++
					}
				}
			}
		}
	}
	for _, n := range []string{"agenticdriver.run", "agenticdriver.host", "agenticdriver.queue", "agenticdriver.context", "agenticdriver.provider", "agenticdriver.tool"} {
		if names[n] == 0 {
			t.Errorf("no %s span (got %v)", n, names)
		}
	}
	if names["agenticdriver.queue"] != 1 {
		t.Errorf("%d queue spans, want 1: the one run that waited for admission", names["agenticdriver.queue"])
	}
	if parented == 0 {
		t.Error("no span has the request's traceparent as its parent")
	}
	metricNames := map[string]bool{}
	progressDims := map[string]bool{} // kind/outcome/phase of agenticdriver.progress
	for _, b := range rc.metrics {
		var req collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("metrics export is not OTLP protobuf: %v", err)
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					metricNames[m.Name] = true
					if m.Name != "agenticdriver.progress" {
						continue
					}
					for _, dp := range m.GetSum().GetDataPoints() {
						dims := map[string]string{}
						for _, kv := range dp.Attributes {
							dims[kv.Key] = kv.Value.GetStringValue()
						}
						progressDims[dims["kind"]+"/"+dims["outcome"]+"/"+dims["phase"]] = true
					}
				}
			}
		}
	}
	for _, n := range []string{"agenticdriver.operations", "agenticdriver.duration", "agenticdriver.progress"} {
		if !metricNames[n] {
			t.Errorf("no %s metric (got %v)", n, metricNames)
		}
	}
	// The cancelled run reported model progress once admitted.
	if !progressDims["run/cancelled/model"] {
		t.Errorf("agenticdriver.progress has no kind=run outcome=cancelled phase=model point (got %v)", progressDims)
	}
}

// runMode runs req as JSON or as an event stream and returns its error.
func runMode(t *testing.T, c *client.Client, mode string, req *protocol.RunRequest) error {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if mode == "json" {
		_, err := c.Run(ctx, req)
		return err
	}
	_, err := c.Stream(ctx, req, func(client.Event) error { return nil })
	return err
}

// headerTransport adds fixed headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// featureTelemetrySite is the dev site with every extension feature on —
// idempotency, durable jobs, sessions, approvals and application tools,
// retrieval with the local-hashing embedder — plus /metrics, and OTLP
// export at level progress to rc; the dev token holds every grant.
func featureTelemetrySite(t *testing.T, rc *otlpReceiver) *site {
	t.Helper()
	s := newSite(t)
	lh := copyPlugin(t, s.dir, "local-hashing", "1.0.0")
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(doc), "version = 1\n", fmt.Sprintf(`version = 1

[idempotency]
enabled = true

[jobs]
enabled = true
retention_ms = 3600000
max_jobs = 100
max_jobs_per_subject = 100
workers = 1
poll_interval_ms = 20

[sessions]
enabled = true
retention_ms = 3600000

[approvals]
enabled = true

[application_tools]
enabled = true
require_approval = false

[metrics]
enabled = true

[diagnostics]
otlp_endpoint = %q
level = "progress"
include_names = false
export_interval_ms = 1000
`, rc.URL), 1)
	text = strings.Replace(text, `names = ["conformance_lookup"]`+"\n", `names = ["conformance_lookup"]`+"\nrequires_approval = [\"conformance_lookup\"]\n", 1)
	// An account id that would show if an identity leaked.
	text = strings.Replace(text, "account_id = \"local\"\nmodels", "account_id = \"account-marker\"\nmodels", 1)
	// The dev token is the document's last table.
	text += fmt.Sprintf(`
[tokens.grants]
metrics = true
jobs = ["submit", "read", "cancel"]
sessions = ["create", "read", "continue", "delete"]
approve_tools = ["conformance_lookup"]
application_tools = [{ name = "lookup_ticket", requires_approval = false }]
retrieval = { search = ["docs"], index = ["docs"], delete = ["docs"] }
%s`, docsCorpus(lh, "hash-ngram-256", 256))
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTelemetryRedactionFeatures: the extension features through a
// capturing OTLP receiver — an idempotent run and its replays (outcome
// "replayed", status OK, in spans, OTLP metrics and /metrics), a durable
// job (its run traced as operation "job"), a session turn, an approval and
// an application tool, retrieval ingest and search and a run with the
// retrieval option — and the raw exported bytes hold none of their
// prompts, passages, queries, arguments, results, ids of jobs, sessions
// or approvals, the subject or the token.
func TestTelemetryRedactionFeatures(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	s := featureTelemetrySite(t, rc)
	srv := startServer(t, s)
	ctx := t.Context()
	hc := &http.Client{Transport: headerTransport{"Traceparent": "00-" + featureTraceID + "-00f067aa0ba902b7-01"}}
	c, err := client.New(srv.URL, client.WithToken(s.token), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string // identifiers made during the test that must not leave

	// Idempotency: one run, then a JSON and an SSE replay.
	key := "idem-key-marker"
	keyed := runRequest("echo idem-prompt-marker")
	keyed.IdempotencyKey = &key
	keyed.Metadata = map[string]string{"ticket": "metadata-value-marker"}
	if _, err := c.Run(ctx, keyed); err != nil {
		t.Fatalf("keyed run: %v", err)
	}
	if _, err := c.Run(ctx, keyed); err != nil {
		t.Fatalf("JSON replay: %v", err)
	}
	if _, err := c.Stream(ctx, keyed, func(client.Event) error { return nil }); err != nil {
		t.Fatalf("SSE replay: %v", err)
	}

	// A durable job.
	job, err := c.SubmitJob(ctx, "job-key-marker", jobReq(`tool:conformance_lookup:{"value":5}`))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	secrets = append(secrets, job.ID)
	waitJob(t, c, job.ID, (*client.JobInfo).Terminal)

	// A session turn.
	snap, err := c.CreateSession(ctx, &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	secrets = append(secrets, snap.Session.ID)
	if _, err := c.Run(ctx, sessionTurn("conformance:native", snap.Session.ID, 0)); err != nil {
		t.Fatalf("session turn: %v", err)
	}

	// An approval, approved, and an application tool answered here.
	gated := toolRun(lookupTool, `{"value":7}`)
	gated.Approvals = client.Approvals("pause", 0)
	if _, err := c.Stream(ctx, gated, func(ev client.Event) error {
		if ev.Approval == nil {
			return nil
		}
		secrets = append(secrets, ev.Approval.ApprovalID)
		_, err := c.DecideApproval(ctx, ev.Approval, client.DecisionApprove)
		return err
	}); err != nil {
		t.Fatalf("approval run: %v", err)
	}
	app := runRequest(`tool:lookup_ticket:{"id":"ticket-marker"}`)
	app.Tools = []string{"lookup_ticket"}
	app.ApplicationTools = json.RawMessage(`[{"name":"lookup_ticket","description":"Looks a ticket up.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}]`)
	if _, err := c.Stream(ctx, app, func(ev client.Event) error {
		if ev.Execution == nil {
			return nil
		}
		return c.SubmitToolResult(ctx, ev.Execution.Identity(), json.RawMessage(`{"status":"result-marker"}`))
	}); err != nil {
		t.Fatalf("application tool run: %v", err)
	}

	// Retrieval: ingest, search, a run with the retrieval option.
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest",
		`{"corpus":"docs","document":{"type":"text","source":{"id":"source-marker","revision":"r1","title":"title-marker"},"mediaType":"text/markdown","text":"# Battery\nThe passage-marker cell lasted 812 hours.\n"}}`); st != 200 {
		t.Fatalf("ingest: %d %s", st, b)
	}
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery query-marker","limit":2}`); st != 200 {
		t.Fatalf("search: %d %s", st, b)
	}
	if st, ans := postRun(t, srv, s.token, `{"provider":"fixture","model":"fixture-model","input":"echo:evidence battery evidence-marker","retrieval":{"corpus":"docs","limit":2}}`); st != 200 {
		t.Fatalf("retrieval run: %d %v", st, ans)
	}

	// /metrics counts the replays.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, body := doRaw(t, req)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `agenticdriver_operations_total{kind="run",outcome="replayed"} 2`) ||
		!strings.Contains(string(body), `adhost_telemetry_dropped_total{signal="spans"} 0`) {
		t.Errorf("/metrics: %d, no 2 replayed runs or no drop counter:\n%s", resp.StatusCode, grepLines(string(body), "operations_total", "telemetry"))
	}

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, srv.stderr)
	}
	raw := rc.raw()
	for _, marker := range append(secrets,
		"conformance:", "marker", "fixture-model", "dev-user", s.token, "echo", "battery", "Battery",
		"lookup_ticket", "conformance_lookup", "docs-v1", "hash-ngram", "/v1/", key,
	) {
		if bytes.Contains(raw, []byte(marker)) {
			t.Errorf("exported bytes contain %q", marker)
		}
	}

	// The spans: runs of operation run and job, host records of every
	// kind used, replays with outcome replayed and status OK.
	type spanInfo struct {
		name, traceID string
		attrs         map[string]string
		status        string
	}
	var spans []spanInfo
	rc.mu.Lock()
	for _, b := range rc.traces {
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("traces export is not OTLP protobuf: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					si := spanInfo{name: sp.Name, traceID: fmt.Sprintf("%x", sp.TraceId), attrs: map[string]string{}, status: sp.GetStatus().GetCode().String()}
					for _, kv := range sp.Attributes {
						si.attrs[kv.Key] = kv.Value.GetStringValue()
					}
					spans = append(spans, si)
				}
			}
		}
	}
	rc.mu.Unlock()
	count := func(name, key, val string) (n int, status string) {
		for _, sp := range spans {
			if sp.name == name && sp.attrs[key] == val {
				n++
				status = sp.status
			}
		}
		return n, status
	}
	if n, st := count("agenticdriver.host", "agenticdriver.outcome", "replayed"); n != 2 || st != "STATUS_CODE_OK" {
		t.Errorf("replayed host records: %d (status %s), want 2 with status OK", n, st)
	}
	if n, _ := count("agenticdriver.run", "agenticdriver.operation", "job"); n != 1 {
		t.Errorf("job run spans: %d, want 1", n)
	}
	// The submit's traceparent parents the submit's host record, not the
	// job's run: headers are not persisted into jobs.
	for _, sp := range spans {
		switch {
		case sp.name == "agenticdriver.run" && sp.attrs["agenticdriver.operation"] == "job" && sp.traceID == featureTraceID:
			t.Error("the job's run span has the submit request's traceparent as its parent")
		case sp.name == "agenticdriver.host" && sp.attrs["agenticdriver.operation"] == "job" && sp.traceID != featureTraceID:
			t.Errorf("a job request's host record is not under its traceparent: trace %s", sp.traceID)
		}
	}
	for _, op := range []string{"job", "session", "approval", "tool", "retrieval", "run"} {
		if n, _ := count("agenticdriver.host", "agenticdriver.operation", op); n == 0 {
			t.Errorf("no host record of operation %s", op)
		}
	}
	// OTLP metrics carry the replayed outcome too.
	if !bytes.Contains(raw, []byte("replayed")) {
		t.Error("no replayed outcome in the export")
	}
}

// featureTraceID is the trace id every request of
// TestTelemetryRedactionFeatures carries in its traceparent.
const featureTraceID = "5bf92f3577b34da6a3ce929d0e0e4736"

// grepLines returns the lines of s containing any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
