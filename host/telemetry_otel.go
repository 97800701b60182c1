package host

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
)

// Telemetry is the OpenTelemetry export of wire-extensions §11.2: spans
// and metrics from a fixed allow-list, sent over OTLP/HTTP (protobuf) to
// [diagnostics] otlp_endpoint. What it records is chosen here, never
// copied from a request: operation kinds, outcomes, codes, durations,
// run and observation ids, and — only with include_names — provider,
// model and tool names. Prompts, answers, tool data, native state,
// credentials, subjects, accounts, paths and metadata never reach it.
//
// Execution never waits on it: spans are queued (bounded; a full queue
// drops) and exported in the background, and an exporter that fails three
// times in a row, or times out once, is switched off.
type Telemetry struct {
	level int // levelSummary, levelSteps, levelProgress
	names bool
	rec   *spanRecorder
	mp    *sdkmetric.MeterProvider
	// ops counts host records by kind and outcome for the
	// agenticdriver.operations counter, which the SDK reads at each
	// collection (an observable counter): a host record costs an atomic
	// add instead of a synchronous measurement (about 0.3 µs each,
	// resolving its attribute set every time).
	ops [numKinds][numOutcomes]atomic.Int64
	// durs is the agenticdriver.duration histogram, kept by the host in
	// atomic buckets as ops is, and produced for the SDK's reader
	// (telemetry_hist.go).
	durs   *durations
	prog   metric.Int64Counter
	active atomic.Int32 // runs being traced
	spans  *spanQueue
	log    *slog.Logger
	// obsOpts are the operations counter's options for each kind and
	// outcome, built once: passed as a slice, an observation allocates
	// nothing here (a variadic argument of an interface method is a new
	// slice a call).
	obsOpts [numKinds][numOutcomes][]metric.ObserveOption
}

const (
	levelSummary = iota
	levelSteps
	levelProgress
)

// Bounds of §11.2 (defaults).
const (
	telActiveRuns   = 128
	telSpansPerRun  = 128
	telQueueRecords = 128
	telQueueBytes   = 2_000_000
	telTimeout      = time.Second
)

// telBatch is the most records one export request carries: §11.2's
// maximum (its default is 16). A record is a host record's span or a run
// record, the run span with its children (spanQueue). Why the maximum:
// every request is a protobuf marshal and an HTTP round trip on both
// ends, whatever it carries — at 16 spans a request a busy host sent one
// for every four fixture runs, and those requests were most of what
// telemetry cost (the fixture's JSON runs lost a quarter of their
// throughput); at 64 records a fixture run's two records go one request
// in 32 runs. A batch still goes as soon as it is full, or at the latest
// a second after its first record (the queue's tick), and the queue's
// bounds (128 records, 2,000,000 bytes) are the defaults: a full batch
// leaves as much room again for the records that end while it is sent.
const telBatch = 64

// NewTelemetry starts the exporters of d; nil (off) without an endpoint.
func NewTelemetry(d *config.Diagnostics, log *slog.Logger) (*Telemetry, error) {
	if d == nil || d.OTLPEndpoint == "" {
		return nil, nil
	}
	base := strings.TrimSuffix(d.OTLPEndpoint, "/")
	t := &Telemetry{names: d.IncludeNames, log: log}
	switch d.Level {
	case "steps":
		t.level = levelSteps
	case "progress":
		t.level = levelProgress
	}
	ctx := context.Background()
	noRetry := otlptracehttp.RetryConfig{Enabled: false}
	texp, err := newOTLPSpans(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(base+"/v1/traces"),
		otlptracehttp.WithTimeout(telTimeout), otlptracehttp.WithRetry(noRetry),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: spanTransport()})))
	if err != nil {
		return nil, err
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"),
		otlpmetrichttp.WithTimeout(telTimeout), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "adhost"))
	rate := 1.0
	if d.SampleRate != nil {
		rate = *d.SampleRate
	}
	t.spans = newSpanQueue(&guardedSpans{exp: texp, g: newGuard("traces", log)}, telQueueRecords, telQueueBytes, telBatch, time.Second)
	t.rec = newSpanRecorder(rate, t.spans)
	var sets [numKinds][numOutcomes]attribute.Set
	for k := range numKinds {
		for o := range numOutcomes {
			sets[k][o] = attribute.NewSet(
				attribute.String("kind", kindNames[k]), attribute.String("outcome", outcomeNames[o]), attribute.String("phase", "total"))
			t.obsOpts[k][o] = []metric.ObserveOption{metric.WithAttributeSet(sets[k][o])}
		}
	}
	t.durs = newDurations(sets)
	t.mp = sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&guardedMetrics{Exporter: mexp, g: newGuard("metrics", log)},
			sdkmetric.WithInterval(time.Duration(d.ExportIntervalMs)*time.Millisecond), sdkmetric.WithTimeout(telTimeout),
			sdkmetric.WithProducer(t.durs))),
	)
	m := t.mp.Meter("adhost")
	if _, err = m.Int64ObservableCounter("agenticdriver.operations", metric.WithUnit("1"),
		metric.WithInt64Callback(t.observeOps)); err != nil {
		return nil, err
	}
	if t.prog, err = m.Int64Counter("agenticdriver.progress", metric.WithUnit("1")); err != nil {
		return nil, err
	}
	return t, nil
}

// spanTransport is the trace client's transport: net/http's default
// (which otlptracehttp copies for its own) with a write buffer that holds
// a whole batch.
//
// Why: with the default 4 KiB buffer, net/http writes a request's headers
// and first 4 KiB, then copies the rest of the body through a buffer it
// allocates for every request — a full batch of 64 spans is about 20 KB,
// so each export allocated 16 KB more than its body and made two writes.
// At 64 KiB a typical batch goes out in one write from the buffer; a
// larger one (long names with include_names) takes the old path. The
// client has no Timeout of its own: each export's context carries the
// export timeout (spanQueue.exportAll), which the guard sees as
// context.DeadlineExceeded.
func spanTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.WriteBufferSize = 64 << 10
	return tr
}

// observeOps reports agenticdriver.operations: the count of each kind and
// outcome seen so far (cumulative, as the synchronous counter exported
// it); a pair never seen has no series.
func (t *Telemetry) observeOps(_ context.Context, o metric.Int64Observer) error {
	for k := range numKinds {
		for c := range numOutcomes {
			if n := t.ops[k][c].Load(); n > 0 {
				o.Observe(n, t.obsOpts[k][c]...)
			}
		}
	}
	return nil
}

// Shutdown flushes what is queued (bounded by ctx) and stops the
// exporters.
func (t *Telemetry) Shutdown(ctx context.Context) {
	if t == nil {
		return
	}
	_ = t.spans.Shutdown(ctx)
	_ = t.mp.Shutdown(ctx)
}

// guard switches an exporter off after three failures in a row or one
// timeout; exports are never retried.
type guard struct {
	name     string
	log      *slog.Logger
	failures atomic.Int32
	off      atomic.Bool
}

func newGuard(name string, log *slog.Logger) *guard { return &guard{name: name, log: log} }

func (g *guard) done(err error) {
	if err == nil {
		g.failures.Store(0)
		return
	}
	timeout := errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") || strings.Contains(err.Error(), "Timeout")
	if timeout || g.failures.Add(1) >= 3 {
		if !g.off.Swap(true) {
			// The error text names the endpoint and a status, no content.
			g.log.Warn("telemetry exporter disabled", "signal", g.name, "timeout", timeout)
		}
	}
}

type guardedMetrics struct {
	sdkmetric.Exporter
	g *guard
}

func (e *guardedMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if e.g.off.Load() {
		return nil
	}
	err := e.Exporter.Export(ctx, rm)
	e.g.done(err)
	return nil
}

// correlation is what a request may carry for telemetry: a W3C
// traceparent (version 00, non-zero ids, flags 00 or 01) and an
// AgenticDriver-Request-Id (a UUID, lowercased). Anything else is
// dropped; baggage and tracestate are never read.
func correlation(r *http.Request) (context.Context, string) {
	ctx := context.Background()
	if v := r.Header.Values("Traceparent"); len(v) == 1 {
		if sc, ok := parseTraceparent(v[0]); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	var id string
	if v := r.Header.Values("Agenticdriver-Request-Id"); len(v) == 1 && isUUID(v[0]) {
		id = strings.ToLower(v[0])
	}
	return ctx, id
}

// correlationOf is correlation(r), parsed once per request when w is the
// request's observation (obsWriter): a run request's host record and its
// run's trace both read it.
func correlationOf(w http.ResponseWriter, r *http.Request) (context.Context, string) {
	o, ok := w.(*obsWriter)
	if !ok {
		return correlation(r)
	}
	if !o.corrDone {
		o.corrCtx, o.corrID = correlation(r)
		o.corrDone = true
	}
	return o.corrCtx, o.corrID
}

func parseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(s[3:35])); err != nil || strings.ToLower(s) != s {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(s[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	switch s[53:] {
	case "00":
	case "01":
		flags = trace.FlagsSampled
	default:
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// hostRecord is one request's host record: the agenticdriver.host span and
// the operations/duration metrics.
func (t *Telemetry) hostRecord(w http.ResponseWriter, r *http.Request, kind, outcome int, start time.Time, d time.Duration) {
	ctx, reqID := correlationOf(w, r)
	t.ops[kind][outcome].Add(1)
	t.durs.record(kind, outcome, d)
	if sp := t.rec.start(trace.SpanContextFromContext(ctx), "agenticdriver.host", tracepb.Span_SPAN_KIND_SERVER, start); sp != nil {
		sp.setObservationID()
		sp.setStr(attrOperation, kindNames[kind])
		sp.setStr(attrOutcome, outcomeNames[outcome])
		if reqID != "" {
			sp.setStr(attrRequestID, reqID)
		}
		sp.setOK(outcome == outcomeCompleted || outcome == outcomeReplayed)
		t.rec.end(sp, start.Add(d))
	}
}

// runLog returns the EventLog that turns a run's events and stages
// (runtime.StageLog) into its spans: agenticdriver.run, and at level
// steps its queue, context, provider and tool children. A run that is not
// traced (sampled out, or past the bound on traced runs) still has its
// progress counted at level progress: metrics are not sampled. Nil when
// there is nothing to record.
func (t *Telemetry) runLog(w http.ResponseWriter, r *http.Request, req *runtimeRequest) runtime.EventLog {
	ctx, reqID := correlationOf(w, r)
	return t.startRun(ctx, reqID, "run", req)
}

// startRun starts the agenticdriver.run span of a run of operation kind
// op ("run", or "job" for a durable job's run) under ctx's remote parent.
func (t *Telemetry) startRun(ctx context.Context, reqID, op string, req *runtimeRequest) runtime.EventLog {
	var sp *span
	if t.active.Add(1) <= telActiveRuns {
		sp = t.rec.start(trace.SpanContextFromContext(ctx), "agenticdriver.run", tracepb.Span_SPAN_KIND_INTERNAL, time.Now())
	}
	if sp == nil {
		t.active.Add(-1)
		if t.level < levelProgress {
			return nil
		}
		// Untraced: only the progress counter (run nil: no spans).
		return typesOnlyTrace{&runTrace{t: t, op: op}}
	}
	sp.setObservationID()
	sp.setStr(attrOperation, op)
	if reqID != "" {
		sp.setStr(attrRequestID, reqID)
	}
	if t.names {
		sp.setStr(attrProvider, req.provider)
		sp.setStr(attrModel, req.model)
	}
	rt := &runTrace{t: t, run: sp, op: op, traced: true}
	if !t.names {
		return typesOnlyTrace{rt}
	}
	return rt
}

// typesOnlyTrace is the trace of a run when include_names is off: it reads
// only event types and the run id, so the engine does not encode the
// events of a JSON-mode run for it (runtime.TypesOnly). With names on, the
// tool spans need the tool's name from tool.called's data.
type typesOnlyTrace struct{ *runTrace }

func (typesOnlyTrace) TypesOnly() {}

// JobEngine returns the engine the durable-jobs service starts runs with:
// e itself without telemetry, else e with every job's run traced like a
// foreground run, as operation "job". The submit request's traceparent
// and AgenticDriver-Request-Id correlate its own host record only:
// headers are not persisted into jobs (wire-extensions §11.2), so a job's
// run, which may start after a restart or on a lease taken over, starts a
// trace of its own. (Metadata correlation, which would persist, is not
// offered: [diagnostics] has no metadata keys.)
func (t *Telemetry) JobEngine(e jobs.Engine) jobs.Engine {
	if t == nil {
		return e
	}
	return &tracedJobs{Engine: e, t: t}
}

type tracedJobs struct {
	jobs.Engine
	t *Telemetry
}

func (tj *tracedJobs) StartWith(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest, mode runtime.Mode, opts runtime.StartOptions) (*runtime.Run, error) {
	l := tj.t.startRun(context.Background(), "", "job", &runtimeRequest{provider: req.Provider, model: req.Model})
	if l != nil {
		// After the job's own log: the trace sees only what the job
		// committed.
		opts.Log = runtime.JoinLogs(opts.Log, l)
	}
	run, err := tj.Engine.StartWith(ctx, p, req, mode, opts)
	if err != nil && l != nil {
		tj.t.abandon(l)
	}
	return run, err
}

// runtimeRequest is what a run's trace may name (include_names only).
type runtimeRequest struct{ provider, model string }

// runTrace follows one run's committed events (runtime.EventLog). Append
// runs under the run's lock: it only starts and ends spans, which queue
// without blocking.
type runTrace struct {
	t              *Telemetry
	run            *span
	op             string  // the operation kind: run or job
	step, tool     *span   // the open provider and tool spans
	kids           *[]span // the ended children (≤ telSpansPerRun), queued with the run span
	spans, dropped int
	// progress counts the run's progress records by phase (progressPhases)
	// for the agenticdriver.progress counter, added at the run's end; now
	// is the phase the run is in.
	progress [3]int64
	now      int
	// traced: the run has a span (and counts in active); an untraced run
	// only counts its progress.
	traced bool
	mu     sync.Mutex
	ended  bool
}

// progressPhases are the phases of run.progress (wire-core §5): model
// while the provider works, tool while a tool runs, context while context
// is resolved (before the first step).
var progressPhases = [3]string{"model", "tool", "context"}

// Indexes of progressPhases. The phase of a progress record is the phase
// the run is in, followed from its events (rt.now): the event's own phase
// field is not read, since a JSON-mode run's events carry no data for
// telemetry (typesOnlyTrace).
const (
	phaseModel = iota
	phaseTool
	phaseContext
)

// child starts a child span of the run at at (level steps; nil past the
// bound on spans per run, counted in dropped_spans).
func (rt *runTrace) child(name string, kind tracepb.Span_SpanKind, at time.Time) *span {
	if rt.t.level < levelSteps || rt.run == nil {
		return nil
	}
	if rt.spans >= telSpansPerRun {
		rt.dropped++
		return nil
	}
	rt.spans++
	return rt.t.rec.start(rt.run.context(), name, kind, at)
}

// endSpan ends *s at at, if it is open, with status OK when ok: a step
// or tool that the run went on from is OK, one the run ended in is OK only
// when the run completed.
func (rt *runTrace) endSpan(s **span, ok bool, at time.Time) {
	if *s != nil {
		(*s).setOK(ok)
		rt.t.rec.endChild(*s, at, &rt.kids)
		*s = nil
	}
}

// endRun ends the run span at at and queues it with its children: the
// run's record. The trace records nothing more.
func (rt *runTrace) endRun(at time.Time) {
	rt.t.rec.endRecord(rt.run, at, &rt.kids)
	rt.run = nil
	rt.ended = true
	if rt.traced {
		rt.t.active.Add(-1)
	}
}

// Stage records a run's stages (runtime.StageLog) as its
// agenticdriver.queue and agenticdriver.context spans, at level steps:
// what the run spent waiting for admission, and resolving its selected
// context. A run admitted at once has no queue span and a run without
// context no context span, as a run that calls no tool has no tool span
// (§11.2 lists queue, provider, tool and context spans without saying
// whether an empty stage has one: a zero-length span of every unqueued
// run would say nothing an operator can use, and cost a fifth of a
// fixture run's spans). The status is OK unless the stage ended the run.
func (rt *runTrace) Stage(st runtime.Stage, start, end time.Time, ok bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return
	}
	name := "agenticdriver.queue"
	if st == runtime.StageContext {
		name = "agenticdriver.context"
	}
	if sp := rt.child(name, tracepb.Span_SPAN_KIND_INTERNAL, start); sp != nil {
		sp.setOK(ok)
		rt.t.rec.endChild(sp, end, &rt.kids)
	}
}

func (rt *runTrace) Append(_ context.Context, ev runtime.Event) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return nil
	}
	// Spans begin and end at their events' own times (ev.At, what the
	// events' timestamps say), which also spares a clock read each.
	at := ev.At
	if at.IsZero() {
		at = time.Now()
	}
	switch ev.Type {
	case runtime.EventRunStarted:
		if isUUID(ev.RunID) {
			rt.run.setStr(attrRunID, ev.RunID)
		}
		// Admitted (or queued: Stage reports the wait), no step yet:
		// context resolution.
		rt.now = phaseContext
	case runtime.EventStepStarted:
		rt.now = phaseModel
		rt.endSpan(&rt.step, true, at)
		rt.step = rt.child("agenticdriver.provider", tracepb.Span_SPAN_KIND_CLIENT, at)
	case runtime.EventUsageReported:
		rt.endSpan(&rt.step, true, at)
	case runtime.EventToolCalled:
		rt.endSpan(&rt.step, true, at)
		rt.endSpan(&rt.tool, true, at)
		rt.tool = rt.child("agenticdriver.tool", tracepb.Span_SPAN_KIND_INTERNAL, at)
		rt.now = phaseTool
		if rt.tool != nil && rt.t.names {
			rt.tool.setStr(attrName, toolNameOf(ev.Data))
		}
	case runtime.EventToolCompleted:
		rt.endSpan(&rt.tool, true, at)
		rt.now = phaseModel
	case runtime.EventRunProgress:
		if rt.t.level >= levelProgress {
			rt.progress[rt.now]++
		}
	case runtime.EventRunCompleted, runtime.EventRunFailed, runtime.EventRunCancelled:
		completed := ev.Type == runtime.EventRunCompleted
		rt.endSpan(&rt.step, completed, at)
		rt.endSpan(&rt.tool, completed, at)
		outcome := "cancelled"
		switch ev.Type {
		case runtime.EventRunCompleted:
			outcome = "completed"
		case runtime.EventRunFailed:
			outcome = "failed"
		}
		rt.run.setStr(attrOutcome, outcome)
		rt.run.setInt(attrDroppedSpans, int64(rt.dropped))
		rt.run.setOK(completed)
		// agenticdriver.progress has the dimensions kind, outcome and phase
		// (wire-extensions §11.2): a progress record's outcome is its
		// run's, known only now, so the run's records are counted at its
		// end (an unconfirmed reading; the records themselves are
		// rate-limited by the engine, ≤ 1 a second).
		for i, n := range rt.progress {
			if n > 0 {
				rt.t.prog.Add(context.Background(), n, metric.WithAttributes(
					attribute.String("kind", rt.op), attribute.String("outcome", outcome), attribute.String("phase", progressPhases[i])))
			}
		}
		rt.endRun(at)
	}
	return nil
}

// toolNameOf reads only the tool name of a tool.called event.
func toolNameOf(data []byte) string {
	var v struct {
		Call struct {
			Name string `json:"name"`
		} `json:"call"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Call.Name
}

// abandon ends the trace of a run that did not start (the request was
// refused before run.started).
func (t *Telemetry) abandon(l runtime.EventLog) {
	var rt *runTrace
	switch l := l.(type) {
	case *runTrace:
		rt = l
	case typesOnlyTrace:
		rt = l.runTrace
	default:
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return
	}
	rt.run.setStr(attrOutcome, "rejected")
	rt.run.setOK(false)
	rt.endRun(time.Now())
}

// traceRun adds the run's trace to opts when telemetry is on and returns
// it (nil: none); endTrace is called with it and the Start error.
func (s *Server) traceRun(w http.ResponseWriter, r *http.Request, req *runtimeRequest, opts *runtime.StartOptions) runtime.EventLog {
	if s.tel == nil {
		return nil
	}
	l := s.tel.runLog(w, r, req)
	if l != nil {
		opts.Log = runtime.JoinLogs(opts.Log, l)
	}
	return l
}

// endTrace ends the trace l of a run whose Start failed (err non-nil):
// it never began. A started run's trace ends with its terminal event.
func (s *Server) endTrace(l runtime.EventLog, err error) {
	if err != nil && l != nil {
		s.tel.abandon(l)
	}
}

// DroppedSpans counts the spans dropped at the telemetry queue's bounds
// (0 without telemetry).
func (t *Telemetry) DroppedSpans() int64 {
	if t == nil {
		return 0
	}
	return t.spans.Dropped()
}

var descTelemetryDropped = prometheus.NewDesc("adhost_telemetry_dropped_total",
	"Telemetry dropped at a bound of wire-extensions §11.2 (signal spans: the spans of the records the export queue dropped at its 128 records or 2,000,000 bytes); execution never waits on telemetry.",
	[]string{"signal"}, nil)

// collectTelemetry adds the telemetry's own series to a scrape of s's
// metrics (zero while telemetry is off).
func collectTelemetry(s *Server, ch chan<- prometheus.Metric) {
	var dropped int64
	if s != nil {
		dropped = s.tel.DroppedSpans()
	}
	ch <- prometheus.MustNewConstMetric(descTelemetryDropped, prometheus.CounterValue, float64(dropped), "spans")
}
