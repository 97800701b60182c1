package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

func (rc *otlpReceiver) raw() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return bytes.Join(append(append([][]byte{}, rc.traces...), rc.metrics...), nil)
}

// TestTelemetryRedaction: the conformance scenarios (text, structured,
// tools, a tool call with marked arguments, a private provider error, a
// cancellation, an echoed prompt), in JSON and SSE, exported over
// OTLP/HTTP protobuf at level progress to a capturing receiver: the spans
// and metrics of §11.2 arrive, a valid traceparent is their remote
// parent, and the raw exported bytes hold none of the prompts, answers,
// tool arguments or results, markers, the subject, the model or the token.
func TestTelemetryRedaction(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	s := newSite(t)
	appendSiteConfig(t, s, fmt.Sprintf("[diagnostics]\notlp_endpoint = %q\nlevel = \"progress\"\nexport_interval_ms = 1000\n", rc.URL))
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
	}
	for _, sc := range scenarios {
		for _, m := range []string{"json", "sse"} {
			_ = sc.run(m) // failures are scenarios too; only what is exported matters
		}
	}
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
		"echo-prompt-marker", `{"ok"`, "upstream", "/v1/runs", "tracestate-marker", "baggage-marker",
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
					if fmt.Sprintf("%x", sp.TraceId) == traceID {
						parented++
					}
				}
			}
		}
	}
	for _, n := range []string{"agenticdriver.run", "agenticdriver.host", "agenticdriver.queue", "agenticdriver.provider", "agenticdriver.tool"} {
		if names[n] == 0 {
			t.Errorf("no %s span (got %v)", n, names)
		}
	}
	if parented == 0 {
		t.Error("no span has the request's traceparent as its parent")
	}
	metricNames := map[string]bool{}
	for _, b := range rc.metrics {
		var req collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("metrics export is not OTLP protobuf: %v", err)
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					metricNames[m.Name] = true
				}
			}
		}
	}
	for _, n := range []string{"agenticdriver.operations", "agenticdriver.duration", "agenticdriver.progress"} {
		if !metricNames[n] {
			t.Errorf("no %s metric (got %v)", n, metricNames)
		}
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
