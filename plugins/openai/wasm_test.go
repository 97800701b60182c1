//go:build !wasip1

package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/vendorsim"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

// loadWasm builds plugins/openai for wasip1 (once per test binary), loads
// it with its pin, and binds a provider instance to endpoint with the test
// key as its api_key secret.
func loadWasm(t testing.TB, endpoint string) runtime.Provider {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("builds and runs the wasm module; skipped with -short and -race")
	}
	return plugintest.LoadProvider(t, "plugins/openai", pluginID, pluginVersion, endpoint, testKey)
}

// TestWasm runs the real wasm build through runtime/wasm against the
// simulator: the host injects the credential, the guest streams text,
// assembles a tool call, honours cancellation and cannot be steered to
// another origin.
func TestWasm(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
	p := loadWasm(t, s.Endpoint())

	t.Run("text", func(t *testing.T) {
		sink := &plugintest.Sink{}
		out, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioText), sink)
		if err != nil {
			t.Fatal(err)
		}
		if out.Text != "Hello fixture" || sink.Streamed() != out.Text || out.Usage != nil {
			t.Errorf("output %+v, streamed %q", out, sink.Streamed())
		}
		reqs := s.Requests()
		if r := reqs[len(reqs)-1]; r.Credential != vendorsim.CredentialOK || r.Header.Get("Authorization") != "REDACTED" {
			t.Errorf("credential %s, header %q", r.Credential, r.Header.Get("Authorization"))
		}
	})

	t.Run("tools", func(t *testing.T) {
		in := userTurn(vendorsim.ScenarioTools)
		in.Tools = []abi.ToolDef{lookupTool}
		sink := &plugintest.Sink{}
		out, err := p.Complete(t.Context(), in, sink)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.ToolCalls) != 1 || string(out.ToolCalls[0].Arguments) != `{"value":7}` || sink.Progressed() == 0 {
			t.Fatalf("turn 1 %+v, progress %d", out, sink.Progressed())
		}
		call := out.ToolCalls[0]
		in.Messages = append(in.Messages,
			abi.Message{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{call}},
			abi.Message{Role: abi.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: `{"receipt":7}`})
		in.Step = 2
		out, err = p.Complete(t.Context(), in, &plugintest.Sink{})
		if err != nil || out.Text != "tool receipt: 7" {
			t.Fatalf("turn 2 %+v, %v", out, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := s.Cancellations()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sink := &plugintest.Sink{OnProgress: cancel}
		_, err := p.Complete(ctx, userTurn(vendorsim.ScenarioCancel), sink)
		if protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatalf("err = %v, want CANCELLED", err)
		}
		if sink.Progressed() == 0 {
			t.Error("no progress before the hold")
		}
		if err := s.WaitCancelled(t.Context(), before+1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		out, err := p.Inspect(t.Context())
		if err != nil || out.Code != "CATALOG_AVAILABLE" || !out.Complete || len(out.Models) != len(vendorsim.DefaultModels) {
			t.Fatalf("inspect %+v, %v", out, err)
		}
	})

	t.Run("private-error", func(t *testing.T) {
		_, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioPrivateError), &plugintest.Sink{})
		pe := protocol.AsPublic(err)
		if pe.Code != protocol.CodeProviderError || strings.Contains(pe.Message, vendorsim.SecretMarker) {
			t.Fatalf("err = %+v", pe)
		}
	})
}

// TestWasmRedirectToOtherOrigin: a configured endpoint that redirects to
// another server does not make the guest reach it (the host never follows
// redirects), and the credential never travels there.
func TestWasmRedirectToOtherOrigin(t *testing.T) {
	other := vendorsim.MustNew(t, "openai", vendorsim.Options{})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.Endpoint()+"chat/completions", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	p := loadWasm(t, redirector.URL+"/v1/")
	_, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioText), &plugintest.Sink{})
	if protocol.CodeOf(err) != protocol.CodeProviderUnreachable {
		t.Fatalf("err = %v, want PROVIDER_UNREACHABLE", err)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
}

// BenchmarkWasmStreamEvents measures guest+host time per vendor SSE event
// through the real wasm build (close-on-done on, as in production): turns
// of 2000 ~300-byte content chunks from a loopback server replaying
// prepared bytes. cpu-ns/event is the process's CPU time (user+sys, the
// server's small share included) per event: on a loaded machine it is the
// steadier figure.
func BenchmarkWasmStreamEvents(b *testing.B) { benchEvents(b, textChunk) }

// BenchmarkWasmEventShapes splits the per-event cost: the ABI path alone
// (a minimal chunk), scanning (a full-size chunk without choices) and
// emitting (a minimal chunk with content).
func BenchmarkWasmEventShapes(b *testing.B) {
	long := strings.Replace(textChunk, `"choices":[{"index":0,"delta":{"content":" the quick brown"},"logprobs":null,"finish_reason":null}]`, `"choices":[]`, 1)
	for _, tc := range []struct{ name, chunk string }{
		{"tiny", `{"choices":[]}`},
		{"scan-only", long},
		{"emit-only", `{"choices":[{"delta":{"content":"x"}}]}`},
		{"full", textChunk},
	} {
		b.Run(tc.name, func(b *testing.B) { benchEvents(b, tc.chunk) })
	}
}

func benchEvents(b *testing.B, chunkJSON string) {
	const events, batch = 2000, 100
	// The server writes batches of events so that its own syscalls do not
	// dominate; the host still frames and hands over one event per call.
	block := []byte(strings.Repeat("data: "+chunkJSON+"\n\n", batch))
	turn := &vendorsim.Turn{Status: 200, ContentType: "text/event-stream", Response: block,
		Repeat: block, RepeatBytes: int64(len(block) * events / batch), Tail: []byte("data: [DONE]\n\n")}
	script := make([]*vendorsim.Turn, 0, 1<<16)
	for range cap(script) {
		script = append(script, turn)
	}
	s := vendorsim.MustNew(b, "openai", vendorsim.Options{Script: script})
	p := loadWasm(b, s.Endpoint())
	in := userTurn("bench")
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := p.Complete(b.Context(), in, &plugintest.Sink{}); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * events)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n, "cpu-ns/event")
}

// BenchmarkAdapterVsDirect compares one model turn through the wasm
// adapter (runtime/wasm → guest → host HTTP → loopback server) with the
// same Chat Completions request sent straight to that server, at 8
// concurrent clients. It reports latency percentiles per path; throughput
// is the inverse of ns/op. (The full host — HTTP transport and run engine
// in front — is measured by make bench.)
func BenchmarkAdapterVsDirect(b *testing.B) {
	s := vendorsim.MustNew(b, "openai", vendorsim.Options{})
	p := loadWasm(b, s.Endpoint())
	in := userTurn(vendorsim.ScenarioText)
	body, err := buildRequest(&config{endpoint: s.Endpoint(), maxTokensField: maxCompletionTokens, includeUsage: true, structuredOutput: true}, in)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	direct := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.Endpoint()+"chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	adapter := func(ctx context.Context) error {
		_, err := p.Complete(ctx, in, &plugintest.Sink{})
		return err
	}
	for _, tc := range []struct {
		name string
		fn   func(context.Context) error
	}{{"direct", direct}, {"adapter", adapter}} {
		b.Run(tc.name, func(b *testing.B) {
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(max(1, 8/goruntime.GOMAXPROCS(0)))
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					if err := tc.fn(b.Context()); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

// TestWasmNoCredential: an api_key secret the host cannot resolve (an
// unset environment variable) sends nothing upstream; the turn fails with
// AUTH_REQUIRED and the discovery probe reports AUTH_REQUIRED, whatever
// the adapter made of the refused request.
func TestWasmNoCredential(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and runs the wasm module; skipped with -short and -race")
	}
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
	p := plugintest.LoadProvider(t, "plugins/openai", pluginID, pluginVersion, s.Endpoint(), "")
	_, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioText), &plugintest.Sink{})
	if code := protocol.CodeOf(err); code != protocol.CodeAuthRequired {
		t.Errorf("Complete: code %s (%v), want AUTH_REQUIRED", code, err)
	}
	ins, ok := p.(interface {
		Inspect(context.Context) (*abi.InspectOutput, error)
	})
	if !ok {
		t.Fatal("provider has no Inspect")
	}
	out, err := ins.Inspect(t.Context())
	if err != nil || out.Code != "AUTH_REQUIRED" {
		t.Errorf("Inspect = %+v, %v; want code AUTH_REQUIRED", out, err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests reached the upstream without a credential", n)
	}
}

// TestWasmRetryAfter: a 429's Retry-After reaches the engine as the
// error's RetryAfter (its opt-in retries wait at least that long), and
// nothing else of the vendor's answer does.
func TestWasmRetryAfter(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
	p := loadWasm(t, s.Endpoint())
	_, err := p.Complete(t.Context(), userTurn(vendorsim.FaultPrefix+string(vendorsim.FaultRateLimit)), &plugintest.Sink{})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeRateLimited || pe.RetryAfter != 2*time.Second {
		t.Fatalf("err = %#v, want RATE_LIMITED with RetryAfter 2s", err)
	}
	if strings.Contains(pe.Message, "Rate limit reached") {
		t.Errorf("vendor message in the public error: %q", pe.Message)
	}
}
