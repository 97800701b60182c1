package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"adhost/host"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/wasm"
)

const (
	providerID = "fixture"
	modelID    = "fixture-model"
	// maxClients is the number of distinct tokens (subjects) an env
	// registers: the engine admits at most 4 runs per subject, so every
	// concurrent benchmark client uses its own subject, as separate users
	// would.
	maxClients = 32
)

func tokenFor(i int) string {
	return fmt.Sprintf("bench-token-%02d-0123456789abcdef0123456789abcdef", i)
}

// envOptions vary the stack an env builds.
type envOptions struct {
	// poolSize overrides the fixture manifest's poolSize (0 keeps it: 4,
	// what `adhost serve` uses).
	poolSize int
}

// env is the in-process host: the fixture extension, the engine and a
// host.Server listening on a loopback port.
type env struct {
	// log holds the stack's warnings and errors (shown by fail).
	log  *logBuffer
	url  string
	x    *wasm.Extension
	prov runtime.Provider
	eng  *runtime.Engine
	srv  *host.Server
	hc   *http.Client
}

// shared compile cache: compiling the Go guest with wazero takes about a
// second, and every env of the test binary loads the same module.
var compileCache struct {
	once sync.Once
	path string
	sum  string
	err  error
}

func fixtureModule(tb testing.TB) (path, sum string) {
	tb.Helper()
	compileCache.once.Do(func() {
		compileCache.path, compileCache.err = testenv.Build("plugins/fixture")
		if compileCache.err != nil {
			return
		}
		b, err := os.ReadFile(compileCache.path)
		if err != nil {
			compileCache.err = err
			return
		}
		s := sha256.Sum256(b)
		compileCache.sum = hex.EncodeToString(s[:])
	})
	if compileCache.err != nil {
		tb.Fatal(compileCache.err)
	}
	return compileCache.path, compileCache.sum
}

// newEnv builds and serves the stack; tb.Cleanup shuts it down.
func newEnv(tb testing.TB, o envOptions) *env {
	tb.Helper()
	path, sum := fixtureModule(tb)
	ctx := context.Background()
	logs := &logBuffer{}
	quiet := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	x, err := wasm.Load(ctx, wasm.Pin{ID: "fixture", Version: "1.0.0", Path: path, SHA256: sum},
		wasm.Options{Logger: quiet, PoolSize: o.poolSize})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { x.Close(context.Background()) })
	prov, err := x.Provider(wasm.InstanceConfig{ID: providerID})
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{log: logs, x: x, prov: prov}
	e.url, e.eng, e.srv, e.hc = serveHost(tb, x, providerID, "Fixture", prov, quiet)
	return e
}

// serveHost serves provider instance id (prov, bound from x) through an
// engine and a host.Server on a loopback port, with maxClients tokens
// (tokenFor) each of its own subject; tb.Cleanup shuts it down and checks
// the shutdown. It returns the host's URL and a client for it.
func serveHost(tb testing.TB, x *wasm.Extension, id, name string, prov runtime.Provider, logger *slog.Logger) (string, *runtime.Engine, *host.Server, *http.Client) {
	tb.Helper()
	m := x.Manifest()
	inst := &runtime.ProviderInstance{
		ID: id, Name: name, Vendor: m.Vendor, AuthMode: m.AuthMode,
		AccountID: "bench", Models: []string{modelID},
		Capabilities: m.Capabilities, UsageSource: m.UsageSource, Provider: prov,
	}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{inst},
		HostID:    "bench",
		Logger:    logger,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tokens := make([]host.Token, maxClients)
	for i := range tokens {
		tokens[i] = host.Token{ID: "t" + strconv.Itoa(i), Subject: "subject-" + strconv.Itoa(i),
			Secret: tokenFor(i), Providers: []string{id}}
	}
	srv := host.NewServer(host.ServerOptions{Engine: eng, Tokens: tokens, Logger: logger})
	srv.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln, nil) }()
	hc := newHTTPClient()
	tb.Cleanup(func() {
		hc.CloseIdleConnections()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), eng, srv, hc
}

// fail ends the benchmark with err and the host's warnings.
func (e *env) fail(tb testing.TB, err error) {
	tb.Helper()
	tb.Fatalf("%v\nhost log:\n%s", err, e.log)
}

// logBuffer is a goroutine-safe, bounded log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newHTTPClient keeps enough idle connections for 32 concurrent clients,
// so no op pays a TCP handshake after warm-up.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        2 * maxClients,
		MaxIdleConnsPerHost: 2 * maxClients,
		IdleConnTimeout:     time.Minute,
	}}
}

// runBody is the JSON body of a run with input in.
func runBody(in string) []byte {
	return []byte(`{"provider":"` + providerID + `","model":"` + modelID + `","input":"` + in + `"}`)
}

// post sends one POST /v1/runs the way the Go client does (same headers)
// and returns the whole response body. A non-200 status is an error.
func post(hc *http.Client, url, token string, body []byte, stream bool) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/runs", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+token)
	h.Set("AgenticDriver-Version", "1.0")
	h.Set("AgenticDriver-Accept-Optional-Events", "true")
	h.Set("Content-Type", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return b, nil
}

// latencies collects per-op durations from concurrent workers.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// quantile returns the q-quantile (0 < q ≤ 1) by nearest rank.
func (l *latencies) quantile(q float64) time.Duration {
	if len(l.all) == 0 {
		return 0
	}
	slices.Sort(l.all)
	i := int(float64(len(l.all))*q+0.5) - 1
	return l.all[min(max(i, 0), len(l.all)-1)]
}

// hammer runs n ops from c workers (worker i calls op(i)) and returns the
// wall time and the per-op latencies. The first error stops every worker.
func hammer(c, n int, op func(worker int) error) (time.Duration, *latencies, error) {
	var (
		next  atomic.Int64
		lat   latencies
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	lat.all = make([]time.Duration, 0, n)
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/c+1)
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := op(w); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					next.Store(int64(n)) // stop the others
					break
				}
				local = append(local, time.Since(t0))
			}
			lat.add(local)
		})
	}
	wg.Wait()
	return time.Since(start), &lat, first
}

// procStatusMiB reads a "kB" field (VmRSS, VmHWM) of /proc/self/status in
// MiB; ok is false where /proc is not available.
func procStatusMiB(field string) (float64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		rest, found := strings.CutPrefix(line, field+":")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false
		}
		return kb / 1024, true
	}
	return 0, false
}
