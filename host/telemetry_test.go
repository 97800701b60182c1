package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"adhost/host/config"
	"adhost/runtime"
)

func TestTelemetryGuard(t *testing.T) {
	g := newGuard("traces", slog.New(slog.DiscardHandler))
	boom := errors.New("500")
	g.done(boom)
	g.done(boom)
	g.done(nil) // a success resets the run of failures
	g.done(boom)
	g.done(boom)
	if g.off.Load() {
		t.Fatal("off after two failures in a row")
	}
	g.done(boom)
	if !g.off.Load() {
		t.Fatal("still on after three failures in a row")
	}
	g = newGuard("metrics", slog.New(slog.DiscardHandler))
	g.done(context.DeadlineExceeded)
	if !g.off.Load() {
		t.Fatal("still on after a timeout")
	}
}

func TestCorrelation(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		traceparent string
		ok          bool
	}{
		{tp, true},
		{strings.Replace(tp, "-01", "-00", 1), true},
		{strings.Replace(tp, "-01", "-02", 1), false},
		{"01" + tp[2:], false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{strings.ToUpper(tp), false},
		{tp + "-x", false},
		{"", false},
	} {
		_, ok := parseTraceparent(tc.traceparent)
		if ok != tc.ok {
			t.Errorf("%q: %v, want %v", tc.traceparent, ok, tc.ok)
		}
	}
	r, _ := http.NewRequest("POST", "/v1/runs", nil)
	r.Header.Set("AgenticDriver-Request-Id", "6F9619FF-8B86-4011-B42D-00C04FC964FF")
	if _, id := correlation(r); id != "6f9619ff-8b86-4011-b42d-00c04fc964ff" {
		t.Errorf("request id %q", id)
	}
	r.Header.Set("AgenticDriver-Request-Id", "not-a-uuid")
	if _, id := correlation(r); id != "" {
		t.Errorf("invalid request id kept: %q", id)
	}
}

func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x")
	f.Fuzz(func(t *testing.T, s string) {
		sc, ok := parseTraceparent(s)
		if ok && (!sc.IsValid() || !sc.IsRemote() || len(s) != 55 || strings.ToLower(s) != s) {
			t.Fatalf("%q accepted as %v", s, sc)
		}
	})
}

// countingSpans is an exporter that counts what it is sent and keeps the
// last batch.
type countingSpans struct {
	mu    sync.Mutex
	n     int // spans exported
	calls int // exports
	last  []span
	check func([]span) // if set, sees every batch
}

func (c *countingSpans) export(_ context.Context, b []span) error {
	c.mu.Lock()
	c.n += len(b)
	c.calls++
	c.last = append(c.last[:0], b...)
	if c.check != nil {
		c.check(b)
	}
	c.mu.Unlock()
	return nil
}

func (c *countingSpans) shutdown(context.Context) error { return nil }

// paddedSpan ends one span whose estimated encoding is exactly size bytes.
func paddedSpan(t *testing.T, r *spanRecorder, size int) {
	t.Helper()
	base := (&span{name: "s", nattrs: 1, attrs: [maxSpanAttrs]spanAttr{{key: attrName}}}).size()
	if size < base {
		t.Fatalf("span of %d bytes: the smallest is %d", size, base)
	}
	s := r.start(trace.SpanContext{}, "s", tracepb.Span_SPAN_KIND_INTERNAL, time.Now())
	s.setStr(attrName, strings.Repeat("x", size-base))
	if got := s.size(); got != size {
		t.Fatalf("padded span: %d bytes, want %d", got, size)
	}
	r.end(s, time.Now())
}

// testSpanQueue is a queue of the default bounds exporting to a
// countingSpans, with a recorder that samples everything; no batch fills
// and no tick comes while a test fills it (it exports on ForceFlush).
func testSpanQueue(t *testing.T) (*spanQueue, *countingSpans, *spanRecorder) {
	exp := &countingSpans{}
	q := newSpanQueue(exp, telQueueRecords, telQueueBytes, 1<<20, time.Hour)
	t.Cleanup(func() { _ = q.Shutdown(context.Background()) })
	return q, exp, newSpanRecorder(1, q)
}

// TestSpanQueueBounds: the telemetry queue holds exactly 2,000,000 bytes
// and exactly 128 records (wire-extensions §11.2 defaults); the next span
// is dropped and counted, and what was queued is exported whole.
func TestSpanQueueBounds(t *testing.T) {
	q, exp, r := testSpanQueue(t)
	const size = telQueueBytes / 100 // 100 spans fill the byte bound
	for range 100 {
		paddedSpan(t, r, size)
	}
	if q.Dropped() != 0 || q.bytes != telQueueBytes {
		t.Fatalf("at the byte bound: dropped %d, %d bytes queued", q.Dropped(), q.bytes)
	}
	r.end(r.start(trace.SpanContext{}, "one more", tracepb.Span_SPAN_KIND_INTERNAL, time.Now()), time.Now())
	if q.Dropped() != 1 || len(q.q) != 100 {
		t.Fatalf("one span past the byte bound: dropped %d, %d queued", q.Dropped(), len(q.q))
	}
	if err := q.ForceFlush(context.Background()); err != nil || exp.n != 100 || q.bytes != 0 {
		t.Fatalf("flush: %v, exported %d, %d bytes left", err, exp.n, q.bytes)
	}

	q, exp, r = testSpanQueue(t)
	for range telQueueRecords {
		paddedSpan(t, r, 200)
	}
	if q.Dropped() != 0 {
		t.Fatalf("at the record bound: dropped %d", q.Dropped())
	}
	paddedSpan(t, r, 200)
	if q.Dropped() != 1 || len(q.q) != telQueueRecords {
		t.Fatalf("one span past the record bound: dropped %d, %d queued", q.Dropped(), len(q.q))
	}
	if err := q.Shutdown(context.Background()); err != nil || exp.n != telQueueRecords {
		t.Fatalf("shutdown: %v, exported %d", err, exp.n)
	}
	paddedSpan(t, r, 200) // after shutdown: dropped, never a panic
}

// TestSpanQueueBatches: a full batch is exported without waiting for the
// interval.
func TestSpanQueueBatches(t *testing.T) {
	exp := &countingSpans{}
	q := newSpanQueue(exp, telQueueRecords, telQueueBytes, telBatch, time.Hour)
	defer q.Shutdown(context.Background())
	r := newSpanRecorder(1, q)
	for range telBatch {
		r.end(r.start(trace.SpanContext{}, "s", tracepb.Span_SPAN_KIND_INTERNAL, time.Now()), time.Now())
	}
	waitExported(t, exp, telBatch)
}

// TestSpanRecords: a span keeps its parent, ids, kind, times, status and
// attributes through the queue into OTLP protobuf; a child of a remote
// parent shares its trace; a span whose trace is sampled out is never
// recorded, and its methods do nothing.
func TestSpanRecords(t *testing.T) {
	q, exp, r := testSpanQueue(t)
	parent, ok := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if !ok {
		t.Fatal("traceparent")
	}
	t0 := time.Unix(1_700_000_000, 5)
	run := r.start(parent, "agenticdriver.run", tracepb.Span_SPAN_KIND_INTERNAL, t0)
	run.setStr(attrOperation, "run")
	run.setStr(attrOperation, "job") // replaced, not added
	run.setInt(attrDroppedSpans, 3)
	run.setOK(true)
	child := r.start(run.context(), "agenticdriver.provider", tracepb.Span_SPAN_KIND_CLIENT, t0)
	child.setOK(false)
	r.end(child, t0.Add(time.Millisecond))
	r.end(run, t0.Add(2*time.Millisecond))
	if err := q.ForceFlush(context.Background()); err != nil || len(exp.last) != 2 {
		t.Fatalf("flush: %v, %d spans", err, len(exp.last))
	}
	pbs := decodeBatch(t, new(spanEncoder), exp.last)
	c, p := pbs[0], pbs[1]
	if fmt.Sprintf("%x", p.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || fmt.Sprintf("%x", p.ParentSpanId) != "00f067aa0ba902b7" {
		t.Errorf("run span: trace %x parent %x, want the traceparent's", p.TraceId, p.ParentSpanId)
	}
	if !bytes.Equal(c.TraceId, p.TraceId) || !bytes.Equal(c.ParentSpanId, p.SpanId) || bytes.Equal(c.SpanId, p.SpanId) {
		t.Errorf("child: trace %x parent %x id %x; run id %x", c.TraceId, c.ParentSpanId, c.SpanId, p.SpanId)
	}
	if p.Name != "agenticdriver.run" || p.Kind != tracepb.Span_SPAN_KIND_INTERNAL || c.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
		p.Status.Code != tracepb.Status_STATUS_CODE_OK || c.Status.Code != tracepb.Status_STATUS_CODE_ERROR ||
		p.StartTimeUnixNano != uint64(t0.UnixNano()) || p.EndTimeUnixNano != uint64(t0.Add(2*time.Millisecond).UnixNano()) {
		t.Errorf("run span %v, child %v", p, c)
	}
	if len(p.Attributes) != 2 || p.Attributes[0].Value.GetStringValue() != "job" || p.Attributes[1].Value.GetIntValue() != 3 {
		t.Errorf("run attributes %v", p.Attributes)
	}

	none := newSpanRecorder(0, q)
	s := none.start(trace.SpanContext{}, "x", tracepb.Span_SPAN_KIND_INTERNAL, t0)
	if s != nil {
		t.Fatal("sample rate 0 recorded a span")
	}
	s.setStr(attrName, "v")
	s.setOK(true)
	none.end(s, t0)
	if q.Dropped() != 0 || len(q.q) != 0 {
		t.Errorf("a sampled-out span reached the queue")
	}
	// About half of all traces at rate 0.5 (the ratio sampler on the
	// trace id, as the SDK's TraceIDRatioBased).
	half, kept := newSpanRecorder(0.5, q), 0
	for range 2000 {
		if sp := half.start(trace.SpanContext{}, "x", tracepb.Span_SPAN_KIND_INTERNAL, t0); sp != nil {
			kept++
		}
	}
	if kept < 800 || kept > 1200 {
		t.Errorf("rate 0.5 kept %d of 2000", kept)
	}
}

// TestProgressUntraced: at level progress, a run whose trace is sampled
// out still counts its progress records (metrics are not sampled), by the
// phase the run was in, and leaves no span and no active-run count.
func TestProgressUntraced(t *testing.T) {
	zero := 0.0
	tel, err := NewTelemetry(&config.Diagnostics{OTLPEndpoint: "http://127.0.0.1:9", Level: "progress", SampleRate: &zero, ExportIntervalMs: 60000}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	l := tel.startRun(context.Background(), "", "run", &runtimeRequest{})
	if l == nil {
		t.Fatal("no log for an untraced run at level progress")
	}
	for _, typ := range []string{runtime.EventRunStarted, runtime.EventRunProgress, runtime.EventStepStarted, runtime.EventRunProgress,
		runtime.EventToolCalled, runtime.EventRunProgress, runtime.EventRunProgress, runtime.EventToolCompleted, runtime.EventRunCompleted} {
		_ = l.Append(context.Background(), runtime.Event{Type: typ})
	}
	rt := l.(typesOnlyTrace).runTrace
	if rt.progress != [3]int64{phaseModel: 1, phaseTool: 2, phaseContext: 1} {
		t.Errorf("progress by phase %v, want model 1, tool 2, context 1", rt.progress)
	}
	if n := tel.active.Load(); n != 0 {
		t.Errorf("active runs %d after an untraced run", n)
	}
	if n := len(tel.spans.q); n != 0 {
		t.Errorf("%d spans queued for a sampled-out run", n)
	}
}

// decodeBatch exports batch through enc as otlpSpans does and decodes the
// marshalled request back: the spans of its one ResourceSpans, after
// checking the adhost resource and scope.
func decodeBatch(t *testing.T, enc *spanEncoder, batch []span) []*tracepb.Span {
	t.Helper()
	var rs tracepb.ResourceSpans
	rs.ProtoReflect().SetUnknown(enc.resourceSpans(batch))
	raw, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{&rs}})
	if err != nil {
		t.Fatal(err)
	}
	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ResourceSpans) != 1 || len(got.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("batch of %d: %v", len(batch), &got)
	}
	r := got.ResourceSpans[0]
	if a := r.Resource.GetAttributes(); len(a) != 1 || a[0].Key != "service.name" || a[0].Value.GetStringValue() != "adhost" ||
		r.ScopeSpans[0].Scope.GetName() != "adhost" || len(r.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("resource %v, scope %v", r.Resource, r.ScopeSpans[0].Scope)
	}
	return r.ScopeSpans[0].Spans
}

// referenceSpan is s built as the SDK's messages, field by field: what
// the encoder's bytes must decode to.
func referenceSpan(s *span) *tracepb.Span {
	p := &tracepb.Span{
		TraceId:           slices.Clone(s.traceID[:]),
		SpanId:            slices.Clone(s.spanID[:]),
		Name:              s.name,
		Kind:              s.kind,
		StartTimeUnixNano: uint64(max(s.start, 0)),
		EndTimeUnixNano:   uint64(max(s.end, 0)),
		Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR},
		Flags:             uint32(trace.FlagsSampled),
	}
	if s.parentID != ([8]byte{}) {
		p.ParentSpanId = slices.Clone(s.parentID[:])
	}
	if s.ok {
		p.Status.Code = tracepb.Status_STATUS_CODE_OK
	}
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	if s.hasObs {
		p.Attributes = append(p.Attributes, str("agenticdriver.observation_id", string(appendUUID(nil, &s.obs))))
	}
	for _, a := range s.attrs[:s.nattrs] {
		if a.isInt {
			p.Attributes = append(p.Attributes, &commonpb.KeyValue{Key: attrNames[a.key], Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: a.num}}})
		} else {
			p.Attributes = append(p.Attributes, str(attrNames[a.key], a.str))
		}
	}
	return p
}

// TestSpanEncoder: batches written one after another by the same encoder
// (its buffer reused, a smaller batch after a larger one) each decode to
// exactly the messages of their own spans — ids, parent, name, kind,
// times, status, flags, string and integer attributes (each name of the
// allow-list; values empty, long, negative, large) — with a distinct version-4 observation id where one
// was set.
func TestSpanEncoder(t *testing.T) {
	q, exp, r := testSpanQueue(t)
	parent, _ := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ints := []int64{0, 1, -1, 127, 128, 1 << 40, -1 << 62}
	batch := func(n int, withObs bool) []span {
		t.Helper()
		for i := range n {
			p := trace.SpanContext{}
			if i%3 == 1 {
				p = parent
			}
			start := time.Unix(int64(i), 7)
			if i == 2 {
				start = time.Unix(0, 0) // a zero time: the field left out
			}
			s := r.start(p, fmt.Sprintf("s%d", i), tracepb.Span_SpanKind(1+i%3), start)
			if withObs {
				s.setObservationID()
			}
			s.setStr(attrOutcome, strings.Repeat("o", i*7)) // "" first, past 127 bytes later
			s.setInt(attrDroppedSpans, ints[i%len(ints)])
			if i == 3 {
				// Every name of the allow-list (as many as a span holds).
				for k := range attrKey(maxSpanAttrs) {
					s.setStr(numAttrKeys-1-k, attrNames[numAttrKeys-1-k])
				}
			}
			s.setOK(i%2 == 0)
			r.end(s, time.Unix(int64(i)+1, 0))
		}
		if err := q.ForceFlush(context.Background()); err != nil || len(exp.last) != n {
			t.Fatalf("flush: %v, %d spans, want %d", err, len(exp.last), n)
		}
		return slices.Clone(exp.last)
	}
	var enc spanEncoder
	for _, tc := range []struct {
		n   int
		obs bool
	}{{telBatch, true}, {3, false}, {5, true}} {
		spans := batch(tc.n, tc.obs)
		pbs := decodeBatch(t, &enc, spans)
		if len(pbs) != tc.n {
			t.Fatalf("batch of %d decoded as %d spans", tc.n, len(pbs))
		}
		seen := map[string]bool{}
		for i, p := range pbs {
			if want := referenceSpan(&spans[i]); !proto.Equal(p, want) {
				t.Errorf("span %d of %d:\n got %v\nwant %v", i, tc.n, p, want)
			}
			if !tc.obs {
				continue
			}
			id := p.Attributes[0].Value.GetStringValue()
			if !isUUID(id) || strings.ToLower(id) != id || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
				t.Errorf("span %d: observation id %q (a new version-4 UUID)", i, id)
			}
			seen[id] = true
		}
	}
}

// TestSpanExportGuard: through the real OTLP client, one export that
// outlives the export timeout switches span export off, and so do three
// failed exports in a row; nothing is sent after that, and nothing is
// retried.
func TestSpanExportGuard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter, r *http.Request)
		exports int // exports until off
	}{
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * telTimeout): // past the export timeout
			}
		}, 1},
		{"failures", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusInternalServerError) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			posts := 0
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/traces" {
					mu.Lock()
					posts++
					mu.Unlock()
				}
				tc.handler(w, r)
			}))
			defer recv.Close()
			tel, err := NewTelemetry(&config.Diagnostics{OTLPEndpoint: recv.URL, Level: "steps", ExportIntervalMs: 3_600_000}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			g := tel.spans.exp.(*guardedSpans).g
			for i := range tc.exports + 2 {
				if g.off.Load() != (i >= tc.exports) {
					t.Fatalf("after %d exports: off %v", i, g.off.Load())
				}
				tel.rec.end(tel.rec.start(trace.SpanContext{}, "agenticdriver.run", tracepb.Span_SPAN_KIND_INTERNAL, time.Now()), time.Now())
				start := time.Now()
				_ = tel.spans.ForceFlush(context.Background())
				if d := time.Since(start); d > telTimeout+time.Second {
					t.Fatalf("an export took %v (timeout %v)", d, telTimeout)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if posts != tc.exports {
				t.Errorf("%d requests sent, want %d (none after the exporter is off, none retried)", posts, tc.exports)
			}
		})
	}
}

// TestOperationsMetric: host records reach the OTLP metrics export as
// agenticdriver.operations, a monotonic cumulative sum (unit 1) with a
// point per kind and outcome seen and none for the others, next to the
// agenticdriver.duration histogram with the same counts: cumulative, in
// ms, in the SDK's default buckets (a value on a bound counts in that
// bound's bucket), with its sum, min and max.
func TestOperationsMetric(t *testing.T) {
	var mu sync.Mutex
	var last []byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/metrics" {
			mu.Lock()
			last = b
			mu.Unlock()
		}
	}))
	defer recv.Close()
	tel, err := NewTelemetry(&config.Diagnostics{OTLPEndpoint: recv.URL, Level: "summary", ExportIntervalMs: 3_600_000}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	r, _ := http.NewRequest("POST", "/v1/runs", nil)
	for _, rec := range []struct {
		kind, outcome int
		d             time.Duration
	}{{kindRun, outcomeCompleted, time.Millisecond}, {kindRun, outcomeCompleted, 5 * time.Millisecond}, {kindJob, outcomeRejected, 20 * time.Second}} {
		tel.hostRecord(nil, r, rec.kind, rec.outcome, time.Now(), rec.d)
	}
	var runHist *metricpb.HistogramDataPoint // run/completed's, at the last check
	check := func(want map[string]int64) {
		t.Helper()
		if err := tel.mp.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(last, &req); err != nil {
			t.Fatal(err)
		}
		ops, durs := map[string]int64{}, map[string]int64{}
		key := func(attrs []*commonpb.KeyValue) string {
			d := map[string]string{}
			for _, kv := range attrs {
				d[kv.Key] = kv.Value.GetStringValue()
			}
			return d["kind"] + "/" + d["outcome"] + "/" + d["phase"]
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					switch m.Name {
					case "agenticdriver.operations":
						s := m.GetSum()
						if m.Unit != "1" || !s.GetIsMonotonic() || s.GetAggregationTemporality() != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
							t.Errorf("operations: unit %q, %v", m.Unit, s)
						}
						for _, dp := range s.GetDataPoints() {
							ops[key(dp.Attributes)] = dp.GetAsInt()
						}
					case "agenticdriver.duration":
						h := m.GetHistogram()
						if m.Unit != "ms" || h.GetAggregationTemporality() != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
							t.Errorf("duration: unit %q, %v", m.Unit, h.GetAggregationTemporality())
						}
						for _, dp := range h.GetDataPoints() {
							durs[key(dp.Attributes)] = int64(dp.GetCount())
							if key(dp.Attributes) == "run/completed/total" {
								runHist = dp
							}
						}
					}
				}
			}
		}
		if fmt.Sprint(ops) != fmt.Sprint(want) || fmt.Sprint(durs) != fmt.Sprint(want) {
			t.Errorf("operations %v, duration counts %v; want %v", ops, durs, want)
		}
	}
	check(map[string]int64{"run/completed/total": 2, "job/rejected/total": 1})
	tel.hostRecord(nil, r, kindRun, outcomeCompleted, time.Now(), 10*time.Second+time.Microsecond)
	check(map[string]int64{"run/completed/total": 3, "job/rejected/total": 1}) // cumulative
	// 1 ms in (0, 5], 5 ms on the bound 5, 10,000.001 ms past the last.
	wantCounts := make([]uint64, len(durBounds)+1)
	wantCounts[1], wantCounts[len(durBounds)] = 2, 1
	if runHist == nil || fmt.Sprint(runHist.BucketCounts) != fmt.Sprint(wantCounts) || fmt.Sprint(runHist.ExplicitBounds) != fmt.Sprint(durBounds[:]) ||
		runHist.GetSum() != 10006.001 || runHist.GetMin() != 1 || runHist.GetMax() != 10000.001 {
		t.Errorf("run/completed duration %v, want buckets %v, sum 10006.001, min 1, max 10000.001", runHist, wantCounts)
	}
}

// TestDurationsConcurrent: the duration histogram counts every value
// recorded at once from many goroutines exactly once, with their sum,
// min and max.
func TestDurationsConcurrent(t *testing.T) {
	var sets [numKinds][numOutcomes]attribute.Set
	ds := newDurations(sets)
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ds.record(kindRun, outcomeFailed, time.Duration(1+w*each+i)*time.Millisecond)
			}
		})
	}
	wg.Wait()
	sm, err := ds.Produce(context.Background())
	if err != nil || len(sm) != 1 {
		t.Fatalf("produce: %v, %d scopes", err, len(sm))
	}
	pts := sm[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints
	const n = workers * each
	if len(pts) != 1 || pts[0].Count != n || pts[0].Sum != n*(n+1)/2 {
		t.Fatalf("points %+v: want one of %d values summing to %d", pts, n, n*(n+1)/2)
	}
	if lo, _ := pts[0].Min.Value(); lo != 1 {
		t.Errorf("min %v, want 1", lo)
	}
	if hi, _ := pts[0].Max.Value(); hi != n {
		t.Errorf("max %v, want %d", hi, n)
	}
}

// TestRunTraceStages: at level steps a run's spans follow its events and
// stages. A run admitted at once, without context, has no queue or
// context span; a queued run with context has both, with the stages'
// times; a run cancelled in the queue has an ERROR queue span. Every
// child is the run span's child in its trace, OK when the run went on
// from it or completed, ERROR when the run failed or was cancelled in
// it.
func TestRunTraceStages(t *testing.T) {
	tel, err := NewTelemetry(&config.Diagnostics{OTLPEndpoint: "http://127.0.0.1:9", Level: "steps", ExportIntervalMs: 60000}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	t0 := time.Now()
	t1, t2 := t0.Add(3*time.Millisecond), t0.Add(5*time.Millisecond)
	type step struct {
		ev    string        // an event type, or "" for a stage
		stage runtime.Stage // with ok and the times t0-t1 (queue), t1-t2 (context)
		ok    bool
	}
	// run replays steps into a new run's trace and returns the spans it
	// queued, by name (status OK: true), checking their parentage.
	run := func(steps []step) map[string][]bool {
		t.Helper()
		before := len(tel.spans.q)
		l := tel.startRun(context.Background(), "", "run", &runtimeRequest{})
		for _, s := range steps {
			if s.ev != "" {
				_ = l.Append(context.Background(), runtime.Event{Type: s.ev})
				continue
			}
			start, end := t0, t1
			if s.stage == runtime.StageContext {
				start, end = t1, t2
			}
			l.(runtime.StageLog).Stage(s.stage, start, end, s.ok)
		}
		got := map[string][]bool{}
		spans := tel.spans.q[before:]
		root := spans[len(spans)-1]
		if root.name != "agenticdriver.run" {
			t.Fatalf("last span %s, want the run's", root.name)
		}
		for _, s := range spans {
			got[s.name] = append(got[s.name], s.ok)
			if s.name == "agenticdriver.run" {
				continue
			}
			if s.traceID != root.traceID || s.parentID != root.spanID {
				t.Errorf("%s is not a child of the run span", s.name)
			}
			switch s.name {
			case "agenticdriver.queue":
				if s.start != t0.UnixNano() || s.end != t1.UnixNano() {
					t.Errorf("queue span %d-%d, want the wait's %d-%d", s.start, s.end, t0.UnixNano(), t1.UnixNano())
				}
			case "agenticdriver.context":
				if s.start != t1.UnixNano() || s.end != t2.UnixNano() {
					t.Errorf("context span %d-%d, want the resolution's %d-%d", s.start, s.end, t1.UnixNano(), t2.UnixNano())
				}
			}
		}
		return got
	}
	check := func(what string, got, want map[string][]bool) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: spans (name: status OK) %v, want %v", what, got, want)
		}
	}

	check("admitted at once, a tool call", run([]step{
		{ev: runtime.EventRunStarted}, {ev: runtime.EventStepStarted}, {ev: runtime.EventUsageReported},
		{ev: runtime.EventToolCalled}, {ev: runtime.EventToolCompleted},
		{ev: runtime.EventStepStarted}, {ev: runtime.EventUsageReported}, {ev: runtime.EventRunCompleted},
	}), map[string][]bool{"agenticdriver.provider": {true, true}, "agenticdriver.tool": {true}, "agenticdriver.run": {true}})
	check("queued, with context, failed in its step", run([]step{
		{ev: runtime.EventRunStarted}, {stage: runtime.StageQueue, ok: true}, {stage: runtime.StageContext, ok: true},
		{ev: runtime.EventStepStarted}, {ev: runtime.EventRunFailed},
	}), map[string][]bool{"agenticdriver.queue": {true}, "agenticdriver.context": {true}, "agenticdriver.provider": {false}, "agenticdriver.run": {false}})
	check("cancelled in the queue", run([]step{
		{ev: runtime.EventRunStarted}, {stage: runtime.StageQueue, ok: false}, {ev: runtime.EventRunCancelled},
	}), map[string][]bool{"agenticdriver.queue": {false}, "agenticdriver.run": {false}})
	check("context that failed", run([]step{
		{ev: runtime.EventRunStarted}, {stage: runtime.StageContext, ok: false}, {ev: runtime.EventRunFailed},
	}), map[string][]bool{"agenticdriver.context": {false}, "agenticdriver.run": {false}})

	// Spans begin and end at their events' times (Event.At).
	before := len(tel.spans.q)
	l := tel.startRun(context.Background(), "", "run", &runtimeRequest{})
	t3, t4, t5 := t0.Add(7*time.Millisecond), t0.Add(9*time.Millisecond), t0.Add(11*time.Millisecond)
	for _, ev := range []runtime.Event{{Type: runtime.EventRunStarted, At: t0}, {Type: runtime.EventStepStarted, At: t3},
		{Type: runtime.EventUsageReported, At: t4}, {Type: runtime.EventRunCompleted, At: t5}} {
		_ = l.Append(context.Background(), ev)
	}
	if spans := tel.spans.q[before:]; len(spans) != 2 || spans[0].start != t3.UnixNano() || spans[0].end != t4.UnixNano() || spans[1].end != t5.UnixNano() {
		t.Errorf("spans %+v: want the provider span from step.started to usage.reported, the run's ending at run.completed", spans)
	}
}

// runRecord ends, through r, a run span with n children as one record.
func runRecord(r *spanRecorder, n int) {
	root := r.start(trace.SpanContext{}, "agenticdriver.run", tracepb.Span_SPAN_KIND_INTERNAL, time.Now())
	var kids *[]span
	for range n {
		r.endChild(r.start(root.context(), "agenticdriver.provider", tracepb.Span_SPAN_KIND_CLIENT, time.Now()), time.Now(), &kids)
	}
	r.endRecord(root, time.Now(), &kids)
}

// TestSpanQueueRecords: the queue's bounds and batches count records — a
// run span with its children is one — not spans: 128 run records of four
// spans each fit, the next is dropped whole (its four spans counted); a
// batch is 64 records, and a record's spans are never split between two
// exports.
func TestSpanQueueRecords(t *testing.T) {
	q, exp, r := testSpanQueue(t)
	for range telQueueRecords {
		runRecord(r, 3)
	}
	if q.Dropped() != 0 || len(q.recs) != telQueueRecords || len(q.q) != 4*telQueueRecords {
		t.Fatalf("at the record bound: dropped %d, %d records of %d spans queued", q.Dropped(), len(q.recs), len(q.q))
	}
	runRecord(r, 3)
	if q.Dropped() != 4 || len(q.recs) != telQueueRecords {
		t.Fatalf("one record past the bound: dropped %d spans, %d records queued", q.Dropped(), len(q.recs))
	}
	if err := q.ForceFlush(context.Background()); err != nil || exp.n != 4*telQueueRecords || q.bytes != 0 {
		t.Fatalf("flush: %v, exported %d spans, %d bytes left", err, exp.n, q.bytes)
	}

	// Batches of 64 records, sent as each fills.
	exp = &countingSpans{}
	full := newSpanQueue(exp, telQueueRecords, telQueueBytes, telBatch, time.Hour)
	defer full.Shutdown(context.Background())
	r = newSpanRecorder(1, full)
	for range telBatch {
		runRecord(r, 3)
	}
	waitExported(t, exp, 4*telBatch)
	if exp.calls != 1 || len(exp.last) != 4*telBatch {
		t.Fatalf("a full batch of %d records: %d exports, the last of %d spans", telBatch, exp.calls, len(exp.last))
	}

	// Records of 1 to 5 spans, three to a batch: every export ends with
	// the run span of its last record.
	exp = &countingSpans{}
	three := newSpanQueue(exp, telQueueRecords, telQueueBytes, 3, time.Hour)
	defer three.Shutdown(context.Background())
	exp.check = func(b []span) {
		if b[len(b)-1].name != "agenticdriver.run" {
			t.Errorf("an export of %d spans ends inside a record", len(b))
		}
	}
	r = newSpanRecorder(1, three)
	total := 0
	for i := range 30 {
		runRecord(r, i%5)
		total += 1 + i%5
	}
	if err := three.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitExported(t, exp, total)
	if exp.calls != 10 {
		t.Errorf("30 records in batches of 3: %d exports", exp.calls)
	}
}

// waitExported waits until exp has exported n spans.
func waitExported(t *testing.T, exp *countingSpans, n int) {
	t.Helper()
	for i := 0; ; i++ {
		exp.mu.Lock()
		got := exp.n
		exp.mu.Unlock()
		if got == n {
			return
		}
		if i > 1000 {
			t.Fatalf("exported %d spans, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
