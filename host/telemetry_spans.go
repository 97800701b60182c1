package host

import (
	"context"
	"encoding/binary"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The host records its spans itself and sends them with the OpenTelemetry
// SDK's OTLP/HTTP trace client (otlptrace.Client), instead of going
// through the SDK's tracer and span processor.
//
// Why: every span here comes from a fixed allow-list of names and at most
// eight attributes (§11.2), and most runs are short. Through the SDK a
// span cost about five allocations and 2.5 µs to start, attribute, end and
// snapshot, then a conversion into protobuf at export — at level steps a
// cheap run paid for four of them, which cost the fixture's JSON runs
// about a sixth of their throughput before any byte was exported. A span
// here is a fixed-size value: started from a pool, ended by copying it
// into the bounded export queue (no allocation on the run's path), and
// turned into protobuf only when a batch is sent, on the exporter's
// goroutine. What is exported is the same: the same names, kinds, ids,
// parents, times, status and attributes, the same sampling
// (TraceIDRatioBased on the trace id, export only), the same bounds.

// maxSpanAttrs is the most attributes a span of the allow-list carries:
// the run span's observation id, operation, request id, provider, model,
// run id, outcome and dropped-span count.
const maxSpanAttrs = 8

// spanAttr is one attribute: a string, or an integer when isInt.
type spanAttr struct {
	key, str string
	num      int64
	isInt    bool
}

// span is one span being recorded or queued for export.
type span struct {
	name             string
	kind             tracepb.Span_SpanKind
	traceID          [16]byte
	spanID, parentID [8]byte
	start, end       int64 // Unix nanoseconds
	ok               bool  // status OK; otherwise ERROR
	nattrs           int
	attrs            [maxSpanAttrs]spanAttr
}

// setStr sets attribute key (nil-safe: a span not recorded ignores it).
// An attribute already set is replaced, as the SDK does.
func (s *span) setStr(key, v string) { s.set(spanAttr{key: key, str: v}) }

func (s *span) setInt(key string, v int64) { s.set(spanAttr{key: key, num: v, isInt: true}) }

func (s *span) set(a spanAttr) {
	if s == nil {
		return
	}
	for i := range s.nattrs {
		if s.attrs[i].key == a.key {
			s.attrs[i] = a
			return
		}
	}
	if s.nattrs < maxSpanAttrs {
		s.attrs[s.nattrs] = a
		s.nattrs++
	}
}

// setOK sets the span's status: OK, or ERROR.
func (s *span) setOK(ok bool) {
	if s != nil {
		s.ok = ok
	}
}

// context is the span as a parent for a child span.
func (s *span) context() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.traceID, SpanID: s.spanID, TraceFlags: trace.FlagsSampled})
}

// spanOverhead is the fixed part of a span's estimated encoding: trace,
// span and parent ids, two timestamps, kind, status and framing.
const spanOverhead = 96

// size estimates s's OTLP encoding, for the queue's byte bound.
func (s *span) size() int {
	n := spanOverhead + len(s.name)
	for _, a := range s.attrs[:s.nattrs] {
		n += 8 + len(a.key) + len(a.str)
		if a.isInt {
			n += len(strconv.FormatInt(a.num, 10))
		}
	}
	return n
}

// spanRecorder starts and ends spans.
type spanRecorder struct {
	// bound is the sampling threshold of TraceIDRatioBased: a trace is
	// kept when the low 63 bits of its id's second half are below it.
	bound  uint64
	all    bool // rate 1: every trace
	queue  *spanQueue
	spares sync.Pool // *span
}

func newSpanRecorder(rate float64, q *spanQueue) *spanRecorder {
	r := &spanRecorder{queue: q, all: rate >= 1}
	if !r.all && rate > 0 {
		r.bound = uint64(rate * (1 << 63))
	}
	r.spares.New = func() any { return new(span) }
	return r
}

// start begins span name at at, as a child of parent when parent is valid
// (a remote parent from a traceparent, or a span of this host), else as
// the root of a new trace. Nil when the trace is sampled out: the methods
// of a nil span do nothing, and end drops it.
func (r *spanRecorder) start(parent trace.SpanContext, name string, kind tracepb.Span_SpanKind, at time.Time) *span {
	var tid [16]byte
	if parent.IsValid() {
		tid = parent.TraceID()
	} else {
		binary.BigEndian.PutUint64(tid[:8], mrand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], nonZero())
	}
	if !r.all && binary.BigEndian.Uint64(tid[8:])>>1 >= r.bound {
		return nil
	}
	s := r.spares.Get().(*span)
	*s = span{name: name, kind: kind, traceID: tid, start: at.UnixNano()}
	binary.BigEndian.PutUint64(s.spanID[:], nonZero())
	if parent.IsValid() {
		s.parentID = parent.SpanID()
	}
	return s
}

// end ends s at at and queues it for export (nil: nothing).
func (r *spanRecorder) end(s *span, at time.Time) {
	if s == nil {
		return
	}
	s.end = at.UnixNano()
	r.queue.push(s)
	r.spares.Put(s)
}

// nonZero is a random 64-bit value other than zero (a zero id is invalid).
// Span and trace ids need to be unique, not secret: math/rand/v2's
// generator is seeded from the OS and costs no system call.
func nonZero() uint64 {
	for {
		if v := mrand.Uint64(); v != 0 {
			return v
		}
	}
}

// spanExporter sends one batch of spans.
type spanExporter interface {
	export(ctx context.Context, batch []span) error
	shutdown(ctx context.Context) error
}

// spanQueue is the export queue: bounded in records and in bytes
// (wire-extensions §11.2: 128 records and 2,000,000 bytes by default),
// sent in batches of up to batch spans from one goroutine, every interval
// or as soon as a batch is full. A span that would pass either bound is
// dropped — the newest, so what is queued goes out whole and a burst
// costs the burst's tail, never a wait — and counted (Dropped,
// adhost_telemetry_dropped_total).
type spanQueue struct {
	exp               spanExporter
	maxRecs, maxBytes int
	batch             int
	interval          time.Duration

	mu      sync.Mutex
	q       []span
	bytes   int
	sizes   []int // bytes of q[i]
	closed  bool
	dropped atomic.Int64

	// exportMu serializes exports (the loop's, a flush's); out is the
	// batch being sent, reused.
	exportMu sync.Mutex
	out      []span

	wake chan struct{} // size 1: a batch is full, or a flush is asked
	stop chan struct{}
	done chan struct{}
}

func newSpanQueue(exp spanExporter, maxRecs, maxBytes, batch int, interval time.Duration) *spanQueue {
	q := &spanQueue{exp: exp, maxRecs: maxRecs, maxBytes: maxBytes, batch: batch, interval: interval,
		q: make([]span, 0, min(maxRecs, 1024)), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go q.loop()
	return q
}

// push queues a copy of s, or drops it at a bound.
func (q *spanQueue) push(s *span) {
	n := s.size()
	q.mu.Lock()
	if q.closed || len(q.q) >= q.maxRecs || q.bytes+n > q.maxBytes {
		q.mu.Unlock()
		q.dropped.Add(1)
		return
	}
	q.q = append(q.q, *s)
	q.sizes = append(q.sizes, n)
	q.bytes += n
	full := len(q.q) >= q.batch
	q.mu.Unlock()
	if full {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Dropped counts the spans dropped at the queue's bounds.
func (q *spanQueue) Dropped() int64 { return q.dropped.Load() }

// take moves up to one batch from the head of the queue into out.
func (q *spanQueue) take(out []span) []span {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.q), q.batch)
	out = append(out[:0], q.q[:n]...)
	for _, b := range q.sizes[:n] {
		q.bytes -= b
	}
	rest := copy(q.q, q.q[n:])
	clear(q.q[rest:]) // drop the strings the moved-out spans held
	q.q = q.q[:rest]
	q.sizes = q.sizes[:copy(q.sizes, q.sizes[n:])]
	return out
}

// exportAll sends what is queued, batch by batch, each within the export
// timeout (the guard switches a failing exporter off; nothing is retried).
func (q *spanQueue) exportAll(ctx context.Context) {
	q.exportMu.Lock()
	defer q.exportMu.Unlock()
	for {
		q.out = q.take(q.out)
		if len(q.out) == 0 {
			return
		}
		ectx, cancel := context.WithTimeout(ctx, telTimeout)
		_ = q.exp.export(ectx, q.out)
		cancel()
		clear(q.out)
		if ctx.Err() != nil {
			return
		}
	}
}

func (q *spanQueue) loop() {
	defer close(q.done)
	tick := time.NewTicker(q.interval)
	defer tick.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-tick.C:
		case <-q.wake:
		}
		q.exportAll(context.Background())
	}
}

// ForceFlush exports what is queued now, within ctx.
func (q *spanQueue) ForceFlush(ctx context.Context) error {
	q.exportAll(ctx)
	return ctx.Err()
}

// Shutdown refuses new spans, sends what is queued within ctx and stops
// the exporter.
func (q *spanQueue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	close(q.stop)
	<-q.done
	q.exportAll(ctx)
	return q.exp.shutdown(ctx)
}

// otlpSpans sends batches with the SDK's OTLP trace client, as one
// ResourceSpans of the adhost resource and scope.
type otlpSpans struct {
	client otlptrace.Client
	res    *resourcepb.Resource
	scope  *commonpb.InstrumentationScope
}

func newOTLPSpans(ctx context.Context, client otlptrace.Client) (*otlpSpans, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &otlpSpans{
		client: client,
		res:    &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strKV("service.name", "adhost")}},
		scope:  &commonpb.InstrumentationScope{Name: "adhost"},
	}, nil
}

func (o *otlpSpans) export(ctx context.Context, batch []span) error {
	spans := make([]*tracepb.Span, len(batch))
	for i := range batch {
		spans[i] = batch[i].proto()
	}
	return o.client.UploadTraces(ctx, []*tracepb.ResourceSpans{{
		Resource:   o.res,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: o.scope, Spans: spans}},
	}})
}

func (o *otlpSpans) shutdown(ctx context.Context) error { return o.client.Stop(ctx) }

// proto is s in OTLP's protobuf form.
func (s *span) proto() *tracepb.Span {
	p := &tracepb.Span{
		TraceId:           append([]byte(nil), s.traceID[:]...),
		SpanId:            append([]byte(nil), s.spanID[:]...),
		Name:              s.name,
		Kind:              s.kind,
		StartTimeUnixNano: uint64(max(s.start, 0)),
		EndTimeUnixNano:   uint64(max(s.end, 0)),
		Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR},
		Flags:             uint32(trace.FlagsSampled),
	}
	if s.parentID != ([8]byte{}) {
		p.ParentSpanId = append([]byte(nil), s.parentID[:]...)
	}
	if s.ok {
		p.Status.Code = tracepb.Status_STATUS_CODE_OK
	}
	p.Attributes = make([]*commonpb.KeyValue, s.nattrs)
	for i, a := range s.attrs[:s.nattrs] {
		if a.isInt {
			p.Attributes[i] = &commonpb.KeyValue{Key: a.key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: a.num}}}
		} else {
			p.Attributes[i] = strKV(a.key, a.str)
		}
	}
	return p
}

func strKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// guardedSpans switches span export off through its guard.
type guardedSpans struct {
	exp spanExporter
	g   *guard
}

func (e *guardedSpans) export(ctx context.Context, batch []span) error {
	if e.g.off.Load() {
		return nil
	}
	e.g.done(e.exp.export(ctx, batch))
	return nil // reported by the guard, not retried
}

func (e *guardedSpans) shutdown(ctx context.Context) error { return e.exp.shutdown(ctx) }
