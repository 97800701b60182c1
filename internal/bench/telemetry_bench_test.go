package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"adhost/host"
	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/wasm"
)

// BenchmarkTelemetryOverhead: fixture JSON runs (conformance:text) through
// hosts on the same extension, with telemetry and metrics off, and with
// OpenTelemetry at level steps (exporting to a loopback receiver that
// discards) and the Prometheus metrics on, in alternating rounds. It
// reports on-ratio = throughput on / throughput off (target ≥ 0.9), and
// cpu-ratio, the same in process CPU time.
//
// At level steps a fixture run records three spans (host, run, provider:
// it waits for no admission and has no context) in two records (the
// host's; the run's, its span with its child), and an export request of
// §11.2's largest batch, 64 records, leaves every 32 runs. That request —
// the SDK client's marshal and round trip, and the receiver's side, since
// the receiver is in this process — costs about 95 µs of CPU (a throwaway
// microbenchmark: 45 µs of it a bare net/http POST of the same bytes, 15
// µs a raw TCP exchange), about 3 µs a run of ~80; recording the spans
// and host metrics costs about as much again.
//
// History, all on the shared 2-core machine:
//
//	session 6, batches of 16 spans sent as they filled, the SDK's marshal:
//	  on-ratio 0.63-0.68 (clients=1), 0.76-0.81 (clients=8)
//	  hand-written OTLP, batches of 64 spans: 0.81-0.91, 0.88-1.01
//	session 7, against a host served like the observed one (env's own
//	  host ran 4-6 % slower, which had flattered every ratio):
//	  0.89-0.91, 0.88-0.93; metrics only ~1.00, spans only 0.93, 0.88
//	session 8 (-benchtime 64000x, load 1.0-1.9):
//	  queue span only for a run that waited: 0.90-0.92, 0.88-0.96
//	  batches of 64 records, not spans: 0.92-0.93, 0.91-0.92
//	  duration histogram kept by the host (a Producer), and this bench
//	  without its bias (below), twelve runs: clients=1 0.91-0.99, every
//	  one ≥ 0.90; clients=8 0.88-0.97, three of them below 0.90 (0.888,
//	  0.892, 0.883) — cpu-ratio 0.91-0.99 and 0.89-0.93
//	  spans timed by their events (Event.At: no clock read of their own,
//	  48 ns each here), ten runs: clients=1 0.92-0.97 (median 0.93),
//	  clients=8 0.90-0.96 (median 0.94), every one ≥ 0.90 — cpu-ratio
//	  0.92-0.97 and 0.90-0.94
//
// Decomposed in this bench at clients=8, -benchtime 192000x, cpu-ratio
// (two runs each, throwaway changes): upload skipped 0.94-0.96; upload
// skipped and no run trace (host records only) 0.97-0.98; the SDK's
// synchronous histogram alone cost 1-1.5 % (0.97 against 0.98-0.99).
// Sampled out (sample_rate 0) a traced host reads about 1.0. A receiver
// in another process made it worse (0.84-0.85: cross-process wake-ups),
// and a RoundTripper that writes and reads on the exporting goroutine was
// within the noise (session 7). Two identical hosts read 0.97-1.05 apart
// in one run (the control, both off), so a single reading is ±4 %: with
// medians of 0.93-0.94 a reading below 0.90 stays possible, if rare.
func BenchmarkTelemetryOverhead(b *testing.B) {
	off := newEnv(b, envOptions{})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	quiet := slog.New(slog.DiscardHandler)
	tel, err := host.NewTelemetry(&config.Diagnostics{OTLPEndpoint: sink.URL, Level: "steps", ExportIntervalMs: 1000}, quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tel.Shutdown(context.Background()) })
	metrics := host.NewMetrics("")
	wasm.SetObserver(metrics)
	b.Cleanup(func() { wasm.SetObserver(nil) })
	// The side with both off is served the same way, with the same
	// logger: env's own host (serveHost, a warn-level text logger) ran
	// 4-6 % slower than an identical serveObserved host with both off,
	// which made every ratio read that much better than it was.
	//
	// Two hosts a side, built in the order on, off, off, on and used in
	// pairs (the first two, then the last two, for two rounds each): two
	// identical hosts with both off, built one after the other, read
	// 1.00-1.03 apart at eight clients with the first built on the on
	// side (-benchtime 192000x), and 0.98-1.00 with the order reversed —
	// the order of construction alone favoured the first-built host by
	// about 2 %. Built in ABBA order, it favours neither side. (The two
	// observed hosts share one Telemetry and one Metrics, as the wasm
	// observer is process-wide: what is measured is the recording and
	// export a run costs, which sharing does not change.)
	body := runBody("conformance:text")
	serve := func(m *host.Metrics, t *host.Telemetry) func(int) error {
		u, hc := serveObserved(b, off.x, off.prov, quiet, m, t)
		return func(w int) error { _, err := post(hc, u, tokenFor(w), body, false); return err }
	}
	var onOps, offOps [2]func(int) error
	onOps[0] = serve(metrics, tel)
	offOps[0] = serve(nil, nil)
	offOps[1] = serve(nil, nil)
	onOps[1] = serve(metrics, tel)
	for _, c := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			for i := range 2 {
				if err := warm(c, offOps[i]); err != nil {
					off.fail(b, err)
				}
				if err := warm(c, onOps[i]); err != nil {
					b.Fatal(err)
				}
			}
			// Sixty-four short rounds in ABBA order (on, off, off, on,
			// …): a change in the machine's load, or whatever the first
			// of two back-to-back rounds leaves the second to pay, hits
			// both sides alike. on-ratio is the median of the per-round
			// ratios, which one disturbed round cannot move. (With
			// sixteen, two hosts with both off read 0.94-1.11 apart;
			// with sixty-four, 0.99-1.00 at one client, 1.03-1.07 at
			// eight, both at -benchtime 64000x.)
			var onElapsed time.Duration
			var memStats goruntime.MemStats
			var ratios, cpuRatios []float64
			b.ResetTimer()
			for i, n := range rounds(b.N, 64) {
				timed := func(op func(int) error, on bool) time.Duration {
					// The on side's rounds are timed for b (its ns/op and
					// b.N): StartTimer and StopTimer each read the memory
					// statistics, which stops the world. The off side's
					// rounds read them too, so both start and end alike.
					if on {
						b.StartTimer()
						defer b.StopTimer()
					} else {
						goruntime.ReadMemStats(&memStats)
						defer goruntime.ReadMemStats(&memStats)
					}
					d, _, err := hammer(c, n, op)
					if err != nil {
						b.Fatal(err)
					}
					return d
				}
				onOp, offOp := onOps[i/2%2], offOps[i/2%2]
				var on, off, onCPU, offCPU time.Duration
				if i%2 == 0 {
					onCPU, on = cpuOf(func() time.Duration { return timed(onOp, true) })
					offCPU, off = cpuOf(func() time.Duration { return timed(offOp, false) })
				} else {
					offCPU, off = cpuOf(func() time.Duration { return timed(offOp, false) })
					onCPU, on = cpuOf(func() time.Duration { return timed(onOp, true) })
				}
				onElapsed += on
				ratios = append(ratios, off.Seconds()/on.Seconds())
				cpuRatios = append(cpuRatios, offCPU.Seconds()/onCPU.Seconds())
			}
			slices.Sort(ratios)
			slices.Sort(cpuRatios)
			b.ReportMetric(float64(b.N)/onElapsed.Seconds(), "runs/s")
			b.ReportMetric(ratios[len(ratios)/2], "on-ratio")
			// The same ratio in process CPU time (client, both hosts and
			// the sink are in this process): what a loaded machine
			// disturbs least, since it does not count waiting for a core.
			b.ReportMetric(cpuRatios[len(cpuRatios)/2], "cpu-ratio")
		})
	}
}

// serveObserved is serveHost with metrics and telemetry on.
func serveObserved(b *testing.B, x *wasm.Extension, prov runtime.Provider, logger *slog.Logger, m *host.Metrics, tel *host.Telemetry) (string, *http.Client) {
	mf := x.Manifest()
	inst := &runtime.ProviderInstance{
		ID: providerID, Name: "Fixture", Vendor: mf.Vendor, AuthMode: mf.AuthMode,
		AccountID: "bench", Models: []string{modelID},
		Capabilities: mf.Capabilities, UsageSource: mf.UsageSource, Provider: prov,
	}
	eng, err := runtime.New(runtime.Options{Providers: []*runtime.ProviderInstance{inst}, HostID: "bench", Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]host.Token, maxClients)
	for i := range tokens {
		tokens[i] = host.Token{ID: "t" + strconv.Itoa(i), Subject: "subject-" + strconv.Itoa(i),
			Secret: tokenFor(i), Providers: []string{providerID}}
	}
	srv := host.NewServer(host.ServerOptions{Engine: eng, Tokens: tokens, Logger: logger, Metrics: m, Telemetry: tel})
	srv.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln, nil) }()
	hc := newHTTPClient()
	b.Cleanup(func() {
		hc.CloseIdleConnections()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
		_ = eng.Shutdown(sctx)
	})
	return "http://" + ln.Addr().String(), hc
}

// cpuOf runs f and returns the process CPU time (user and system) it took,
// with f's own result.
func cpuOf(f func() time.Duration) (time.Duration, time.Duration) {
	c0 := processCPU()
	d := f()
	return processCPU() - c0, d
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
