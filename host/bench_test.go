package host

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks behind the targets of issue 3 (make bench): host overhead
// per JSON and SSE run with a fake provider at 1 and 8 concurrent clients,
// beside a bare net/http handler that decodes the same body and writes a
// same-sized answer (compare ns/op of BenchmarkHostJSONRun and
// BenchmarkBareHandler at the same concurrency for the ratio), and SSE
// throughput of a 1,000-delta run. p99-ms is reported per benchmark.

var benchConcurrency = []int{1, 8}

// runConcurrent runs op from c goroutines, each with its own index (the
// host's per-subject limit is 4, so each goroutine is its own subject),
// and reports the p99 latency.
func runConcurrent(b *testing.B, c int, op func(i int) error) {
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range c {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/c+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	if len(lat) > 0 {
		slices.Sort(lat)
		p99 := lat[min(len(lat)-1, len(lat)*99/100)]
		b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
	}
}

func postRun(hc *http.Client, url, token, body string, stream bool) error {
	req, _ := http.NewRequest("POST", url+"/v1/runs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + http.StatusText(e.code) }

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
}

func BenchmarkHostJSONRun(b *testing.B) {
	for _, c := range benchConcurrency {
		b.Run("c"+itoa(c), func(b *testing.B) {
			env := newEnv(b, envOptions{benchTokens: c})
			hc := benchClient()
			defer hc.CloseIdleConnections()
			body := runBody("conformance:text")
			runConcurrent(b, c, func(i int) error { return postRun(hc, env.ts.URL, benchToken(i), body, false) })
		})
	}
}

func BenchmarkHostSSERun(b *testing.B) {
	for _, c := range benchConcurrency {
		b.Run("c"+itoa(c), func(b *testing.B) {
			env := newEnv(b, envOptions{benchTokens: c})
			hc := benchClient()
			defer hc.CloseIdleConnections()
			body := runBody("conformance:text")
			runConcurrent(b, c, func(i int) error { return postRun(hc, env.ts.URL, benchToken(i), body, true) })
		})
	}
}

// BenchmarkBareHandler is the baseline: a net/http handler that decodes the
// same JSON body and writes a JSON answer of the same size as the host's.
func BenchmarkBareHandler(b *testing.B) {
	answer := []byte(`{"runId":"0b1f4c7e-2a0d-4f3b-9c55-6f2e8e7d1a90","provider":"fake","model":"fake-model","text":"Hello world","usage":{},"steps":1,"finishReason":"stop"}`)
	for _, c := range benchConcurrency {
		b.Run("c"+itoa(c), func(b *testing.B) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m map[string]any
				if err := json.NewDecoder(io.LimitReader(r.Body, MaxBodyBytes)).Decode(&m); err != nil {
					http.Error(w, "bad", 400)
					return
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.Write(answer)
			}))
			defer ts.Close()
			hc := benchClient()
			defer hc.CloseIdleConnections()
			body := runBody("conformance:text")
			runConcurrent(b, c, func(i int) error { return postRun(hc, ts.URL, testToken, body, false) })
		})
	}
}

// BenchmarkSSEDeltas streams a 1,000-delta run per op and reports deltas
// delivered per second (the provider's deltas; the engine may merge
// adjacent ones into fewer frames).
func BenchmarkSSEDeltas(b *testing.B) {
	env := newEnv(b, envOptions{benchTokens: 1})
	hc := benchClient()
	defer hc.CloseIdleConnections()
	body := runBody("deltas:1000")
	b.ResetTimer()
	for b.Loop() {
		if err := postRun(hc, env.ts.URL, benchToken(0), body, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "deltas/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(1000*b.N), "µs/delta")
}

func BenchmarkAppendFrame(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 200)
	buf := make([]byte, 0, 4096)
	ev := struct{}{}
	_ = ev
	b.ReportAllocs()
	for b.Loop() {
		buf = appendFrame(buf[:0], eventOf("text.delta", 123456, data))
	}
	_ = runtime.NumGoroutine
}
