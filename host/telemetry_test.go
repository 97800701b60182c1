package host

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
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

// countingSpans is an exporter that counts what it is sent.
type countingSpans struct {
	mu sync.Mutex
	n  int
}

func (c *countingSpans) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	c.n += len(s)
	c.mu.Unlock()
	return nil
}

func (c *countingSpans) Shutdown(context.Context) error { return nil }

// paddedSpan ends one span whose estimated encoding is exactly size bytes.
func paddedSpan(t *testing.T, tr trace.Tracer, size int) {
	t.Helper()
	// Measured on a span of a provider without processors: it is queued
	// nowhere.
	_, probe := sdktrace.NewTracerProvider().Tracer("probe").Start(context.Background(), "s")
	probe.SetAttributes(attribute.String("p", ""))
	base := spanBytes(probe.(sdktrace.ReadOnlySpan))
	probe.End()
	if size < base {
		t.Fatalf("span of %d bytes: the smallest is %d", size, base)
	}
	_, s := tr.Start(context.Background(), "s")
	s.SetAttributes(attribute.String("p", strings.Repeat("x", size-base)))
	if got := spanBytes(s.(sdktrace.ReadOnlySpan)); got != size {
		t.Fatalf("padded span: %d bytes, want %d", got, size)
	}
	s.End()
}

// TestSpanQueueBounds: the telemetry queue holds exactly 2,000,000 bytes
// and exactly 128 records (wire-extensions §11.2 defaults); the next span
// is dropped and counted, and what was queued is exported whole.
func TestSpanQueueBounds(t *testing.T) {
	newQueue := func() (*spanQueue, *countingSpans, trace.Tracer) {
		exp := &countingSpans{}
		// No batch fills and no tick comes while the test fills it.
		q := newSpanQueue(exp, telQueueRecords, telQueueBytes, 1<<20, time.Hour)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return q, exp, tp.Tracer("test")
	}
	q, exp, tr := newQueue()
	const size = telQueueBytes / 100 // 100 spans fill the byte bound
	for range 100 {
		paddedSpan(t, tr, size)
	}
	if q.Dropped() != 0 || q.bytes != telQueueBytes {
		t.Fatalf("at the byte bound: dropped %d, %d bytes queued", q.Dropped(), q.bytes)
	}
	_, s := tr.Start(context.Background(), "one more")
	s.End()
	if q.Dropped() != 1 || len(q.q) != 100 {
		t.Fatalf("one span past the byte bound: dropped %d, %d queued", q.Dropped(), len(q.q))
	}
	if err := q.ForceFlush(context.Background()); err != nil || exp.n != 100 || q.bytes != 0 {
		t.Fatalf("flush: %v, exported %d, %d bytes left", err, exp.n, q.bytes)
	}

	q, exp, tr = newQueue()
	for range telQueueRecords {
		paddedSpan(t, tr, 200)
	}
	if q.Dropped() != 0 {
		t.Fatalf("at the record bound: dropped %d", q.Dropped())
	}
	paddedSpan(t, tr, 200)
	if q.Dropped() != 1 || len(q.q) != telQueueRecords {
		t.Fatalf("one span past the record bound: dropped %d, %d queued", q.Dropped(), len(q.q))
	}
	if err := q.Shutdown(context.Background()); err != nil || exp.n != telQueueRecords {
		t.Fatalf("shutdown: %v, exported %d", err, exp.n)
	}
	paddedSpan(t, tr, 200) // after shutdown: dropped, never a panic
}

// TestSpanQueueBatches: a full batch is exported without waiting for the
// interval.
func TestSpanQueueBatches(t *testing.T) {
	exp := &countingSpans{}
	q := newSpanQueue(exp, telQueueRecords, telQueueBytes, telBatch, time.Hour)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	for range telBatch {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	for i := 0; ; i++ {
		exp.mu.Lock()
		n := exp.n
		exp.mu.Unlock()
		if n == telBatch {
			break
		}
		if i > 1000 {
			t.Fatalf("a full batch not exported: %d of %d", n, telBatch)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
