package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/internal/testenv"
	"adhost/internal/vendorsim"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

// turnSink records what the wasm runtime streamed.
type turnSink struct {
	mu       sync.Mutex
	text     strings.Builder
	progress int
	onProg   func()
}

func (s *turnSink) Text(d string)   { s.mu.Lock(); s.text.WriteString(d); s.mu.Unlock() }
func (s *turnSink) Usage(abi.Usage) {}
func (s *turnSink) Progress() {
	s.mu.Lock()
	s.progress++
	f := s.onProg
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

var _ runtime.TurnSink = (*turnSink)(nil)

// loadWasm builds plugins/openai for wasip1 (once per test binary), loads
// it with its pin, and binds a provider instance to endpoint with the test
// key as its api_key secret.
func loadWasm(t testing.TB, endpoint string) runtime.Provider {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("builds and runs the wasm module; skipped with -short and -race")
	}
	path := testenv.BuildPlugin(t, "plugins/openai")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: pluginID, Version: pluginVersion, Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(context.Background()) })
	settings, _ := json.Marshal(map[string]string{"endpoint": endpoint})
	p, err := x.Provider(wasm.InstanceConfig{
		ID:       "openai-test",
		Settings: settings,
		Secrets: map[string]func(context.Context) (string, error){
			"api_key": func(context.Context) (string, error) { return testKey, nil },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWasm runs the real wasm build through runtime/wasm against the
// simulator: the host injects the credential, the guest streams text,
// assembles a tool call, honours cancellation and cannot be steered to
// another origin.
func TestWasm(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
	p := loadWasm(t, s.Endpoint())

	t.Run("text", func(t *testing.T) {
		sink := &turnSink{}
		out, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioText), sink)
		if err != nil {
			t.Fatal(err)
		}
		if out.Text != "Hello fixture" || sink.text.String() != out.Text || out.Usage != nil {
			t.Errorf("output %+v, streamed %q", out, sink.text.String())
		}
		reqs := s.Requests()
		if r := reqs[len(reqs)-1]; r.Credential != vendorsim.CredentialOK || r.Header.Get("Authorization") != "REDACTED" {
			t.Errorf("credential %s, header %q", r.Credential, r.Header.Get("Authorization"))
		}
	})

	t.Run("tools", func(t *testing.T) {
		in := userTurn(vendorsim.ScenarioTools)
		in.Tools = []abi.ToolDef{lookupTool}
		sink := &turnSink{}
		out, err := p.Complete(t.Context(), in, sink)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.ToolCalls) != 1 || string(out.ToolCalls[0].Arguments) != `{"value":7}` || sink.progress == 0 {
			t.Fatalf("turn 1 %+v, progress %d", out, sink.progress)
		}
		call := out.ToolCalls[0]
		in.Messages = append(in.Messages,
			abi.Message{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{call}},
			abi.Message{Role: abi.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: `{"receipt":7}`})
		in.Step = 2
		out, err = p.Complete(t.Context(), in, &turnSink{})
		if err != nil || out.Text != "tool receipt: 7" {
			t.Fatalf("turn 2 %+v, %v", out, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := s.Cancellations()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sink := &turnSink{onProg: cancel}
		_, err := p.Complete(ctx, userTurn(vendorsim.ScenarioCancel), sink)
		if protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatalf("err = %v, want CANCELLED", err)
		}
		if sink.progress == 0 {
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
		_, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioPrivateError), &turnSink{})
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
	_, err := p.Complete(t.Context(), userTurn(vendorsim.ScenarioText), &turnSink{})
	if protocol.CodeOf(err) != protocol.CodeProviderUnreachable {
		t.Fatalf("err = %v, want PROVIDER_UNREACHABLE", err)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
}

// BenchmarkWasmStreamEvents measures guest+host time per vendor SSE event
// through the real wasm build (close-on-done on, as in production): one
// turn streams events ~300-byte content chunks from a loopback server that
// replays prepared bytes, so the server's own cost stays small.
func BenchmarkWasmStreamEvents(b *testing.B) {
	const events = 2000
	chunk := []byte("data: " + textChunk + "\n\n")
	turn := &vendorsim.Turn{
		Status:      200,
		ContentType: "text/event-stream",
		Response:    []byte("data: " + strings.Replace(textChunk, `"content":" the quick brown"`, `"role":"assistant","content":""`, 1) + "\n\n"),
		Repeat:      chunk,
		RepeatBytes: int64(len(chunk) * events),
		Tail:        []byte("data: [DONE]\n\n"),
	}
	script := make([]*vendorsim.Turn, 0, 1<<16)
	for range cap(script) {
		script = append(script, turn)
	}
	s := vendorsim.MustNew(b, "openai", vendorsim.Options{Script: script})
	p := loadWasm(b, s.Endpoint())
	in := userTurn("bench")
	b.ReportAllocs()
	for b.Loop() {
		out, err := p.Complete(b.Context(), in, &turnSink{})
		if err != nil || len(out.Text) < (events-1)*len(" the quick brown") {
			b.Fatalf("complete: %v", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+2)), "ns/event")
}

// BenchmarkWasmTinyEvents is BenchmarkWasmStreamEvents with minimal chunks
// ({"choices":[]}): what remains is the per-event cost of the ABI path
// (framing, http_next_event, the guest's loop), not of scanning.
func BenchmarkWasmTinyEvents(b *testing.B) {
	const events = 2000
	chunk := []byte("data: {\"choices\":[]}\n\n")
	turn := &vendorsim.Turn{Status: 200, ContentType: "text/event-stream", Response: chunk,
		Repeat: chunk, RepeatBytes: int64(len(chunk) * events), Tail: []byte("data: [DONE]\n\n")}
	script := make([]*vendorsim.Turn, 0, 1<<16)
	for range cap(script) {
		script = append(script, turn)
	}
	s := vendorsim.MustNew(b, "openai", vendorsim.Options{Script: script})
	p := loadWasm(b, s.Endpoint())
	in := userTurn("bench")
	for b.Loop() {
		if _, err := p.Complete(b.Context(), in, &turnSink{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
