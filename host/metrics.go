package host

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// MetricsPath serves the Prometheus text format ([metrics] enabled = true)
// to tokens holding the metrics grant.
const MetricsPath = "/metrics"

// Metrics are the host's Prometheus series (GET /metrics). Labels are
// bounded by configuration: operation kinds and outcomes of wire-extensions
// §11.2, extension ids (the operator's), ABI op names and public error
// codes. A subject, account, model, run id or request path is never a
// label: each would make a series per client or per run, and names an
// identity the metrics reader need not know.
type Metrics struct {
	reg      *prometheus.Registry
	handler  http.Handler
	storeDir string

	// ops and dur are indexed by kind and outcome, resolved once: a
	// request pays two atomic adds, no label lookup.
	ops     [numKinds][numOutcomes]prometheus.Counter
	dur     [numKinds][numOutcomes]prometheus.Observer
	inst    *prometheus.HistogramVec
	calls   *prometheus.CounterVec
	reloads *prometheus.CounterVec

	// src is the server whose engine and extensions the gauges read.
	src atomic.Pointer[Server]
}

// Operation kinds and outcomes of the host records (wire-extensions §11.2).
const (
	kindRun = iota
	kindRetrieval
	kindJob
	kindSession
	kindTool
	kindApproval
	kindDiscovery
	kindProtocol
	kindOther
	numKinds
)

var kindNames = [numKinds]string{"run", "retrieval", "job", "session", "tool", "approval", "discovery", "protocol", "other"}

const (
	outcomeCompleted = iota
	outcomeRejected
	outcomeFailed
	outcomeCancelled
	outcomeReplayed // an idempotent replay (noteReplayed)
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"completed", "rejected", "failed", "cancelled", "replayed"}

// NewMetrics returns the registry of GET /metrics. storeDir is the data
// directory whose store files adhost_store_bytes sums ("" : 0).
func NewMetrics(storeDir string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), storeDir: storeDir}
	ops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agenticdriver_operations_total",
		Help: "Requests served, by operation kind and outcome (completed <400, rejected 4xx, failed >=500, cancelled: the response never finished).",
	}, []string{"kind", "outcome"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agenticdriver_duration_milliseconds",
		Help:    "Request duration in milliseconds, by operation kind and outcome.",
		Buckets: []float64{1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000},
	}, []string{"kind", "outcome"})
	m.inst = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "adhost_extension_instantiate_seconds",
		Help:    "Time to create one extension instance (instantiate and _initialize).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"extension"})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "adhost_extension_calls_total",
		Help: "Calls into extensions, by extension, ABI op and status (ok or the public error code).",
	}, []string{"extension", "op", "status"})
	for k := range numKinds {
		for o := range numOutcomes {
			m.ops[k][o] = ops.WithLabelValues(kindNames[k], outcomeNames[o])
			m.dur[k][o] = dur.WithLabelValues(kindNames[k], outcomeNames[o])
		}
	}
	// The Go and process collectors (goroutines, heap, RSS) let an
	// operator, and the soak test, see a leak from outside.
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "adhost_config_reloads_total",
		Help: "Reloads of host.toml (SIGHUP, adhost reload), by outcome: applied, or refused with the old configuration serving.",
	}, []string{"outcome"})
	m.reg.MustRegister(ops, dur, m.inst, m.calls, m.reloads, gauges{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Reloaded records one reload of the configuration; err nil: applied.
func (m *Metrics) Reloaded(err error) {
	if m == nil {
		return
	}
	outcome := "applied"
	if err != nil {
		outcome = "refused"
	}
	m.reloads.WithLabelValues(outcome).Inc()
}

// Instantiated records one instance creation of extension ext (the
// runtime/wasm hook).
func (m *Metrics) Instantiated(ext string, d time.Duration) {
	m.inst.WithLabelValues(ext).Observe(d.Seconds())
}

// Called records one call of op into extension ext; err nil is "ok",
// otherwise its public code (the runtime/wasm hook).
func (m *Metrics) Called(ext, op string, err error) {
	status := "ok"
	if err != nil {
		status = string(protocol.CodeOf(protocol.AsPublic(err)))
	}
	m.calls.WithLabelValues(ext, op, status).Inc()
}

// gauges reads the state gauges at scrape time.
type gauges struct{ m *Metrics }

var (
	descRuns      = prometheus.NewDesc("adhost_runs_active", "Runs holding an admission slot.", nil, nil)
	descQueue     = prometheus.NewDesc("adhost_admission_queue_depth", "Runs waiting in the admission queue.", nil, nil)
	descInstances = prometheus.NewDesc("adhost_extension_instances", "Live extension instances, by extension and state (idle, busy).", []string{"extension", "state"}, nil)
	descStore     = prometheus.NewDesc("adhost_store_bytes", "Bytes of the store's files in the data directory.", nil, nil)
	descExtension = prometheus.NewDesc("adhost_extension_info", "The pinned extensions new runs use (1 per extension), with version and module digest; a reload that re-pins one changes its labels.", []string{"extension", "version", "sha256"}, nil)
)

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRuns
	ch <- descQueue
	ch <- descInstances
	ch <- descStore
	ch <- descExtension
	ch <- descTelemetryDropped
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	var a runtime.AdmissionStats
	var exts []ExtensionStatus
	if s := g.m.src.Load(); s != nil {
		a = s.engine.Admission()
		if st := s.live.Load().status; st != nil {
			exts = st()
		}
	}
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(a.Running))
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(a.Queued))
	for _, x := range exts {
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(x.Idle), x.ID, "idle")
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(x.InUse), x.ID, "busy")
		ch <- prometheus.MustNewConstMetric(descExtension, prometheus.GaugeValue, 1, x.ID, x.Version, x.SHA256)
	}
	ch <- prometheus.MustNewConstMetric(descStore, prometheus.GaugeValue, float64(storeBytes(g.m.storeDir)))
	collectTelemetry(g.m.src.Load(), ch)
}

// storeBytes sums the Badger files of dir (tables, value logs, manifest);
// the data directory's other files (compilation cache, tokens, a usage
// file) are not the store's.
func storeBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".sst", ".vlog", ".mem":
		default:
			if name != "MANIFEST" && name != "DISCARD" && name != "KEYREGISTRY" {
				continue
			}
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// serveMetrics is GET /metrics: the metrics grant, then the text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
	if !p.Can("metrics.read") {
		s.writeError(w, r, protocol.New(protocol.CodeForbidden))
		return
	}
	s.metrics.handler.ServeHTTP(w, r)
}

// metricsRoute is the /metrics endpoint, nil (an unknown path) without
// [metrics].
func (s *Server) metricsRoute() endpoint {
	if s.metrics == nil {
		return nil
	}
	return s.serveMetrics
}

// obsWriter records what a request answered, for its access line and its
// host record.
type obsWriter struct {
	http.ResponseWriter
	status   int
	runID    string
	replayed bool
	// finished: the whole response was written (noteFinished); a client
	// that closes after that did not cancel anything.
	finished bool
	// corrCtx and corrID are the request's telemetry correlation, parsed
	// once when corrDone (correlationOf).
	corrCtx  context.Context
	corrID   string
	corrDone bool
}

func (o *obsWriter) WriteHeader(code int) {
	if o.status == 0 {
		o.status = code
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *obsWriter) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	return o.ResponseWriter.Write(b)
}

// Flush and Unwrap keep http.ResponseController (SSE flushes, deadlines)
// working through the wrapper.
func (o *obsWriter) Flush() {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (o *obsWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// noteRunID gives the request's access line the id of the run it started.
func noteRunID(w http.ResponseWriter, id string) {
	if o, ok := w.(*obsWriter); ok {
		o.runID = id
	}
}

// noteFinished records that the response to w was written whole: its
// body, or its stream's terminal event flushed.
func noteFinished(w http.ResponseWriter) {
	if o, ok := w.(*obsWriter); ok {
		o.finished = true
	}
}

// observe wraps w for observed.
func (s *Server) observe(w http.ResponseWriter) *obsWriter { return &obsWriter{ResponseWriter: w} }

// observed writes the request's access line and host record: method,
// route (a route of the table, never an arbitrary path), status, duration
// and run id — no header, body or identity.
func (s *Server) observed(o *obsWriter, r *http.Request, start time.Time) {
	d := time.Since(start)
	kind, route := requestKind(r.RequestURI)
	outcome := outcomeCompleted
	switch {
	case o.replayed:
		// Written whole (noteReplayed): a client that closes once it has
		// the terminal event is no cancellation.
		outcome = outcomeReplayed
	case r.Context().Err() != nil && !o.finished:
		// The response never finished. (A client may close as soon as
		// it has the terminal event, before this runs: that run was
		// served, not cancelled.)
		outcome = outcomeCancelled
	case o.status >= 500:
		outcome = outcomeFailed
	case o.status >= 400:
		outcome = outcomeRejected
	}
	if m := s.metrics; m != nil {
		m.ops[kind][outcome].Inc()
		m.dur[kind][outcome].Observe(float64(d) / float64(time.Millisecond))
	}
	if s.tel != nil {
		s.tel.hostRecord(o, r, kind, outcome, start, d)
	}
	if s.log.Enabled(r.Context(), slog.LevelInfo) {
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", o.status),
			slog.Float64("durationMs", float64(d.Microseconds())/1000), slog.String("runId", o.runID),
			slog.String("outcome", outcomeNames[outcome]))
	}
}

// knownRoutes are the targets an access line may name.
var knownRoutes = map[string]bool{
	pathHealth: true, StatusPath: true, MetricsPath: true,
	"/v1/protocol": true, "/v1/providers": true, "/v1/providers?refresh=true": true, "/v1/runs": true,
	"/v1/sessions/create": true, "/v1/sessions/read": true, "/v1/sessions/delete": true,
	"/v1/jobs/submit": true, "/v1/jobs/read": true, "/v1/jobs/cancel": true, "/v1/jobs/events": true,
	"/v1/retrieval/search": true, "/v1/retrieval/index": true, "/v1/retrieval/delete": true, "/v1/retrieval/ingest": true,
	"/v1/approvals/decisions": true, "/v1/tool-executions/progress": true, "/v1/tool-executions/results": true,
}

// requestKind maps a request target to its operation kind and the route
// an access line names ("other" for a target that is no route).
func requestKind(target string) (int, string) {
	route := target
	if !knownRoutes[target] {
		route = "other"
	}
	switch {
	case target == "/v1/runs":
		return kindRun, route
	case strings.HasPrefix(target, "/v1/jobs/"):
		return kindJob, route
	case strings.HasPrefix(target, "/v1/sessions/"):
		return kindSession, route
	case strings.HasPrefix(target, "/v1/retrieval/"):
		return kindRetrieval, route
	case target == "/v1/approvals/decisions":
		return kindApproval, route
	case strings.HasPrefix(target, "/v1/tool-executions/"):
		return kindTool, route
	case strings.HasPrefix(target, "/v1/providers"):
		return kindDiscovery, route
	case target == "/v1/protocol":
		return kindProtocol, route
	}
	return kindOther, route
}
