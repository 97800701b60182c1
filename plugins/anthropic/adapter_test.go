package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/internal/vendorsim/simtest"
	"adhost/runtime/manifest"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txtar from what the adapter did")

// testKey is the API key the simulator expects; the fake host injects it the
// way the manifest's credential slot says, so the adapter never handles it.
const testKey = "sk-ant-test-key"

func loadManifest(t testing.TB) *manifest.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "anthropic.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hostOptions are the fake host's options for settings, as the real host
// would set them from the manifest (simtest.ManifestHostOptions).
func hostOptions(t testing.TB, settings []byte) sdktest.Options {
	t.Helper()
	return simtest.ManifestHostOptions(loadManifest(t), settings, testKey)
}

// TestTranscripts replays testdata/*.txtar: recorded Messages API exchanges
// based on Anthropic's published examples.
func TestTranscripts(t *testing.T) {
	simtest.ReplayDir(t, "testdata", simtest.ReplayOptions{Vendor: "anthropic", APIKey: testKey, Update: *update, Run: simtest.ManifestRunner(provider{}, loadManifest(t))})
}

// TestTranscriptsNeverLeak checks that no recorded error or output carries
// the private marker a vendor body may contain.
func TestTranscriptsNeverLeak(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	for _, f := range files {
		c, err := vendorsim.LoadCase(f)
		if err != nil {
			t.Fatal(err)
		}
		s := vendorsim.MustNew(t, "anthropic", vendorsim.Options{Script: c.Turns, APIKey: testKey})
		settings := []byte(`{"endpoint":"` + s.Endpoint() + `"}`)
		for _, turn := range c.Turns {
			if turn.Op != vendorsim.OpComplete || turn.RepeatBytes > 0 {
				continue // oversize streams are covered by TestTranscripts
			}
			r := sdktest.Complete(t, provider{}, turn.Input, hostOptions(t, settings))
			if r.Error != nil && strings.Contains(r.Error.Message, vendorsim.SecretMarker) {
				t.Errorf("%s: error message carries the vendor's body: %q", f, r.Error.Message)
			}
		}
	}
}

func TestManifestAndInfo(t *testing.T) {
	m := loadManifest(t)
	info := sdktest.Info(t, sdk.Registered())
	if info.ID != m.ID || info.Version != m.Version || info.Kind != m.Kind {
		t.Errorf("info %+v does not match manifest %s %s %s", info, m.ID, m.Version, m.Kind)
	}
	if !m.Capability("tools") || !m.Capability("textStreaming") || !m.Inspect {
		t.Error("manifest must declare tools, textStreaming and inspect")
	}
	if m.Network.Headers["anthropic-version"] != "2023-06-01" {
		t.Error("anthropic-version must be a static manifest header")
	}
	if len(m.Credentials) != 1 || m.Credentials[0].Header != "x-api-key" || m.Credentials[0].Prefix != "" {
		t.Errorf("credentials = %+v, want x-api-key without prefix", m.Credentials)
	}
	for _, tc := range []struct {
		settings string
		ok       bool
	}{
		{`{}`, true},
		{`{"endpoint":"https://gateway.example.com/anthropic/v1/"}`, true},
		{`{"endpoint":"http://127.0.0.1:8080/v1/"}`, true},
		{`{"endpoint":"http://example.com/v1/"}`, false},
		{`{"endpoint":"https://user:pw@example.com/v1/"}`, false},
		{`{"endpoint":"https://example.com/v1/?key=x"}`, false},
		{`{"other":1}`, false},
	} {
		err := m.ValidateSettings([]byte(tc.settings))
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSettings(%s) = %v, want ok=%v", tc.settings, err, tc.ok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"", defaultEndpoint, true},
		{"https://gw.example.com/v1", "https://gw.example.com/v1/", true},
		{"http://localhost:9000/v1/", "http://localhost:9000/v1/", true},
		{"http://127.0.0.1/v1/", "http://127.0.0.1/v1/", true},
		{"http://[::1]:8/v1/", "http://[::1]:8/v1/", true},
		{"http://127.0.0.256/v1/", "", false},
		{"http://10.0.0.1/v1/", "", false},
		{"ftp://x/", "", false},
		{"https://u@x/", "", false},
		{"https://x/v1/?a=b", "", false},
		{"https://x/v1/#f", "", false},
		{"/v1/", "", false},
	} {
		got, err := (&config{Endpoint: tc.in}).validate()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("validate(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// conformance runs one scenario against the simulator's conformance
// responder.
func conformance(t *testing.T, s *vendorsim.Server, in *abi.CompleteInput, opts sdktest.Options) *sdktest.CompleteResult {
	t.Helper()
	if opts.Config == nil {
		opts = hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
	}
	return sdktest.Complete(t, provider{}, in, opts)
}

func input(text string) *abi.CompleteInput {
	return &abi.CompleteInput{Model: "claude-sim", Messages: []abi.Message{{Role: abi.RoleUser, Content: text}}, MaxOutputTokens: 256, Step: 1}
}

var lookupTool = abi.ToolDef{Name: "conformance_lookup", Description: "Look up a value.",
	InputSchema: []byte(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"],"additionalProperties":false}`)}

// TestConformance runs the wire-core §16 scenarios through the simulator,
// shaped as Anthropic would answer them.
func TestConformance(t *testing.T) {
	s := vendorsim.MustNew(t, "anthropic", vendorsim.Options{APIKey: testKey})

	t.Run("text", func(t *testing.T) {
		r := conformance(t, s, input(vendorsim.ScenarioText), sdktest.Options{})
		if r.Status != abi.StatusOK || r.Output.Text != "Hello fixture" || r.Text != "Hello fixture" {
			t.Fatalf("status %d output %+v streamed %q", r.Status, r.Output, r.Text)
		}
		if r.Output.Usage != nil || r.Usage != nil {
			t.Errorf("usage = %+v / %+v, want none", r.Output.Usage, r.Usage)
		}
		if r.Output.FinishReason != "stop" {
			t.Errorf("finish = %q", r.Output.FinishReason)
		}
	})

	t.Run("structured", func(t *testing.T) {
		in := input(vendorsim.ScenarioStructured)
		in.OutputSchema = []byte(`{"type":"object","properties":{"ok":{"const":true}},"required":["ok"],"additionalProperties":false}`)
		in.Instructions = "Return only JSON matching the schema."
		r := conformance(t, s, in, sdktest.Options{})
		if r.Status != abi.StatusOK || r.Output.Text != `{"ok":true}` {
			t.Fatalf("status %d output %+v", r.Status, r.Output)
		}
	})

	t.Run("tools", func(t *testing.T) {
		in := input(vendorsim.ScenarioTools)
		in.Tools = []abi.ToolDef{lookupTool}
		r := conformance(t, s, in, sdktest.Options{})
		if r.Status != abi.StatusOK || len(r.Output.ToolCalls) != 1 {
			t.Fatalf("step 1: status %d output %+v error %+v", r.Status, r.Output, r.Error)
		}
		call := r.Output.ToolCalls[0]
		if call.Name != "conformance_lookup" || string(call.Arguments) != `{"value":7}` || call.ID == "" {
			t.Fatalf("call = %+v (%s)", call, call.Arguments)
		}
		if r.ToolCallDeltas == 0 {
			t.Error("no tool-call progress reported")
		}
		in2 := input(vendorsim.ScenarioTools)
		in2.Tools, in2.Step = in.Tools, 2
		in2.Messages = append(in2.Messages,
			abi.Message{Role: abi.RoleAssistant, Content: r.Output.Text, ToolCalls: r.Output.ToolCalls},
			abi.Message{Role: abi.RoleTool, Content: `{"receipt":7}`, ToolCallID: call.ID, Name: call.Name})
		r2 := conformance(t, s, in2, sdktest.Options{})
		if r2.Status != abi.StatusOK || r2.Output.Text != "tool receipt: 7" || len(r2.Output.ToolCalls) != 0 {
			t.Fatalf("step 2: status %d output %+v error %+v", r2.Status, r2.Output, r2.Error)
		}
	})

	t.Run("private-error", func(t *testing.T) {
		r := conformance(t, s, input(vendorsim.ScenarioPrivateError), sdktest.Options{})
		if r.Status != abi.StatusError || r.Error.Code != "PROVIDER_ERROR" || !r.Error.Retryable {
			t.Fatalf("status %d error %+v", r.Status, r.Error)
		}
		if strings.Contains(string(r.Host.RawOutput()), vendorsim.SecretMarker) {
			t.Errorf("the marker reached the adapter's output: %s", r.Host.RawOutput())
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := s.Cancellations()
		opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
		opts.OnEmit = func(h *sdktest.Host, it sdktest.Item) {
			if it.Kind == abi.EmitProgress || it.Kind == abi.EmitToolCallDelta {
				h.Cancel()
			}
		}
		in := input(vendorsim.ScenarioCancel)
		in.Tools = []abi.ToolDef{lookupTool}
		r := conformance(t, s, in, opts)
		if r.Status != abi.StatusCancelled {
			t.Fatalf("status %d error %+v", r.Status, r.Error)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := s.WaitCancelled(ctx, before+1); err != nil {
			t.Fatal(err)
		}
	})

	for _, req := range s.Requests() {
		if req.Credential != vendorsim.CredentialOK {
			t.Errorf("request %s: credential %s", req.Path, req.Credential)
		}
		if got := req.Header.Get("anthropic-version"); got != "2023-06-01" {
			t.Errorf("anthropic-version = %q", got)
		}
	}
}

// TestFaults drives the simulator's failure modes.
func TestFaults(t *testing.T) {
	s := vendorsim.MustNew(t, "anthropic", vendorsim.Options{APIKey: testKey})
	for _, tc := range []struct {
		fault     vendorsim.Fault
		code      string
		retryable bool
	}{
		{vendorsim.FaultRateLimit, "RATE_LIMITED", true},
		{vendorsim.FaultUnauthorized, "PROVIDER_AUTH", false},
		{vendorsim.FaultForbidden, "PROVIDER_AUTH", false},
		{vendorsim.FaultServerError, "PROVIDER_ERROR", true},
		{vendorsim.FaultBadRequest, "PROVIDER_ERROR", false},
		{vendorsim.FaultStreamError, "PROVIDER_FAILED", false},
		{vendorsim.FaultTruncated, "INCOMPLETE_STREAM", false},
		{vendorsim.FaultOversize, "RESPONSE_TOO_LARGE", false},
		{vendorsim.FaultRefusal, "PROVIDER_REFUSAL", false},
		{vendorsim.FaultTruncatedTool, "TRUNCATED_TOOL_CALL", false},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			if tc.fault == vendorsim.FaultOversize && testing.Short() {
				t.Skip("10 MB stream; the oversize transcript covers it")
			}
			r := conformance(t, s, input(vendorsim.FaultPrefix+string(tc.fault)), sdktest.Options{})
			if r.Status != abi.StatusError || r.Error.Code != tc.code || r.Error.Retryable != tc.retryable {
				t.Fatalf("status %d error %+v, want %s retryable=%v", r.Status, r.Error, tc.code, tc.retryable)
			}
			if tc.fault == vendorsim.FaultRateLimit && r.Error.RetryAfterMs != 2000 {
				t.Errorf("retryAfterMs = %d, want 2000", r.Error.RetryAfterMs)
			}
		})
	}
	t.Run("length", func(t *testing.T) {
		r := conformance(t, s, input(vendorsim.FaultPrefix+string(vendorsim.FaultLength)), sdktest.Options{})
		if r.Status != abi.StatusOK || r.Output.FinishReason != "length" || r.Output.Text != "cut" {
			t.Fatalf("status %d output %+v", r.Status, r.Output)
		}
	})
	t.Run("usage", func(t *testing.T) {
		r := conformance(t, s, input(vendorsim.FaultPrefix+string(vendorsim.FaultUsage)), sdktest.Options{})
		u := r.Output.Usage
		if r.Status != abi.StatusOK || u == nil || *u.InputTokens != 100 || *u.CachedInputTokens != 64 || *u.OutputTokens != 40 {
			t.Fatalf("status %d usage %+v", r.Status, u)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
		opts.Headers["x-api-key"] = "wrong"
		r := sdktest.Complete(t, provider{}, input(vendorsim.ScenarioText), opts)
		if r.Status != abi.StatusError || r.Error.Code != "PROVIDER_AUTH" {
			t.Fatalf("status %d error %+v", r.Status, r.Error)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		dead := vendorsim.MustNew(t, "anthropic", vendorsim.Options{})
		ep := dead.Endpoint()
		dead.Close()
		r := sdktest.Complete(t, provider{}, input("x"), hostOptions(t, []byte(`{"endpoint":"`+ep+`"}`)))
		if r.Status != abi.StatusError || r.Error.Code != "PROVIDER_UNREACHABLE" || !r.Error.Retryable {
			t.Fatalf("status %d error %+v", r.Status, r.Error)
		}
	})
	t.Run("origin denied", func(t *testing.T) {
		opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
		opts.Origins = []string{"https://api.anthropic.com"}
		r := sdktest.Complete(t, provider{}, input("x"), opts)
		if r.Status != abi.StatusError || r.Error.Code != "PROVIDER_UNREACHABLE" || r.Error.Retryable {
			t.Fatalf("status %d error %+v", r.Status, r.Error)
		}
	})
}

func TestInspect(t *testing.T) {
	models := make([]string, 250)
	for i := range models {
		models[i] = "claude-sim-" + string(rune('a'+i%26)) + "-" + strconv.Itoa(i)
	}
	s := vendorsim.MustNew(t, "anthropic", vendorsim.Options{APIKey: testKey, Models: models, ModelsPageSize: 100})
	r := sdktest.Inspect(t, provider{}, hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`)))
	if r.Status != abi.StatusOK || r.Output.Code != "CATALOG_AVAILABLE" || !r.Output.Complete || len(r.Output.Models) != 250 {
		t.Fatalf("status %d output code %s complete %v models %d", r.Status, r.Output.Code, r.Output.Complete, len(r.Output.Models))
	}
	if len(r.Requests) != 3 {
		t.Errorf("%d requests, want 3 pages", len(r.Requests))
	}
	for _, req := range r.Requests {
		if req.Method != "GET" {
			t.Errorf("probe used %s", req.Method)
		}
	}

	t.Run("page cap", func(t *testing.T) {
		many := make([]string, 2500)
		for i := range many {
			many[i] = "m" + strconv.Itoa(i)
		}
		s := vendorsim.MustNew(t, "anthropic", vendorsim.Options{Models: many, ModelsPageSize: 100})
		r := sdktest.Inspect(t, provider{}, hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`)))
		if r.Output.Code != "CATALOG_AVAILABLE" || r.Output.Complete || len(r.Output.Models) != 1000 {
			t.Fatalf("code %s complete %v models %d", r.Output.Code, r.Output.Complete, len(r.Output.Models))
		}
	})
	t.Run("unauthorized", func(t *testing.T) {
		opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
		opts.Headers["x-api-key"] = "wrong"
		r := sdktest.Inspect(t, provider{}, opts)
		if r.Output.Code != "AUTH_REJECTED" {
			t.Fatalf("code %s", r.Output.Code)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		dead := vendorsim.MustNew(t, "anthropic", vendorsim.Options{})
		ep := dead.Endpoint()
		dead.Close()
		r := sdktest.Inspect(t, provider{}, hostOptions(t, []byte(`{"endpoint":"`+ep+`"}`)))
		if r.Output.Code != "PROVIDER_UNREACHABLE" {
			t.Fatalf("code %s", r.Output.Code)
		}
	})
}
