package host

import (
	"bytes"
	"context"
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

	"github.com/gorilla/mux"

	adhostruntime "adhost/runtime"
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

// BenchmarkRoute is the cost of steps 7–8 alone, per request: the mux
// lookup (lookup, what dispatch calls) against the hand-written table it
// replaced (legacyRoute), on the hot path, a query route, a wrong method,
// an unknown path, and — with the whole endpoint inventory of wire-core
// §1.1 registered (twenty routes) — the last route. The difference of the
// ns/op figures is what mux adds to a request (target ≤ 2 µs; see
// host/RATIONALE.md for the figures).
func BenchmarkRoute(b *testing.B) {
	noop := func(http.ResponseWriter, *http.Request, *adhostruntime.Principal) {}
	core := (&Server{}).routes()
	inventory := append([]route{}, core...)
	for _, target := range []string{
		"/v1/jobs/submit", "/v1/jobs/read", "/v1/jobs/cancel", "/v1/jobs/events",
		"/v1/sessions/create", "/v1/sessions/read", "/v1/sessions/delete",
		"/v1/approvals/decisions",
		"/v1/tool-executions/progress", "/v1/tool-executions/results",
		"/v1/management/providers",
		"/v1/retrieval/search", "/v1/retrieval/index", "/v1/retrieval/delete", "/v1/retrieval/ingest",
	} {
		inventory = append(inventory, route{http.MethodPost, target, noop})
	}
	inventory = slices.Insert(inventory, len(core), route{http.MethodGet, "/v1/management", noop})
	notFound := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	routers := []struct {
		name string
		rt   *mux.Router
	}{
		{"mux4", newRouter(core, notFound)},
		{"mux" + itoa(len(inventory)), newRouter(inventory, notFound)},
	}
	// The alternative not taken: Router.ServeHTTP with plain handlers and
	// the principal in the request's context.
	type principalKey struct{}
	serve := mux.NewRouter().SkipClean(true).UseEncodedPath()
	serve.NotFoundHandler, serve.MethodNotAllowedHandler = notFound, notFound
	for _, e := range core {
		serve.NewRoute().MatcherFunc(exactTarget(e.target)).Methods(e.method).HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			noop(w, r, r.Context().Value(principalKey{}).(*adhostruntime.Principal))
		})
	}
	p := &adhostruntime.Principal{}

	for _, tc := range []struct{ name, method, target string }{
		{"runs", "POST", "/v1/runs"},
		{"refresh", "GET", "/v1/providers?refresh=true"},
		{"wrong-method", "GET", "/v1/runs"},
		{"unknown", "GET", "/v1/nope"},
		{"last", "POST", "/v1/retrieval/ingest"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		b.Run("table/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				routeSink = legacyRoute(r)
			}
		})
		for _, rt := range routers {
			b.Run(rt.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					handlerSink = lookup(rt.rt, r)
				}
			})
		}
		b.Run("mux4-servehttp/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				serve.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
			}
		})
	}
}

var (
	routeSink   int
	handlerSink http.Handler
)

// legacyRoute is the route table mux replaced (steps 7–8 as a switch on
// the method and the exact raw target), kept as BenchmarkRoute's baseline.
func legacyRoute(r *http.Request) int {
	target := r.RequestURI
	switch {
	case r.Method == http.MethodGet && target == "/v1/protocol":
		return 0
	case r.Method == http.MethodGet && target == "/v1/providers":
		return 1
	case r.Method == http.MethodGet && target == "/v1/providers?refresh=true":
		return 2
	case r.Method == http.MethodPost && target == "/v1/runs":
		return 3
	default:
		return -1
	}
}
