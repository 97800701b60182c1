package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestMetricsEndpoint: GET /metrics of the real binary, parsed by the
// Prometheus text parser after JSON, SSE, tool and refused runs: every
// listed series is there, counts follow the runs, no label value is a
// subject, a model or a run id; a token without the metrics grant is
// FORBIDDEN. The JSON log has one access line per request and one end
// line per run, and no content.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[tokens.grants]\nmetrics = true\n\n[metrics]\nenabled = true\n\n[log]\nformat = \"json\"\n")
	bob := addSiteToken(t, s, "bob", "bob", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	alice, b := newRunClient(t, srv, s.token), newRunClient(t, srv, bob)

	var runIDs []string
	for range 3 {
		res, err := alice.Run(t.Context(), runRequest("conformance:text"))
		if err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, res.RunID)
	}
	res, err := alice.Stream(t.Context(), withTools(runRequest("conformance:tools"), "conformance_lookup"), func(client.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	runIDs = append(runIDs, res.RunID)
	if res, err = b.Run(t.Context(), runRequest("conformance:text")); err != nil {
		t.Fatal(err)
	}
	runIDs = append(runIDs, res.RunID)
	if _, err := b.Run(t.Context(), withTools(runRequest("conformance:text"), "conformance_lookup")); err == nil {
		t.Fatal("bob ran a tool he is not granted")
	}

	scrape := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return doRaw(t, req)
	}
	resp, body := scrape(bob)
	if resp.StatusCode != http.StatusForbidden || !bytes.Contains(body, []byte(protocol.CodeForbidden)) {
		t.Fatalf("without the grant: %d %s", resp.StatusCode, body)
	}
	resp, body = scrape(s.token)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	for _, name := range []string{
		"agenticdriver_operations_total", "agenticdriver_duration_milliseconds", "adhost_runs_active",
		"adhost_admission_queue_depth", "adhost_extension_instances", "adhost_extension_instantiate_seconds",
		"adhost_extension_calls_total", "adhost_store_bytes", "adhost_telemetry_dropped_total",
	} {
		if fams[name] == nil || len(fams[name].Metric) == 0 {
			t.Errorf("series %s missing", name)
		}
	}
	forbidden := map[string]bool{"dev-user": true, "bob": true, fixtureModel: true, "local": true}
	for _, id := range runIDs {
		forbidden[id] = true
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if forbidden[l.GetValue()] || strings.Contains(l.GetValue(), "/") {
					t.Errorf("%s has label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	get := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			return -1
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return value(m)
		}
		return -1
	}
	if n := get("agenticdriver_operations_total", map[string]string{"kind": "run", "outcome": "completed"}); n < 5 {
		t.Errorf("completed runs counted %v, want at least 5", n)
	}
	if n := get("agenticdriver_operations_total", map[string]string{"kind": "run", "outcome": "rejected"}); n < 1 {
		t.Errorf("rejected runs counted %v, want at least 1", n)
	}
	if n := get("adhost_extension_calls_total", map[string]string{"extension": "fixture", "op": "complete", "status": "ok"}); n < 6 {
		t.Errorf("fixture complete calls %v, want at least 6", n)
	}
	if n := get("adhost_extension_calls_total", map[string]string{"extension": "conformance-tools", "op": "tool_invoke", "status": "ok"}); n < 1 {
		t.Errorf("tool calls %v, want at least 1", n)
	}
	if n := get("adhost_extension_instantiate_seconds", map[string]string{"extension": "fixture"}); n < 1 {
		t.Errorf("fixture instantiations %v, want at least 1", n)
	}
	if n := get("adhost_runs_active", nil); n != 0 {
		t.Errorf("runs active %v after all ended", n)
	}
	if n := get("adhost_store_bytes", nil); n <= 0 {
		t.Errorf("store bytes %v", n)
	}
	if n := get("adhost_extension_instances", map[string]string{"extension": "fixture", "state": "busy"}); n != 0 {
		t.Errorf("busy fixture instances %v", n)
	}

	logs := srv.stderr.settled()
	for _, content := range []string{"conformance:text", "Hello", "fixture-model", "receipt", s.token, bob} {
		if strings.Contains(logs, content) {
			t.Errorf("the log holds %q", content)
		}
	}
	access, ends := map[string]bool{}, map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		id, _ := rec["runId"].(string)
		switch rec["msg"] {
		case "request":
			if rec["route"] == "/v1/runs" && rec["status"] == 200.0 && rec["method"] == "POST" {
				access[id] = true
			}
		case "run ended":
			if rec["outcome"] == "run.completed" && rec["steps"] != nil && rec["durationMs"] != nil {
				ends[id] = true
			}
		}
	}
	for _, id := range runIDs {
		if !access[id] || !ends[id] {
			t.Errorf("run %s: access line %v, end line %v", id, access[id], ends[id])
		}
	}
}

// value is a sample's value: a counter's or gauge's, a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
