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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"adhost/host/config"
	"adhost/runtime"
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
	level   int // levelSummary, levelSteps, levelProgress
	names   bool
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider
	tracer  trace.Tracer
	ops     metric.Int64Counter
	dur     metric.Float64Histogram
	prog    metric.Int64Counter
	active  atomic.Int32 // runs being traced
	log     *slog.Logger
	opAttrs [numKinds][numOutcomes]metric.MeasurementOption
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
	telBatch        = 64
	telTimeout      = time.Second
)

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
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(base+"/v1/traces"),
		otlptracehttp.WithTimeout(telTimeout), otlptracehttp.WithRetry(noRetry))
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
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(rate)),
		sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(&guardedSpans{exp: texp, g: newGuard("traces", log)},
			sdktrace.WithMaxQueueSize(telQueueRecords), sdktrace.WithMaxExportBatchSize(telBatch),
			sdktrace.WithExportTimeout(telTimeout), sdktrace.WithBatchTimeout(time.Second))),
	)
	t.mp = sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&guardedMetrics{Exporter: mexp, g: newGuard("metrics", log)},
			sdkmetric.WithInterval(time.Duration(d.ExportIntervalMs)*time.Millisecond), sdkmetric.WithTimeout(telTimeout))),
	)
	t.tracer = t.tp.Tracer("adhost")
	m := t.mp.Meter("adhost")
	if t.ops, err = m.Int64Counter("agenticdriver.operations", metric.WithUnit("1")); err != nil {
		return nil, err
	}
	if t.dur, err = m.Float64Histogram("agenticdriver.duration", metric.WithUnit("ms")); err != nil {
		return nil, err
	}
	if t.prog, err = m.Int64Counter("agenticdriver.progress", metric.WithUnit("1")); err != nil {
		return nil, err
	}
	for k := range numKinds {
		for o := range numOutcomes {
			t.opAttrs[k][o] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("kind", kindNames[k]), attribute.String("outcome", outcomeNames[o]), attribute.String("phase", "total")))
		}
	}
	return t, nil
}

// Shutdown flushes what is queued (bounded by ctx) and stops the
// exporters.
func (t *Telemetry) Shutdown(ctx context.Context) {
	if t == nil {
		return
	}
	_ = t.tp.Shutdown(ctx)
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

type guardedSpans struct {
	exp sdktrace.SpanExporter
	g   *guard
}

func (e *guardedSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.g.off.Load() {
		return nil
	}
	err := e.exp.ExportSpans(ctx, spans)
	e.g.done(err)
	return nil // reported by the guard, not retried
}

func (e *guardedSpans) Shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

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
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// hostRecord is one request's host record: the agenticdriver.host span and
// the operations/duration metrics.
func (t *Telemetry) hostRecord(r *http.Request, kind, outcome int, start time.Time, d time.Duration) {
	ctx, reqID := correlation(r)
	opt := t.opAttrs[kind][outcome]
	t.ops.Add(ctx, 1, opt)
	t.dur.Record(ctx, float64(d)/float64(time.Millisecond), opt)
	_, span := t.tracer.Start(ctx, "agenticdriver.host", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{
			attribute.String("agenticdriver.observation_id", newObservationID()),
			attribute.String("agenticdriver.operation", kindNames[kind]),
			attribute.String("agenticdriver.outcome", outcomeNames[outcome]),
		}
		if reqID != "" {
			attrs = append(attrs, attribute.String("agenticdriver.request_id", reqID))
		}
		span.SetAttributes(attrs...)
		if outcome == outcomeCompleted {
			span.SetStatus(codes.Ok, "")
		} else {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End(trace.WithTimestamp(start.Add(d)))
}

// runLog returns the EventLog that turns a run's events into its spans:
// agenticdriver.run, and at level steps its queue, provider and tool
// children. Nil when the run is not traced (sampled out, or the bound on
// traced runs is reached).
func (t *Telemetry) runLog(r *http.Request, req *runtimeRequest) runtime.EventLog {
	ctx, reqID := correlation(r)
	if t.active.Add(1) > telActiveRuns {
		t.active.Add(-1)
		return nil
	}
	ctx, span := t.tracer.Start(ctx, "agenticdriver.run", trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		span.End()
		t.active.Add(-1)
		return nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("agenticdriver.observation_id", newObservationID()),
		attribute.String("agenticdriver.operation", "run"),
	}
	if reqID != "" {
		attrs = append(attrs, attribute.String("agenticdriver.request_id", reqID))
	}
	if t.names {
		attrs = append(attrs, attribute.String("agenticdriver.provider", req.provider), attribute.String("agenticdriver.model", req.model))
	}
	span.SetAttributes(attrs...)
	return &runTrace{t: t, ctx: ctx, run: span}
}

// runtimeRequest is what a run's trace may name (include_names only).
type runtimeRequest struct{ provider, model string }

// runTrace follows one run's committed events (runtime.EventLog). Append
// runs under the run's lock: it only starts and ends spans, which queue
// without blocking.
type runTrace struct {
	t                 *Telemetry
	ctx               context.Context
	run               trace.Span
	queue, step, tool trace.Span
	spans, dropped    int
	mu                sync.Mutex
	ended             bool
}

func (rt *runTrace) child(name string, kind trace.SpanKind) trace.Span {
	if rt.t.level < levelSteps {
		return nil
	}
	if rt.spans >= telSpansPerRun {
		rt.dropped++
		return nil
	}
	rt.spans++
	_, s := rt.t.tracer.Start(rt.ctx, name, trace.WithSpanKind(kind))
	return s
}

func endSpan(s *trace.Span) {
	if *s != nil {
		(*s).End()
		*s = nil
	}
}

func (rt *runTrace) Append(_ context.Context, ev runtime.Event) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return nil
	}
	switch ev.Type {
	case runtime.EventRunStarted:
		rt.run.SetAttributes(attribute.String("agenticdriver.run_id", runIDOf(ev.Data)))
		rt.queue = rt.child("agenticdriver.queue", trace.SpanKindInternal)
	case runtime.EventStepStarted:
		endSpan(&rt.queue)
		endSpan(&rt.step)
		rt.step = rt.child("agenticdriver.provider", trace.SpanKindClient)
	case runtime.EventUsageReported:
		endSpan(&rt.step)
	case runtime.EventToolCalled:
		endSpan(&rt.step)
		endSpan(&rt.tool)
		rt.tool = rt.child("agenticdriver.tool", trace.SpanKindInternal)
		if rt.tool != nil && rt.t.names {
			rt.tool.SetAttributes(attribute.String("agenticdriver.name", toolNameOf(ev.Data)))
		}
	case runtime.EventToolCompleted:
		endSpan(&rt.tool)
	case runtime.EventRunProgress:
		if rt.t.level >= levelProgress {
			rt.t.prog.Add(context.Background(), 1)
		}
	case runtime.EventRunCompleted, runtime.EventRunFailed, runtime.EventRunCancelled:
		endSpan(&rt.queue)
		endSpan(&rt.step)
		endSpan(&rt.tool)
		outcome := map[string]string{runtime.EventRunCompleted: "completed", runtime.EventRunFailed: "failed", runtime.EventRunCancelled: "cancelled"}[ev.Type]
		rt.run.SetAttributes(attribute.String("agenticdriver.outcome", outcome), attribute.Int("agenticdriver.dropped_spans", rt.dropped))
		if ev.Type == runtime.EventRunCompleted {
			rt.run.SetStatus(codes.Ok, "")
		} else {
			rt.run.SetStatus(codes.Error, "")
		}
		rt.run.End()
		rt.ended = true
		rt.t.active.Add(-1)
	}
	return nil
}

// runIDOf reads the runId of an event's JSON (a UUID the engine made).
func runIDOf(data []byte) string {
	var v struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(data, &v)
	if !isUUID(v.RunID) {
		return ""
	}
	return v.RunID
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

func newObservationID() string { return cliRandomUUID() }

// abandon ends the trace of a run that did not start (the request was
// refused before run.started).
func (t *Telemetry) abandon(l runtime.EventLog) {
	rt, ok := l.(*runTrace)
	if !ok {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return
	}
	rt.run.SetAttributes(attribute.String("agenticdriver.outcome", "rejected"))
	rt.run.SetStatus(codes.Error, "")
	rt.run.End()
	rt.ended = true
	t.active.Add(-1)
}

// traceRun adds the run's trace to opts when telemetry is on; the returned
// function is called with the Start error (nil: started).
func (s *Server) traceRun(r *http.Request, req *runtimeRequest, opts *runtime.StartOptions) func(error) {
	if s.tel == nil {
		return func(error) {}
	}
	l := s.tel.runLog(r, req)
	if l == nil {
		return func(error) {}
	}
	opts.Log = runtime.JoinLogs(opts.Log, l)
	return func(err error) {
		if err != nil {
			s.tel.abandon(l)
		}
	}
}
