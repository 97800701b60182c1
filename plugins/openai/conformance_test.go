package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/internal/vendorsim/simtest"
	"adhost/sdk-plugin/sdktest"
)

// sim starts a conformance responder that insists on testKey and returns
// it with host options that inject the key and allow only its origin.
func sim(t *testing.T, opts vendorsim.Options) (*vendorsim.Server, sdktest.Options) {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	s := vendorsim.MustNew(t, "openai", opts)
	ho := simtest.HostOptions(s, testKey)
	ho.Config = settingsFor(t, s.Endpoint(), nil)
	return s, ho
}

func settingsFor(t *testing.T, endpoint string, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{"endpoint": endpoint}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func userTurn(text string) *abi.CompleteInput {
	return &abi.CompleteInput{
		Model:           "sim-large",
		Messages:        []abi.Message{{Role: abi.RoleUser, Content: text}},
		MaxOutputTokens: 256,
		Step:            1,
	}
}

var lookupTool = abi.ToolDef{
	Name:        vendorsim.ConformanceTool,
	Description: "Returns a receipt for a value.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"],"additionalProperties":false}`),
}

// TestConformance runs the provider scenarios of wire-core §16 against the
// simulator's conformance responder. conformance:native is skipped: the
// adapter does not declare nativeContinuation.
func TestConformance(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		s, ho := sim(t, vendorsim.Options{})
		res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioText), ho)
		if res.Status != abi.StatusOK {
			t.Fatalf("status %d error %+v", res.Status, res.Error)
		}
		if res.Output.Text != "Hello fixture" || res.Output.Usage != nil || len(res.Output.ToolCalls) != 0 {
			t.Errorf("output %+v, want Hello fixture without usage", res.Output)
		}
		if n := countText(res.Items); n < 2 {
			t.Errorf("text arrived in %d deltas, want it streamed", n)
		}
		if got := s.Requests()[0].Credential; got != vendorsim.CredentialOK {
			t.Errorf("credential %s", got)
		}
	})

	t.Run("structured", func(t *testing.T) {
		s, ho := sim(t, vendorsim.Options{})
		in := userTurn(vendorsim.ScenarioStructured)
		in.OutputSchema = json.RawMessage(`{"type":"object","properties":{"ok":{"const":true}},"required":["ok"],"additionalProperties":false}`)
		res := sdktest.Complete(t, provider{}, in, ho)
		if res.Status != abi.StatusOK || res.Output.Text != `{"ok":true}` {
			t.Fatalf("status %d output %+v error %+v", res.Status, res.Output, res.Error)
		}
		var req struct {
			ResponseFormat struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string          `json:"name"`
					Schema json.RawMessage `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		json.Unmarshal(s.Requests()[0].Body, &req)
		if req.ResponseFormat.Type != "json_schema" || req.ResponseFormat.JSONSchema.Name != "output" {
			t.Errorf("response_format %+v", req.ResponseFormat)
		}
		if eq, _ := vendorsim.JSONEqual(req.ResponseFormat.JSONSchema.Schema, in.OutputSchema); !eq {
			t.Errorf("schema sent %s", req.ResponseFormat.JSONSchema.Schema)
		}
	})

	t.Run("tools", func(t *testing.T) {
		_, ho := sim(t, vendorsim.Options{})
		in := userTurn(vendorsim.ScenarioTools)
		in.Tools = []abi.ToolDef{lookupTool}
		res := sdktest.Complete(t, provider{}, in, ho)
		if res.Status != abi.StatusOK || len(res.Output.ToolCalls) != 1 {
			t.Fatalf("turn 1: status %d output %+v error %+v", res.Status, res.Output, res.Error)
		}
		call := res.Output.ToolCalls[0]
		if call.Name != vendorsim.ConformanceTool || call.ID == "" || !bytes.Equal(call.Arguments, []byte(`{"value":7}`)) {
			t.Fatalf("tool call %+v (%s)", call, call.Arguments)
		}
		if res.ToolCallDeltas == 0 {
			t.Errorf("no tool-call progress reported")
		}
		// The host runs the tool once and hands its output back.
		in.Messages = append(in.Messages,
			abi.Message{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{call}},
			abi.Message{Role: abi.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: `{"receipt":7}`})
		in.Step = 2
		res = sdktest.Complete(t, provider{}, in, ho)
		if res.Status != abi.StatusOK || res.Output.Text != "tool receipt: 7" || len(res.Output.ToolCalls) != 0 {
			t.Fatalf("turn 2: status %d output %+v error %+v", res.Status, res.Output, res.Error)
		}
	})

	t.Run("private-error", func(t *testing.T) {
		_, ho := sim(t, vendorsim.Options{})
		res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioPrivateError), ho)
		if res.Status != abi.StatusError || res.Error.Code != "PROVIDER_ERROR" || !res.Error.Retryable {
			t.Fatalf("status %d error %+v", res.Status, res.Error)
		}
		assertNoMarker(t, res.Result, vendorsim.SecretMarker)
	})

	t.Run("cancel", func(t *testing.T) {
		s, ho := sim(t, vendorsim.Options{})
		progressed := false
		ho.OnEmit = func(h *sdktest.Host, it sdktest.Item) {
			if it.Kind == abi.EmitProgress || it.Kind == abi.EmitToolCallDelta {
				progressed = true
				h.Cancel() // the harness cancels on the first run.progress
			}
		}
		res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioCancel), ho)
		if !progressed {
			t.Fatal("the adapter reported no progress before waiting")
		}
		if res.Status != abi.StatusCancelled {
			t.Fatalf("status %d error %+v, want cancelled", res.Status, res.Error)
		}
		// Cancelling closed the response, which aborted the upstream request.
		if err := s.WaitCancelled(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("native", func(t *testing.T) {
		t.Skip("nativeContinuation is not declared by manifests/openai.toml")
	})
}

func countText(items []sdktest.Item) int {
	n := 0
	for _, it := range items {
		if it.Kind == abi.EmitText && !it.Dropped {
			n++
		}
	}
	return n
}

// assertNoMarker fails when marker appears in anything the adapter handed
// the host: the error output, streamed items or log lines.
func assertNoMarker(t *testing.T, res sdktest.Result, marker string) {
	t.Helper()
	if strings.Contains(string(res.Host.RawOutput()), marker) {
		t.Errorf("marker in output %s", res.Host.RawOutput())
	}
	for _, it := range res.Items {
		if strings.Contains(it.Text, marker) {
			t.Errorf("marker in emitted item %+v", it)
		}
	}
	for _, l := range res.Logs {
		if strings.Contains(l.Msg, marker) {
			t.Errorf("marker in log line %q", l.Msg)
		}
	}
}

// TestFaults drives the responder's failure modes: each must map to its
// stable code, and no vendor error text may leave the adapter.
func TestFaults(t *testing.T) {
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
			_, ho := sim(t, vendorsim.Options{})
			res := sdktest.Complete(t, provider{}, userTurn(vendorsim.FaultPrefix+string(tc.fault)), ho)
			if res.Status != abi.StatusError || res.Error.Code != tc.code || res.Error.Retryable != tc.retryable {
				t.Fatalf("status %d error %+v, want %s retryable=%v", res.Status, res.Error, tc.code, tc.retryable)
			}
			if tc.fault == vendorsim.FaultRateLimit && res.Error.RetryAfterMs != 2000 {
				t.Errorf("retryAfterMs %d, want 2000", res.Error.RetryAfterMs)
			}
			for _, vendorText := range []string{"Rate limit reached", "Incorrect API key", "Permission denied", "had an error", "Invalid request"} {
				if strings.Contains(res.Error.Message, vendorText) {
					t.Errorf("vendor text %q leaked into the error message %q", vendorText, res.Error.Message)
				}
			}
		})
	}
	t.Run("length", func(t *testing.T) {
		_, ho := sim(t, vendorsim.Options{})
		res := sdktest.Complete(t, provider{}, userTurn("vendorsim:length"), ho)
		if res.Status != abi.StatusOK || res.Output.FinishReason != "length" || res.Output.Text != "cut" {
			t.Fatalf("status %d output %+v", res.Status, res.Output)
		}
	})
	t.Run("usage", func(t *testing.T) {
		_, ho := sim(t, vendorsim.Options{})
		res := sdktest.Complete(t, provider{}, userTurn("vendorsim:usage"), ho)
		u := res.Output.Usage
		if u == nil || *u.InputTokens != 100 || *u.OutputTokens != 40 || *u.CachedInputTokens != 64 || *u.ReasoningTokens != 16 {
			t.Fatalf("usage %+v", u)
		}
	})
}

// TestCredential: the host injects the key; the adapter never sets one. A
// missing or wrong key reaches the simulator as such and maps to
// PROVIDER_AUTH.
func TestCredential(t *testing.T) {
	for _, key := range []string{"", "sk-wrong"} {
		s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
		ho := simtest.HostOptions(s, key)
		ho.Config = settingsFor(t, s.Endpoint(), nil)
		res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioText), ho)
		if res.Status != abi.StatusError || res.Error.Code != "PROVIDER_AUTH" {
			t.Errorf("key %q: status %d error %+v", key, res.Status, res.Error)
		}
		if got := s.Requests()[0].Credential; got == vendorsim.CredentialOK {
			t.Errorf("key %q: simulator saw a valid credential", key)
		}
	}
	// The adapter itself never sends an Authorization header: with nothing
	// injected, none arrives.
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{})
	ho := simtest.HostOptions(s, "")
	ho.Config = settingsFor(t, s.Endpoint(), nil)
	sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioText), ho)
	if h := s.Requests()[0].Header; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("adapter set a credential header itself: %v", h)
	}
}

// TestOtherOriginDenied: an endpoint whose origin the host does not allow
// is refused before any byte leaves, and maps to PROVIDER_UNREACHABLE.
func TestOtherOriginDenied(t *testing.T) {
	allowed := vendorsim.MustNew(t, "openai", vendorsim.Options{})
	other := vendorsim.MustNew(t, "openai", vendorsim.Options{})
	ho := simtest.HostOptions(allowed, testKey)
	ho.Config = settingsFor(t, other.Endpoint(), nil)
	res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioText), ho)
	if res.Status != abi.StatusError || res.Error.Code != "PROVIDER_UNREACHABLE" {
		t.Fatalf("status %d error %+v", res.Status, res.Error)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
}

// TestUnreachable: nothing listening → PROVIDER_UNREACHABLE, retryable.
func TestUnreachable(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{})
	ep := s.Endpoint()
	ho := simtest.HostOptions(s, testKey)
	s.Close()
	ho.Config = settingsFor(t, ep, nil)
	res := sdktest.Complete(t, provider{}, userTurn(vendorsim.ScenarioText), ho)
	if res.Status != abi.StatusError || res.Error.Code != "PROVIDER_UNREACHABLE" || !res.Error.Retryable {
		t.Fatalf("status %d error %+v", res.Status, res.Error)
	}
}

// TestInspect covers the discovery probe against the responder: pagination
// is followed, and the caps end the listing with complete: false.
func TestInspect(t *testing.T) {
	many := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "model-" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i)
		}
		return ids
	}
	for _, tc := range []struct {
		name     string
		opts     vendorsim.Options
		key      string
		code     string
		models   int
		complete bool
		requests int
	}{
		{name: "single page", opts: vendorsim.Options{}, key: testKey, code: "CATALOG_AVAILABLE", models: 3, complete: true, requests: 1},
		{name: "paginated", opts: vendorsim.Options{Models: many(250), ModelsPageSize: 100}, key: testKey, code: "CATALOG_AVAILABLE", models: 250, complete: true, requests: 3},
		{name: "page cap", opts: vendorsim.Options{Models: many(500), ModelsPageSize: 10}, key: testKey, code: "CATALOG_AVAILABLE", models: 200, complete: false, requests: 20},
		{name: "id cap", opts: vendorsim.Options{Models: many(1500), ModelsPageSize: 1000}, key: testKey, code: "CATALOG_AVAILABLE", models: 1000, complete: false, requests: 2},
		{name: "rejected key", opts: vendorsim.Options{}, key: "sk-wrong", code: "AUTH_REJECTED", requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.APIKey = testKey
			s := vendorsim.MustNew(t, "openai", tc.opts)
			ho := simtest.HostOptions(s, tc.key)
			ho.Config = settingsFor(t, s.Endpoint(), nil)
			res := sdktest.Inspect(t, provider{}, ho)
			if res.Status != abi.StatusOK {
				t.Fatalf("status %d error %+v", res.Status, res.Error)
			}
			if res.Output.Code != tc.code || len(res.Output.Models) != tc.models || res.Output.Complete != tc.complete {
				t.Errorf("inspect = %s, %d models, complete %v; want %s, %d, %v",
					res.Output.Code, len(res.Output.Models), res.Output.Complete, tc.code, tc.models, tc.complete)
			}
			if n := len(s.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			for _, r := range s.Requests() {
				if r.Method != "GET" || len(r.Body) != 0 {
					t.Errorf("probe sent %s with %d body bytes; probes never generate", r.Method, len(r.Body))
				}
			}
		})
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
