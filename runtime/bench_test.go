package runtime

import (
	"context"
	"io"
	"strings"
	"testing"

	"adhost/abi"
)

// deltaProvider streams n deltas of text per turn.
func deltaProvider(n int, text string) *fakeProvider {
	full := strings.Repeat(text, n)
	return &fakeProvider{complete: func(_ context.Context, _ *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
		for range n {
			sink.Text(text)
		}
		return &abi.CompleteOutput{Text: full}, nil
	}}
}

// BenchmarkStreamDeltas: one run of 1,000 provider deltas read through
// Run.Next. deltas/s counts provider deltas; events/op counts what the
// reader received (adjacent deltas merge while it is busy).
func BenchmarkStreamDeltas(b *testing.B) {
	env := newEnv(b, deltaProvider(1000, "token "))
	b.ReportAllocs()
	events := 0
	for b.Loop() {
		run := env.start(b, req("x"), ModeStream)
		for {
			_, err := run.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			events++
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "deltas/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkRunJSON is the engine overhead of a one-step text run in JSON
// mode (validation, admission, goroutines, events, result).
func BenchmarkRunJSON(b *testing.B) {
	env := newEnv(b, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.UsageSink = nil })
	r := req("conformance:text")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := env.start(b, r, ModeJSON).Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunStream is the same run read as events.
func BenchmarkRunStream(b *testing.B) {
	env := newEnv(b, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.UsageSink = nil })
	r := req("conformance:text")
	b.ReportAllocs()
	for b.Loop() {
		run := env.start(b, r, ModeStream)
		for {
			if _, err := run.Next(context.Background()); err != nil {
				break
			}
		}
	}
}

// BenchmarkRunParallel runs JSON runs from 8 goroutines (admission
// contention included; subjects spread so none is BUSY).
func BenchmarkRunParallel(b *testing.B) {
	env := newEnv(b, conformanceProvider(true), func(o *Options, _ *ProviderInstance) { o.UsageSink = nil })
	r := req("conformance:text")
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ReportAllocs()
	var n atomicCounter
	b.RunParallel(func(pb *testing.PB) {
		p := &Principal{Subject: "s" + itoa(n.next()), Providers: map[string]bool{"p": true}}
		for pb.Next() {
			run, err := env.e.Start(context.Background(), p, r, ModeJSON)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := run.Wait(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEncodeDelta is the hand-written text.delta encoding.
func BenchmarkEncodeDelta(b *testing.B) {
	p := &payload{typ: EventTextDelta, text: "Hello, world! A typical token chunk.\n"}
	b.ReportAllocs()
	for b.Loop() {
		encodeEvent("0b1f4c7e-2a0d-4f3b-9c55-6f2e8e7d1a90", 42, p)
	}
}
