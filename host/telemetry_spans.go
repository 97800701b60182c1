package host

import (
	"context"
	"encoding/binary"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
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

// maxSpanAttrs is the most attributes a span of the allow-list carries
// besides its observation id: the run span's operation, request id,
// provider, model, run id, outcome and dropped-span count.
const maxSpanAttrs = 7

// attrKey is an attribute name of §11.2's allow-list (the observation id
// aside, span.obs): a span can carry no other, whatever a caller passes.
type attrKey uint8

const (
	attrOperation attrKey = iota
	attrOutcome
	attrRequestID
	attrRunID
	attrDroppedSpans
	attrProvider
	attrModel
	attrName
	numAttrKeys
)

var attrNames = [numAttrKeys]string{
	attrOperation:    "agenticdriver.operation",
	attrOutcome:      "agenticdriver.outcome",
	attrRequestID:    "agenticdriver.request_id",
	attrRunID:        "agenticdriver.run_id",
	attrDroppedSpans: "agenticdriver.dropped_spans",
	attrProvider:     "agenticdriver.provider",
	attrModel:        "agenticdriver.model",
	attrName:         "agenticdriver.name",
}

// spanAttr is one attribute: a string, or an integer when isInt.
type spanAttr struct {
	key   attrKey
	isInt bool
	str   string
	num   int64
}

// span is one span being recorded or queued for export.
type span struct {
	name             string
	kind             tracepb.Span_SpanKind
	traceID          [16]byte
	spanID, parentID [8]byte
	start, end       int64 // Unix nanoseconds
	ok               bool  // status OK; otherwise ERROR
	// obs is the agenticdriver.observation_id attribute when hasObs: kept
	// as its 16 random bytes and formatted only at export, so recording
	// one costs no allocation on the run's path.
	hasObs bool
	obs    [16]byte
	nattrs int
	attrs  [maxSpanAttrs]spanAttr
}

// setObservationID gives s a new observation id (a random UUID).
func (s *span) setObservationID() {
	if s == nil {
		return
	}
	binary.LittleEndian.PutUint64(s.obs[:8], mrand.Uint64())
	binary.LittleEndian.PutUint64(s.obs[8:], mrand.Uint64())
	s.obs[6] = s.obs[6]&0x0f | 0x40 // version 4
	s.obs[8] = s.obs[8]&0x3f | 0x80 // variant 10
	s.hasObs = true
}

// uuidLen is the length of a UUID's text form.
const uuidLen = 36

// appendUUID appends the text form of u (8-4-4-4-12 lowercase hex).
func appendUUID(b []byte, u *[16]byte) []byte {
	const digits = "0123456789abcdef"
	n := len(b)
	b = append(b, make([]byte, uuidLen)...)
	x := b[n : n+uuidLen]
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			x[j] = '-'
			j++
		}
		x[j], x[j+1] = digits[c>>4], digits[c&0x0f]
		j += 2
	}
	return b
}

// setStr sets attribute key (nil-safe: a span not recorded ignores it).
// An attribute already set is replaced, as the SDK does.
func (s *span) setStr(key attrKey, v string) { s.set(spanAttr{key: key, str: v}) }

func (s *span) setInt(key attrKey, v int64) { s.set(spanAttr{key: key, num: v, isInt: true}) }

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
	if s.hasObs {
		n += 8 + len(obsKey) + uuidLen
	}
	for _, a := range s.attrs[:s.nattrs] {
		n += 8 + len(attrNames[a.key]) + len(a.str)
		if a.isInt {
			n += decimalLen(a.num)
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
	kids   sync.Pool // *[]span: a run record's children (runTrace.kids)
}

func newSpanRecorder(rate float64, q *spanQueue) *spanRecorder {
	r := &spanRecorder{queue: q, all: rate >= 1}
	if !r.all && rate > 0 {
		r.bound = uint64(rate * (1 << 63))
	}
	r.spares.New = func() any { return new(span) }
	r.kids.New = func() any { return new([]span) }
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

// end ends s at at and queues it for export as a record of its own (a
// host record's span; nil: nothing).
func (r *spanRecorder) end(s *span, at time.Time) {
	if s == nil {
		return
	}
	s.end = at.UnixNano()
	r.queue.push(s, nil)
	r.spares.Put(s)
}

// endChild ends s at at into *kids, the ended children of its parent's
// record, queued with the parent when it ends (endRecord). A nil *kids
// is taken from the recorder's reused slices.
func (r *spanRecorder) endChild(s *span, at time.Time, kids **[]span) {
	if *kids == nil {
		*kids = r.kids.Get().(*[]span)
	}
	s.end = at.UnixNano()
	**kids = append(**kids, *s)
	r.spares.Put(s)
}

// endRecord ends s at at and queues it with *kids, its ended children
// (endChild), as one record, giving *kids back; nil s: nothing but that.
func (r *spanRecorder) endRecord(s *span, at time.Time, kids **[]span) {
	var ks []span
	if *kids != nil {
		ks = **kids
	}
	if s != nil {
		s.end = at.UnixNano()
		r.queue.push(s, ks)
		r.spares.Put(s)
	}
	if *kids != nil {
		clear(ks) // the strings the queue now holds copies of
		**kids = ks[:0]
		r.kids.Put(*kids)
		*kids = nil
	}
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

// spanQueue is the export queue of records: a request's host record (its
// agenticdriver.host span), or a run record — the agenticdriver.run span
// with the children level steps adds to it. It is bounded in records and
// in bytes (wire-extensions §11.2: 128 records and 2,000,000 bytes by
// default) and sent in batches of up to batch records from one goroutine,
// every interval or as soon as a batch is full. A record that would pass
// either bound is dropped whole — the newest, so what is queued goes out
// whole and a burst costs the burst's tail, never a wait — and its spans
// counted (Dropped, adhost_telemetry_dropped_total).
//
// Records, not spans, are what §11.2 counts: its levels add spans to the
// run record ("steps adds queue/provider/tool/context spans") and records
// of their own ("progress adds rate-limited progress records"), and it
// bounds a run's spans apart ("spans per run 128"). So a run's spans stay
// together, queued when the run ends and exported in one request — a
// collector never sees a child before its run — and a burst of 128 runs
// ending at once fits the queue, whatever their steps. (Read as spans,
// the same bounds let 32 fixture runs fill the queue, and sent a request
// every twenty runs instead of every thirty.)
type spanQueue struct {
	exp               spanExporter
	maxRecs, maxBytes int
	batch             int // records
	interval          time.Duration

	mu      sync.Mutex
	q       []span // the spans of the queued records, in order
	recs    []int  // the number of spans of each queued record
	sizes   []int  // the estimated bytes of each queued record
	bytes   int
	closed  bool
	dropped atomic.Int64 // spans

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

// push queues a copy of s and of kids, its children, as one record, or
// drops them at a bound.
func (q *spanQueue) push(s *span, kids []span) {
	n := s.size()
	for i := range kids {
		n += kids[i].size()
	}
	q.mu.Lock()
	if q.closed || len(q.recs) >= q.maxRecs || q.bytes+n > q.maxBytes {
		q.mu.Unlock()
		q.dropped.Add(int64(1 + len(kids)))
		return
	}
	q.q = append(q.q, kids...)
	q.q = append(q.q, *s)
	q.recs = append(q.recs, 1+len(kids))
	q.sizes = append(q.sizes, n)
	q.bytes += n
	full := len(q.recs) >= q.batch
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

// take moves the spans of up to one batch of records from the head of
// the queue into out; with full, only a whole batch (nothing while fewer
// records are queued).
func (q *spanQueue) take(out []span, full bool) []span {
	q.mu.Lock()
	defer q.mu.Unlock()
	if full && len(q.recs) < q.batch {
		return out[:0]
	}
	k := min(len(q.recs), q.batch)
	n := 0
	for i := range k {
		n += q.recs[i]
		q.bytes -= q.sizes[i]
	}
	out = append(out[:0], q.q[:n]...)
	rest := copy(q.q, q.q[n:])
	clear(q.q[rest:]) // drop the strings the moved-out spans held
	q.q = q.q[:rest]
	q.recs = q.recs[:copy(q.recs, q.recs[k:])]
	q.sizes = q.sizes[:copy(q.sizes, q.sizes[k:])]
	return out
}

// exportAll sends what is queued, batch by batch, each within the export
// timeout (the guard switches a failing exporter off; nothing is retried).
// With full, it sends whole batches only and leaves the rest for the next
// tick or flush.
//
// Why: a full batch wakes the exporter while runs go on ending records,
// so by the time one batch is sent a few more are queued. Sent at once,
// they made a request of a few records, during which a few more ended: a
// busy host sent a request every few runs instead of one a full batch
// (measured when batches counted spans: every three runs instead of every
// sixteen), and those requests were most of what telemetry cost it. Left
// for the tick, a record waits at most the export interval (a second)
// either way.
func (q *spanQueue) exportAll(ctx context.Context, full bool) {
	q.exportMu.Lock()
	defer q.exportMu.Unlock()
	for {
		q.out = q.take(q.out, full)
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
			q.exportAll(context.Background(), false)
		case <-q.wake:
			q.exportAll(context.Background(), true)
		}
	}
}

// ForceFlush exports what is queued now, within ctx.
func (q *spanQueue) ForceFlush(ctx context.Context) error {
	q.exportAll(ctx, false)
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
	q.exportAll(ctx, false)
	return q.exp.shutdown(ctx)
}

// otlpSpans sends batches with the SDK's OTLP trace client, as one
// ResourceSpans of the adhost resource and scope.
type otlpSpans struct {
	client otlptrace.Client
	enc    spanEncoder
	// rs carries a batch's encoding (spanEncoder), reused: the client
	// marshals the request before UploadTraces returns and keeps nothing
	// of it.
	rs  tracepb.ResourceSpans
	req [1]*tracepb.ResourceSpans
}

func newOTLPSpans(ctx context.Context, client otlptrace.Client) (*otlpSpans, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	o := &otlpSpans{client: client}
	o.req[0] = &o.rs
	return o, nil
}

// export is called by one goroutine at a time (spanQueue.exportMu).
func (o *otlpSpans) export(ctx context.Context, batch []span) error {
	o.rs.ProtoReflect().SetUnknown(o.enc.resourceSpans(batch))
	return o.client.UploadTraces(ctx, o.req[:])
}

func (o *otlpSpans) shutdown(ctx context.Context) error { return o.client.Stop(ctx) }

// obsKey is the observation id's attribute (span.obs).
const obsKey = "agenticdriver.observation_id"

// spanEncoder writes a batch in OTLP protobuf (opentelemetry.proto.trace.v1)
// itself, into a buffer reused from batch to batch.
//
// Why: built as tracepb messages and marshalled by the protobuf runtime, a
// span cost about ten allocations (the Span, its Status, each attribute's
// KeyValue, AnyValue and oneof wrapper) and 2 µs of reflection-driven
// marshalling: a fixture run at level steps paid 8 µs for its four spans,
// more than everything else telemetry does for it. Written directly, a
// span is a few hundred bytes appended in about 0.1 µs, and a batch
// allocates nothing once the buffer has grown.
//
// The encoding is the body of one ResourceSpans — its resource and its one
// ScopeSpans — which export hands the SDK's client as the unknown fields
// of an empty ResourceSpans: the protobuf runtime writes unknown fields
// verbatim, so the request on the wire is the one the client would have
// marshalled from the full messages (TestSpanEncoder decodes it and
// compares). Only the client's optional self-observability span count,
// which reads the messages, sees no spans.
type spanEncoder struct {
	// buf keeps the largest batch's encoding: a few tens of KB for spans
	// of the allow-list, at most about the queue's byte bound.
	buf []byte
}

// Field numbers of the OTLP messages written here.
const (
	fResourceSpansResource   = 1 // ResourceSpans.resource
	fResourceSpansScopeSpans = 2 // ResourceSpans.scope_spans
	fResourceAttributes      = 1 // Resource.attributes
	fScopeSpansScope         = 1 // ScopeSpans.scope
	fScopeSpansSpans         = 2 // ScopeSpans.spans
	fScopeName               = 1 // InstrumentationScope.name
	fSpanTraceID             = 1
	fSpanSpanID              = 2
	fSpanParentSpanID        = 4
	fSpanName                = 5
	fSpanKind                = 6
	fSpanStart               = 7 // fixed64
	fSpanEnd                 = 8 // fixed64
	fSpanAttributes          = 9
	fSpanStatus              = 15
	fSpanFlags               = 16 // fixed32
	fStatusCode              = 3
	fKeyValueKey             = 1
	fKeyValueValue           = 2
	fAnyValueString          = 1
	fAnyValueInt             = 3
)

// resourcePrefix is the ResourceSpans' resource field and the ScopeSpans'
// scope field, the same for every batch: service.name adhost, scope adhost.
var resourcePrefix, scopePrefix = func() ([]byte, []byte) {
	// (Each is shorter than 128 bytes: one-byte lengths.)
	kv := appendStrAttr(nil, "service.name", "adhost")
	res := protowire.AppendTag(nil, fResourceAttributes, protowire.BytesType)
	res = protowire.AppendBytes(res, kv)
	r := protowire.AppendTag(nil, fResourceSpansResource, protowire.BytesType)
	r = protowire.AppendBytes(r, res)
	sc := protowire.AppendTag(nil, fScopeName, protowire.BytesType)
	sc = protowire.AppendString(sc, "adhost")
	s := protowire.AppendTag(nil, fScopeSpansScope, protowire.BytesType)
	s = protowire.AppendBytes(s, sc)
	return r, s
}()

// resourceSpans is the encoding of one ResourceSpans' fields holding
// batch, valid until the next call.
func (e *spanEncoder) resourceSpans(batch []span) []byte {
	b := append(e.buf[:0], resourcePrefix...)
	b = protowire.AppendTag(b, fResourceSpansScopeSpans, protowire.BytesType)
	b, scope := openLen(b)
	b = append(b, scopePrefix...)
	for i := range batch {
		var m int
		b = protowire.AppendTag(b, fScopeSpansSpans, protowire.BytesType)
		b, m = openLen2(b)
		b = batch[i].appendProto(b)
		b = closeLen2(b, m)
	}
	b = closeLen(b, scope)
	e.buf = b
	return b
}

// openLen reserves the length prefix of a length-delimited field whose
// contents follow: one byte, which closeLen fills in once the contents are
// written — widened then, by moving them, when they are 128 bytes or more
// (a span, a batch). Nothing is measured before it is written.
func openLen(b []byte) ([]byte, int) { return append(b, 0), len(b) }

// closeLen writes the length of what follows the prefix at at.
func closeLen(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// openLen2 and closeLen2 are openLen and closeLen for contents that are
// mostly 128 to 16,383 bytes long (a span): two bytes reserved, moved
// only outside that range.
func openLen2(b []byte) ([]byte, int) { return append(b, 0, 0), len(b) }

func closeLen2(b []byte, at int) []byte {
	n := len(b) - at - 2
	if n >= 0x80 && n < 0x4000 {
		protowire.AppendVarint(b[at:at], uint64(n))
		return b
	}
	// One byte too many reserved, or too few: take the one-byte path from
	// a prefix of one byte.
	copy(b[at+1:], b[at+2:])
	return closeLen(b[:len(b)-1], at)
}

// appendStrAttr appends a KeyValue with a string value (no field tag or
// length).
func appendStrAttr(b []byte, key, v string) []byte {
	var m int
	b = protowire.AppendTag(b, fKeyValueKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, fKeyValueValue, protowire.BytesType)
	b, m = openLen(b)
	b = protowire.AppendTag(b, fAnyValueString, protowire.BytesType)
	b = protowire.AppendString(b, v)
	return closeLen(b, m)
}

// appendProto appends s's Span message (without its field tag or length),
// fields in number order as the protobuf runtime writes them.
func (s *span) appendProto(b []byte) []byte {
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, s.traceID[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, s.spanID[:])
	if s.parentID != ([8]byte{}) {
		b = protowire.AppendTag(b, fSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, s.parentID[:])
	}
	b = protowire.AppendTag(b, fSpanName, protowire.BytesType)
	b = protowire.AppendString(b, s.name)
	b = protowire.AppendTag(b, fSpanKind, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(s.kind))
	if s.start > 0 {
		b = protowire.AppendTag(b, fSpanStart, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, uint64(s.start))
	}
	if s.end > 0 {
		b = protowire.AppendTag(b, fSpanEnd, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, uint64(s.end))
	}
	if s.hasObs {
		b = append(b, obsPrefix...)
		b = appendUUID(b, &s.obs)
	}
	for _, a := range s.attrs[:s.nattrs] {
		var kv, val int
		b = protowire.AppendTag(b, fSpanAttributes, protowire.BytesType)
		b, kv = openLen(b)
		b = append(b, keyPrefixes[a.key]...)
		b, val = openLen(b)
		if a.isInt {
			b = protowire.AppendTag(b, fAnyValueInt, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(a.num))
		} else {
			b = protowire.AppendTag(b, fAnyValueString, protowire.BytesType)
			b = protowire.AppendString(b, a.str)
		}
		b = closeLen(b, val)
		b = closeLen(b, kv)
	}
	if s.ok {
		return append(b, spanStatusOK...)
	}
	return append(b, spanStatusError...)
}

// keyPrefixes[k] is the start of a KeyValue of key k: the key field and
// the value field's tag. obsPrefix is a whole observation-id attribute
// up to the UUID's text, spanStatusOK and spanStatusError a span's status and
// flags fields: the constant bytes of a span, encoded once.
var keyPrefixes, obsPrefix, spanStatusOK, spanStatusError = func() (keys [numAttrKeys][]byte, obs, ok, failed []byte) {
	prefix := func(key string) []byte {
		b := protowire.AppendTag(nil, fKeyValueKey, protowire.BytesType)
		b = protowire.AppendString(b, key)
		return protowire.AppendTag(b, fKeyValueValue, protowire.BytesType)
	}
	for k, name := range attrNames {
		keys[k] = prefix(name)
	}
	// Lengths are one byte each: a KeyValue of the observation id is 70.
	p := prefix(obsKey)
	obs = protowire.AppendTag(nil, fSpanAttributes, protowire.BytesType)
	obs = append(obs, byte(len(p)+1+2+uuidLen)) // the key, the value's length, the AnyValue
	obs = append(obs, p...)
	obs = append(obs, 2+uuidLen) // the AnyValue: its tag and length, the UUID
	obs = protowire.AppendTag(obs, fAnyValueString, protowire.BytesType)
	obs = append(obs, uuidLen)
	status := func(code tracepb.Status_StatusCode) []byte {
		b := protowire.AppendTag(nil, fSpanStatus, protowire.BytesType)
		b = append(b, 2) // the code's tag and value (1 or 2), a byte each
		b = protowire.AppendTag(b, fStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(code))
		b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(trace.FlagsSampled))
	}
	return keys, obs, status(tracepb.Status_STATUS_CODE_OK), status(tracepb.Status_STATUS_CODE_ERROR)
}()

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
