package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/client"
	"adhost/runtime/protocol"
)

// clientCounts are the concurrency levels of the JSON benchmarks.
var clientCounts = []int{1, 8}

// BenchmarkJSONRun measures JSON runs of conformance:text through the whole
// host. It also reports guest-µs/run, the fixture provider's own time per
// run when called directly. Untimed rounds of the bare handler, with the same client,
// concurrency and op count, alternate with the timed host rounds; it reports
// bare-ratio = host throughput / bare throughput (target ≥ 0.5 at
// clients=8) next to p50-ms and p99-ms of the host (target p99 ≤ 5 ms).
func BenchmarkJSONRun(b *testing.B) {
	e := newEnv(b, envOptions{})
	body := runBody("conformance:text")
	sample, err := post(e.hc, e.url, tokenFor(0), body, false)
	if err != nil {
		e.fail(b, err)
	}
	bare := newBareServer(b, len(sample))
	hostOp := func(w int) error {
		_, err := post(e.hc, e.url, tokenFor(w), body, false)
		return err
	}
	bareOp := func(w int) error {
		_, err := post(bare.hc, bare.url, tokenFor(w), body, false)
		return err
	}
	for _, c := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			if err := warm(c, hostOp); err != nil {
				e.fail(b, err)
			}
			if err := warm(c, bareOp); err != nil {
				b.Fatal(err)
			}
			// Host and bare alternate in rounds, so that a change in the
			// machine's load hits both sides of the ratio alike.
			var (
				elapsed, bareElapsed time.Duration
				lat                  latencies
			)
			b.ResetTimer()
			for _, n := range rounds(b.N, 4) {
				b.StartTimer()
				d, l, err := hammer(c, n, hostOp)
				b.StopTimer()
				if err != nil {
					e.fail(b, err)
				}
				elapsed += d
				lat.add(l.all)
				d, _, err = hammer(c, n, bareOp)
				if err != nil {
					b.Fatal(err)
				}
				bareElapsed += d
			}
			reportLatency(b, b.N, elapsed, &lat, "runs/s")
			b.ReportMetric(bareElapsed.Seconds()/elapsed.Seconds(), "bare-ratio")
			// What the guest alone costs per run (called directly, one at
			// a time): the part of the host's time the transport and the
			// engine do not control.
			b.ReportMetric(float64(providerAlone(b, e, "conformance:text", 50).Microseconds()), "guest-µs/run")
		})
	}
}

// BenchmarkBareHTTP is the baseline on its own: a net/http handler that
// decodes the run request body and writes a JSON answer as long as the
// host's conformance:text RunResult.
func BenchmarkBareHTTP(b *testing.B) {
	e := newEnv(b, envOptions{})
	body := runBody("conformance:text")
	sample, err := post(e.hc, e.url, tokenFor(0), body, false)
	if err != nil {
		e.fail(b, err)
	}
	bare := newBareServer(b, len(sample))
	op := func(w int) error {
		_, err := post(bare.hc, bare.url, tokenFor(w), body, false)
		return err
	}
	for _, c := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			if err := warm(c, op); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			elapsed, lat, err := hammer(c, b.N, op)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			reportLatency(b, b.N, elapsed, lat, "runs/s")
		})
	}
}

// BenchmarkSSE1000Deltas streams one bench:deltas:1000 run per op with the
// Go client. The engine may merge adjacent deltas when the reader lags, so
// deltas/s counts the provider's 1,000 deltas per run (the client checks
// that the text bytes of the frames add up to exactly 1,000) and frames/s
// the text.delta frames the client actually parsed. host-µs/delta
// subtracts the time the provider alone needs to produce a run's deltas
// (runtime.Provider.Complete with a no-op sink, measured after the timed
// ops) from the end-to-end time per delta.
func BenchmarkSSE1000Deltas(b *testing.B) {
	const deltas = 1000
	e := newEnv(b, envOptions{})
	c, err := client.New(e.url, client.WithToken(tokenFor(0)), client.WithHTTPClient(e.hc))
	if err != nil {
		b.Fatal(err)
	}
	req := &protocol.RunRequest{Provider: providerID, Model: modelID, Input: fmt.Sprintf("bench:deltas:%d", deltas)}
	var frames int64
	op := func() error {
		var n, text int
		res, err := c.Stream(context.Background(), req, func(ev client.Event) error {
			if ev.Type == client.EventTextDelta {
				n++
				text += len(ev.Text)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if text != deltas || len(res.Text) != deltas {
			return fmt.Errorf("delta text %d bytes, result %d bytes, want %d", text, len(res.Text), deltas)
		}
		frames += int64(n)
		return nil
	}
	if err := op(); err != nil { // warm: connection and guest instance
		e.fail(b, err)
	}
	frames = 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := op(); err != nil {
			e.fail(b, err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	perRun := providerAlone(b, e, req.Input, min(b.N, 20))
	total := float64(deltas * b.N)
	b.ReportMetric(total/elapsed.Seconds(), "deltas/s")
	b.ReportMetric(float64(frames)/elapsed.Seconds(), "frames/s")
	b.ReportMetric(float64(frames)/float64(b.N), "frames/run")
	b.ReportMetric(float64(elapsed.Microseconds())/total, "µs/delta")
	hostPerRun := elapsed/time.Duration(b.N) - perRun
	b.ReportMetric(float64(hostPerRun.Microseconds())/deltas, "host-µs/delta")
}

// providerAlone returns the mean time the fixture provider needs for one
// run of input when called directly (no engine, no HTTP), over n calls.
func providerAlone(b *testing.B, e *env, input string, n int) time.Duration {
	in := &abi.CompleteInput{
		Model:           modelID,
		Messages:        []abi.Message{{Role: abi.RoleUser, Content: input}},
		MaxOutputTokens: 4096,
		Step:            1,
	}
	start := time.Now()
	for range n {
		if _, err := e.prov.Complete(context.Background(), in, discardSink{}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

type discardSink struct{}

func (discardSink) Text(string)     {}
func (discardSink) Progress()       {}
func (discardSink) Usage(abi.Usage) {}

// BenchmarkSSE32Concurrent runs 32 concurrent bench:deltas:1000 SSE runs
// per op (one subject each) and samples the process's VmRSS every
// millisecond while they run; it reports the highest sample
// (peak-rss-MiB) and VmHWM at the end (vmhwm-MiB; a process-wide high-water
// mark that includes anything that ran before in the same test binary).
// pool=4 is the fixture manifest's pool size (what `adhost serve` uses:
// the runs queue for guest instances); pool=32 gives every run its own
// instance, the worst case for memory. Target: ≤ 400 MiB.
func BenchmarkSSE32Concurrent(b *testing.B) {
	const runs = 32
	for _, pool := range []int{0, runs} {
		name := "pool=4"
		if pool != 0 {
			name = fmt.Sprintf("pool=%d", pool)
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, envOptions{poolSize: pool})
			clients := make([]*client.Client, runs)
			for i := range clients {
				c, err := client.New(e.url, client.WithToken(tokenFor(i)), client.WithHTTPClient(e.hc))
				if err != nil {
					b.Fatal(err)
				}
				clients[i] = c
			}
			req := &protocol.RunRequest{Provider: providerID, Model: modelID, Input: "bench:deltas:1000"}
			op := func() error {
				var wg sync.WaitGroup
				errs := make([]error, runs)
				for i, c := range clients {
					wg.Go(func() {
						res, err := c.Stream(context.Background(), req, nil)
						if err == nil && len(res.Text) != 1000 {
							err = fmt.Errorf("result text %d bytes", len(res.Text))
						}
						errs[i] = err
					})
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						return err
					}
				}
				return nil
			}
			if err := op(); err != nil { // warm: every connection and instance
				e.fail(b, err)
			}
			stop := make(chan struct{})
			peak := make(chan float64, 1)
			go func() {
				var hi float64
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for {
					if v, ok := procStatusMiB("VmRSS"); ok && v > hi {
						hi = v
					}
					select {
					case <-stop:
						peak <- hi
						return
					case <-t.C:
					}
				}
			}()
			b.ResetTimer()
			for range b.N {
				if err := op(); err != nil {
					close(stop)
					e.fail(b, err)
				}
			}
			b.StopTimer()
			close(stop)
			b.ReportMetric(float64(runs*b.N)/b.Elapsed().Seconds(), "runs/s")
			if hi := <-peak; hi > 0 {
				b.ReportMetric(hi, "peak-rss-MiB")
			}
			if hwm, ok := procStatusMiB("VmHWM"); ok {
				b.ReportMetric(hwm, "vmhwm-MiB")
			}
		})
	}
}

// rounds splits n ops into at most k rounds of near-equal size.
func rounds(n, k int) []int {
	k = min(n, k)
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}

// warm runs one op per worker so that connections exist and guest
// instances are created before the timer starts.
func warm(c int, op func(int) error) error {
	_, _, err := hammer(c, 2*c, op)
	return err
}

func reportLatency(b *testing.B, n int, elapsed time.Duration, lat *latencies, unit string) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(n)/elapsed.Seconds(), unit)
	b.ReportMetric(ms(lat.quantile(0.50)), "p50-ms")
	b.ReportMetric(ms(lat.quantile(0.99)), "p99-ms")
}

// bareServer is the baseline handler on its own loopback listener.
type bareServer struct {
	url string
	hc  *http.Client
}

// newBareServer serves a handler that does what any JSON API must do for
// this request — read the body under the same 1,000,000-byte limit, decode
// it into the run request type with encoding/json, and write a JSON answer
// of size bytes with the protocol's response headers — and nothing else.
func newBareServer(tb testing.TB, size int) *bareServer {
	tb.Helper()
	answer := bareAnswer(size)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1_000_000))
		if err != nil {
			http.Error(w, `{"error":{"code":"BODY_TOO_LARGE"}}`, http.StatusRequestEntityTooLarge)
			return
		}
		var req protocol.RunRequest
		if err := json.Unmarshal(b, &req); err != nil || req.Input == "" {
			http.Error(w, `{"error":{"code":"INVALID_REQUEST"}}`, http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set("AgenticDriver-Version", "1.0")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Type", "application/json; charset=utf-8")
		w.Write(answer)
	}))
	hc := newHTTPClient()
	tb.Cleanup(func() {
		hc.CloseIdleConnections()
		ts.Close()
	})
	return &bareServer{url: ts.URL, hc: hc}
}

// bareAnswer is a RunResult-shaped JSON object of exactly size bytes (or
// the shortest such object when size is smaller): the text is padded.
func bareAnswer(size int) []byte {
	const head = `{"runId":"0b1f4c7e-2a0d-4f3b-9c55-6f2e8e7d1a90","provider":"fixture","model":"fixture-model","text":"`
	const tail = `","usage":{},"steps":1,"finishReason":"stop"}`
	pad := max(size-len(head)-len(tail), 0)
	return []byte(head + strings.Repeat("x", pad) + tail)
}
