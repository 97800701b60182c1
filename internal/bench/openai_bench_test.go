package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"adhost/internal/testenv"
	"adhost/internal/vendorsim"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

const (
	// openaiProviderID is the provider instance the openai extension is
	// bound to, pointed at the loopback simulator.
	openaiProviderID = "openai-sim"
	// openaiKey is the simulator's API key, the instance's api_key secret.
	openaiKey = "sk-bench-openai-0123456789abcdef"
	// adapterClients is the concurrency of BenchmarkOpenAIAdapter.
	adapterClients = 8
	// adapterInput is the conformance scenario every op runs.
	adapterInput = "conformance:text"
)

// directChatBody is the Chat Completions request the openai adapter sends
// for a run of adapterInput with the engine's default output bound
// (runtime.DefaultMaxOutputTokens) and the instance's default settings
// (max_completion_tokens, include_usage). newOpenAIEnv checks it against
// the body the simulator recorded for a run through the host.
var directChatBody = []byte(`{"model":"` + modelID + `","messages":[{"role":"user","content":"` + adapterInput + `"}],` +
	`"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":` +
	strconv.Itoa(runtime.DefaultMaxOutputTokens) + `}`)

// openaiRunBody is the JSON body of a run of adapterInput on the simulator
// instance.
var openaiRunBody = []byte(`{"provider":"` + openaiProviderID + `","model":"` + modelID + `","input":"` + adapterInput + `"}`)

// openaiEnv is the in-process host serving the openai extension, bound to
// a loopback OpenAI-compatible simulator.
type openaiEnv struct {
	log *logBuffer
	sim *vendorsim.Server
	url string // the host
	hc  *http.Client
}

// newOpenAIEnv builds plugins/openai for wasip1, starts the simulator, and
// serves the stack (host.Server → engine → openai wasm → simulator) on a
// loopback port; tb.Cleanup shuts it down.
func newOpenAIEnv(tb testing.TB) *openaiEnv {
	tb.Helper()
	sim := vendorsim.MustNew(tb, "openai", vendorsim.Options{APIKey: openaiKey})
	path := testenv.BuildPlugin(tb, "plugins/openai")
	mod, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(mod)
	ctx := context.Background()
	logs := &logBuffer{}
	quiet := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	x, err := wasm.Load(ctx, wasm.Pin{ID: "openai", Version: "1.0.0", Path: path, SHA256: hex.EncodeToString(sum[:])},
		wasm.Options{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { x.Close(context.Background()) })
	settings, err := json.Marshal(map[string]string{"endpoint": sim.Endpoint()})
	if err != nil {
		tb.Fatal(err)
	}
	prov, err := x.Provider(wasm.InstanceConfig{
		ID:       openaiProviderID,
		Settings: settings,
		Secrets: map[string]func(context.Context) (string, error){
			"api_key": func(context.Context) (string, error) { return openaiKey, nil },
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	e := &openaiEnv{log: logs, sim: sim}
	e.url, _, _, e.hc = serveHost(tb, x, openaiProviderID, "OpenAI simulator", prov, quiet)

	// The direct request must be the one the adapter sends for a streamed
	// turn. (A JSON-mode run may be Buffered: the adapter then asks for
	// one non-streamed answer instead.)
	if err := e.sseRun(0); err != nil {
		e.fail(tb, err)
	}
	reqs := sim.Requests()
	if len(reqs) == 0 {
		tb.Fatal("the simulator recorded no request")
	}
	last := reqs[len(reqs)-1]
	if last.Credential != vendorsim.CredentialOK || !bytes.Equal(last.Body, directChatBody) {
		tb.Fatalf("adapter request (credential %s):\n%s\ndirect request:\n%s", last.Credential, last.Body, directChatBody)
	}
	return e
}

// fail ends the test with err and the host's warnings.
func (e *openaiEnv) fail(tb testing.TB, err error) {
	tb.Helper()
	tb.Fatalf("%v\nhost log:\n%s", err, e.log)
}

// jsonRun is one JSON run through the host; the result must be the
// simulator's answer.
func (e *openaiEnv) jsonRun(w int) error {
	b, err := post(e.hc, e.url, tokenFor(w), openaiRunBody, false)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(`"text":"Hello fixture"`)) {
		return fmt.Errorf("JSON run answered %.300s", b)
	}
	return nil
}

// sseRun is one SSE run through the host, read to its terminal event.
func (e *openaiEnv) sseRun(w int) error {
	b, err := post(e.hc, e.url, tokenFor(w), openaiRunBody, true)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("\nevent: run.completed\n")) {
		return fmt.Errorf("SSE run ended without run.completed: %.300s", b)
	}
	return nil
}

// direct sends directChatBody straight to the simulator with hc, as the
// host sends it for the adapter, and reads the whole SSE answer.
func (e *openaiEnv) direct(hc *http.Client) error {
	req, err := http.NewRequest(http.MethodPost, e.sim.Endpoint()+"chat/completions", bytes.NewReader(directChatBody))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+openaiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
		return fmt.Errorf("direct: status %d: %.300s", resp.StatusCode, b)
	}
	return nil
}

// adapterResult is what one measured sub-benchmark invocation saw.
type adapterResult struct {
	n       int
	elapsed time.Duration
	p50     time.Duration
}

func (r adapterResult) perSecond() float64 { return float64(r.n) / r.elapsed.Seconds() }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkOpenAIAdapter measures a run of conformance:text through the
// openai extension (host.Server → engine → openai wasm → host HTTP →
// loopback vendorsim OpenAI-compatible server) beside the same Chat
// Completions request sent straight to that server, at 8 concurrent
// clients (one subject each):
//
//   - direct: the adapter's request body POSTed to the simulator, the
//     whole SSE answer read;
//   - json: POST /v1/runs with a JSON answer;
//   - sse: the same run with Accept: text/event-stream, read to the
//     terminal event.
//
// Each reports runs/s, p50-µs and p99-µs; json and sse also report
// direct-ratio (their throughput over direct's, target ≥ 0.25 for json)
// and added-p50-µs (their p50 minus direct's, target ≤ 1000 for json).
// direct runs first in the same benchmark function, so the ratios compare
// numbers of one run. Because another process's load can change between
// the sub-benchmarks, json and sse also alternate untimed rounds of direct
// (same clients, same op count) with their timed rounds, as
// BenchmarkJSONRun does, and report paired-ratio and paired-added-p50-µs
// against those; when a -bench pattern leaves direct out, direct-ratio
// and added-p50-µs fall back to the paired rounds.
func BenchmarkOpenAIAdapter(b *testing.B) {
	e := newOpenAIEnv(b)
	directHC := newHTTPClient()
	b.Cleanup(directHC.CloseIdleConnections)
	directOp := func(int) error { return e.direct(directHC) }

	var base *adapterResult
	// measure runs b.N ops of op from adapterClients workers and reports
	// runs/s, p50-µs and p99-µs. With paired, untimed rounds of direct
	// with the same op count alternate with the timed rounds (as in
	// BenchmarkJSONRun), and it returns direct's result from them too.
	measure := func(b *testing.B, op func(int) error, paired bool) (r, pd adapterResult) {
		if err := warm(adapterClients, op); err != nil {
			e.fail(b, err)
		}
		if paired {
			if err := warm(adapterClients, directOp); err != nil {
				b.Fatal(err)
			}
		}
		var lat, dlat latencies
		b.ResetTimer()
		for _, n := range rounds(b.N, 4) {
			b.StartTimer()
			d, l, err := hammer(adapterClients, n, op)
			b.StopTimer()
			if err != nil {
				e.fail(b, err)
			}
			r.elapsed += d
			lat.add(l.all)
			if paired {
				d, l, err = hammer(adapterClients, n, directOp)
				if err != nil {
					b.Fatal(err)
				}
				pd.elapsed += d
				dlat.add(l.all)
			}
		}
		r.n, r.p50 = b.N, lat.quantile(0.50)
		pd.n, pd.p50 = b.N, dlat.quantile(0.50)
		b.ReportMetric(r.perSecond(), "runs/s")
		b.ReportMetric(micros(r.p50), "p50-µs")
		b.ReportMetric(micros(lat.quantile(0.99)), "p99-µs")
		return r, pd
	}
	// compare reports r against direct: the direct sub-benchmark's result
	// (measured on its own; measured here when a -bench pattern left it
	// out) and the paired rounds.
	compare := func(b *testing.B, r, pd adapterResult) {
		d := base
		if d == nil {
			d = &pd
		}
		b.ReportMetric(r.perSecond()/d.perSecond(), "direct-ratio")
		b.ReportMetric(micros(r.p50-d.p50), "added-p50-µs")
		b.ReportMetric(r.perSecond()/pd.perSecond(), "paired-ratio")
		b.ReportMetric(micros(r.p50-pd.p50), "paired-added-p50-µs")
	}

	b.Run("direct", func(b *testing.B) {
		r, _ := measure(b, directOp, false)
		base = &r
	})
	b.Run("json", func(b *testing.B) {
		r, pd := measure(b, e.jsonRun, true)
		compare(b, r, pd)
	})
	b.Run("sse", func(b *testing.B) {
		r, pd := measure(b, e.sseRun, true)
		compare(b, r, pd)
	})
}

// TestOpenAIAdapterSmoke checks once that the three paths of
// BenchmarkOpenAIAdapter work (it builds the openai extension, so -short
// skips it).
func TestOpenAIAdapterSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the openai extension and serves it")
	}
	e := newOpenAIEnv(t)
	if err := e.direct(e.hc); err != nil {
		t.Fatal(err)
	}
	if err := e.sseRun(1); err != nil {
		e.fail(t, err)
	}
	body, err := post(e.hc, e.url, tokenFor(2), openaiRunBody, false)
	if err != nil {
		e.fail(t, err)
	}
	var res protocol.RunResult
	if err := json.Unmarshal(body, &res); err != nil || res.Text != "Hello fixture" || res.Provider != openaiProviderID {
		t.Fatalf("JSON run = %s (%v)", body, err)
	}
}
