package main

import (
	"context"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/vendorsim"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

// loadWasm builds plugins/gemini for wasip1 (once per test binary) with
// its manifest embedded, loads it with its pin, and binds a provider
// instance to endpoint with the test key as its api_key secret.
func loadWasm(t testing.TB, endpoint string) runtime.Provider {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the wasm module; skipped with -short")
	}
	return plugintest.LoadProvider(t, "plugins/gemini", "gemini", version, endpoint, testKey)
}

// TestWasm runs the real wasm build through runtime/wasm against the
// simulator: the host injects x-goog-api-key, the guest streams text, makes
// a tool call and carries its thought signature back, honours cancellation,
// and keeps the vendor's error body private.
func TestWasm(t *testing.T) {
	s := vendorsim.MustNew(t, "gemini", vendorsim.Options{APIKey: testKey})
	p := loadWasm(t, s.Endpoint())

	t.Run("text", func(t *testing.T) {
		sink := &plugintest.Sink{}
		out, err := p.Complete(t.Context(), input(vendorsim.ScenarioText), sink)
		if err != nil {
			t.Fatal(err)
		}
		if out.Text != "Hello fixture" || sink.Streamed() != out.Text || out.Usage != nil {
			t.Errorf("output %+v, streamed %q", out, sink.Streamed())
		}
		reqs := s.Requests()
		r := reqs[len(reqs)-1]
		if r.Credential != vendorsim.CredentialOK || r.Header.Get("x-goog-api-key") != "REDACTED" || strings.Contains(r.RawQuery, "key=") {
			t.Errorf("credential %s, query %q", r.Credential, r.RawQuery)
		}
	})

	t.Run("tools", func(t *testing.T) {
		in := input(vendorsim.ScenarioTools)
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
		in.Step, in.Native = 2, out.Native
		out, err = p.Complete(t.Context(), in, &plugintest.Sink{})
		if err != nil || out.Text != "tool receipt: 7" {
			t.Fatalf("turn 2 %+v, %v", out, err)
		}
	})

	t.Run("usage", func(t *testing.T) {
		out, err := p.Complete(t.Context(), input(vendorsim.FaultPrefix+string(vendorsim.FaultUsage)), &plugintest.Sink{})
		if err != nil {
			t.Fatal(err)
		}
		if u := out.Usage; u == nil || *u.InputTokens != 100 || *u.CachedInputTokens != 64 || *u.OutputTokens != 40 || *u.ReasoningTokens != 16 {
			t.Errorf("usage %+v", out.Usage)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := s.Cancellations()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sink := &plugintest.Sink{OnProgress: cancel}
		in := input(vendorsim.ScenarioCancel)
		in.Tools = []abi.ToolDef{lookupTool}
		_, err := p.Complete(ctx, in, sink)
		if protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatalf("err = %v, want CANCELLED", err)
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

	for _, tc := range []struct {
		in   string
		code protocol.Code
	}{
		{vendorsim.ScenarioPrivateError, protocol.CodeProviderError},
		{vendorsim.FaultPrefix + string(vendorsim.FaultRateLimit), protocol.CodeRateLimited},
		{vendorsim.FaultPrefix + string(vendorsim.FaultTruncated), protocol.CodeIncompleteStream},
		{vendorsim.FaultPrefix + string(vendorsim.FaultStreamError), protocol.CodeProviderFailed},
		{vendorsim.FaultPrefix + string(vendorsim.FaultRefusal), protocol.CodeProviderRefusal},
		{vendorsim.FaultPrefix + string(vendorsim.FaultUnauthorized), protocol.CodeProviderAuth},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := p.Complete(t.Context(), input(tc.in), &plugintest.Sink{})
			pe := protocol.AsPublic(err)
			if pe.Code != tc.code || strings.Contains(pe.Message, vendorsim.SecretMarker) || strings.Contains(err.Error(), vendorsim.SecretMarker) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// BenchmarkWasmStreamEvents measures guest+host time per vendor SSE event
// through the real wasm build (close-on-done on, as in production): one turn
// streams 2000 ~250-byte GenerateContentResponse chunks from a loopback
// server that replays prepared bytes.
func BenchmarkWasmStreamEvents(b *testing.B) {
	const events = 2000
	chunk := []byte("data: " + `{"candidates": [{"content": {"parts": [{"text": " the quick brown fox"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash","responseId": "mdJoaN6kLqGBz7IPvLjD0Qo"}` + "\r\n\r\n")
	tail := "data: " + finalChunk("STOP", `{"promptTokenCount":8,"candidatesTokenCount":2000,"totalTokenCount":2008}`) + "\r\n\r\n"
	turn := &vendorsim.Turn{Status: 200, ContentType: "text/event-stream", Response: chunk,
		Repeat: chunk, RepeatBytes: int64(len(chunk) * events), Tail: []byte(tail)}
	script := make([]*vendorsim.Turn, 0, 1<<16)
	for range cap(script) {
		script = append(script, turn)
	}
	s := vendorsim.MustNew(b, "gemini", vendorsim.Options{Script: script})
	p := loadWasm(b, s.Endpoint())
	in := input("bench")
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		out, err := p.Complete(b.Context(), in, &plugintest.Sink{})
		if err != nil {
			b.Fatalf("complete: %v", err)
		}
		if len(out.Text) != events*len(" the quick brown fox") {
			b.Fatalf("text of %d bytes", len(out.Text))
		}
	}
	n := float64(b.N * (events + 1))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n, "cpu-ns/event")
}
