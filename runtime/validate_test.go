package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"adhost/runtime/protocol"
)

func strp(s string) *string { return &s }

// validationEnv has three providers: p (any model, tools, streaming),
// q (allowlist ["only"], no tools capability), none (empty allowlist).
func validationEnv(t *testing.T) *testEnv {
	prov := conformanceProvider(true)
	return newEnv(t, prov, func(o *Options, _ *ProviderInstance) {
		o.Providers = append(o.Providers,
			&ProviderInstance{ID: "q", Models: []string{"only"}, Capabilities: map[string]bool{"tools": false, "textStreaming": true, "safeRetries": true}, Provider: prov},
			&ProviderInstance{ID: "none", Models: []string{}, Capabilities: map[string]bool{"tools": true, "textStreaming": true}, Provider: prov},
		)
	})
}

func TestValidationCodes(t *testing.T) {
	env := validationEnv(t)
	for _, tc := range []struct {
		name string
		mod  func(*protocol.RunRequest)
		want protocol.Code
	}{
		{"ok", func(r *protocol.RunRequest) {}, ""},
		{"session", func(r *protocol.RunRequest) { r.Session = json.RawMessage(`{}`) }, protocol.CodeSessionsUnavailable},
		{"session beats unknown provider", func(r *protocol.RunRequest) { r.Session = json.RawMessage(`{}`); r.Provider = "zz" }, protocol.CodeSessionsUnavailable},
		{"retrieval", func(r *protocol.RunRequest) { r.Retrieval = json.RawMessage(`{}`); r.Provider = "zz" }, protocol.CodeRetrievalUnavailable},
		{"idempotency beats unknown provider", func(r *protocol.RunRequest) { r.IdempotencyKey = strp("k1"); r.Provider = "zz" }, protocol.CodeIdempotencyUnavailable},
		{"unknown provider", func(r *protocol.RunRequest) { r.Provider = "zz" }, protocol.CodeUnknownProvider},
		{"unknown provider beats unsupported model", func(r *protocol.RunRequest) { r.Provider = "zz"; r.Model = "x" }, protocol.CodeUnknownProvider},
		{"attachments", func(r *protocol.RunRequest) { r.Attachments = json.RawMessage(`[]`) }, protocol.CodeInvalidRequest},
		{"output artifact", func(r *protocol.RunRequest) { r.OutputArtifact = json.RawMessage(`{}`) }, protocol.CodeInvalidRequest},
		{"retry without safeRetries", func(r *protocol.RunRequest) { r.Retry = &protocol.Retry{MaxAttempts: 2} }, protocol.CodeUnsupportedCapability},
		{"retry one attempt", func(r *protocol.RunRequest) { r.Retry = &protocol.Retry{MaxAttempts: 1} }, ""},
		{"retry with safeRetries", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "only"
			r.Retry = &protocol.Retry{MaxAttempts: 2}
		}, ""},
		{"retry beats unsupported model", func(r *protocol.RunRequest) { r.Provider = "none"; r.Retry = &protocol.Retry{MaxAttempts: 3} }, protocol.CodeUnsupportedCapability},
		{"model not in allowlist", func(r *protocol.RunRequest) { r.Provider = "q"; r.Model = "other" }, protocol.CodeUnsupportedModel},
		{"empty allowlist denies", func(r *protocol.RunRequest) { r.Provider = "none" }, protocol.CodeUnsupportedModel},
		{"model beats capability", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "other"
			r.RequiredCapabilities = []string{"images"}
		}, protocol.CodeUnsupportedModel},
		{"required capability missing", func(r *protocol.RunRequest) { r.RequiredCapabilities = []string{"tools", "images"} }, protocol.CodeUnsupportedCapability},
		{"required capability false", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "only"
			r.RequiredCapabilities = []string{"tools"}
		}, protocol.CodeUnsupportedCapability},
		{"required capabilities true", func(r *protocol.RunRequest) { r.RequiredCapabilities = []string{"tools", "textStreaming"} }, ""},
		{"capability beats tools", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "only"
			r.RequiredCapabilities = []string{"x"}
			r.Tools = []string{"conformance_lookup"}
		}, protocol.CodeUnsupportedCapability},
		{"tools unsupported", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "only"
			r.Tools = []string{"conformance_lookup"}
		}, protocol.CodeUnsupportedTools},
		{"unsupported tools beats duplicate", func(r *protocol.RunRequest) {
			r.Provider = "q"
			r.Model = "only"
			r.Tools = []string{"a", "a"}
		}, protocol.CodeUnsupportedTools},
		{"duplicate tools", func(r *protocol.RunRequest) { r.Tools = []string{"nope", "nope"} }, protocol.CodeInvalidRequest},
		{"application tools", func(r *protocol.RunRequest) { r.ApplicationTools = json.RawMessage(`[]`); r.Tools = []string{"nope"} }, protocol.CodeApplicationToolsUnavail},
		{"unknown tool", func(r *protocol.RunRequest) { r.Tools = []string{"conformance_lookup", "nope"} }, protocol.CodeUnknownTool},
		{"unknown tool beats approvals", func(r *protocol.RunRequest) { r.Tools = []string{"nope"}; r.Approvals = json.RawMessage(`{}`) }, protocol.CodeUnknownTool},
		{"approvals", func(r *protocol.RunRequest) {
			r.Approvals = json.RawMessage(`{}`)
			r.OutputSchema = json.RawMessage(`{"type":7}`)
		}, protocol.CodeApprovalUnavailable},
		{"invalid schema", func(r *protocol.RunRequest) { r.OutputSchema = json.RawMessage(`{"type":7}`) }, protocol.CodeInvalidSchema},
		{"external ref", func(r *protocol.RunRequest) {
			r.OutputSchema = json.RawMessage(`{"$ref":"https://example.com/s.json"}`)
		}, protocol.CodeInvalidSchema},
		{"file ref", func(r *protocol.RunRequest) { r.OutputSchema = json.RawMessage(`{"$ref":"file:///etc/passwd"}`) }, protocol.CodeInvalidSchema},
		{"valid schema", func(r *protocol.RunRequest) { r.OutputSchema = json.RawMessage(okSchema) }, ""},
		{"empty input", func(r *protocol.RunRequest) { r.Input = "" }, protocol.CodeInvalidRequest},
		{"maxSteps range", func(r *protocol.RunRequest) { r.MaxSteps = intp(65) }, protocol.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req("conformance:text", tc.mod)
			pl, err := env.e.validate(r)
			if got := protocol.CodeOf(err); got != tc.want {
				t.Fatalf("validate code = %q, want %q (err %v)", got, tc.want, err)
			}
			if err == nil && pl == nil {
				t.Fatal("nil plan")
			}
			if tc.want == "" {
				return
			}
			// Start reports the same code and emits nothing.
			if _, err := env.e.Start(context.Background(), env.p, r, ModeStream); protocol.CodeOf(err) != tc.want {
				t.Fatalf("Start code = %q, want %q", protocol.CodeOf(err), tc.want)
			}
		})
	}
	if n := env.prov.calls.Load(); n != 0 {
		t.Fatalf("provider called %d times during validation", n)
	}
}

func TestAuthorizationAfterValidation(t *testing.T) {
	env := validationEnv(t)
	noTools := &Principal{Subject: "bob", Providers: map[string]bool{"p": true}}
	noProvider := &Principal{Subject: "bob", Tools: map[string]bool{"conformance_lookup": true}}
	for _, tc := range []struct {
		name string
		p    *Principal
		r    *protocol.RunRequest
		want protocol.Code
	}{
		{"validation wins over missing grant", noProvider, req("x", func(r *protocol.RunRequest) { r.Provider = "zz" }), protocol.CodeUnknownProvider},
		{"unsupported model to an ungranted token", noProvider, req("x", func(r *protocol.RunRequest) { r.Provider = "none" }), protocol.CodeUnsupportedModel},
		{"provider not granted", noProvider, req("x"), protocol.CodeForbidden},
		{"tool not granted", noTools, req("x", withTools("conformance_lookup")), protocol.CodeForbidden},
		{"nil principal", nil, req("x"), protocol.CodeForbidden},
		{"granted", noTools, req("conformance:text"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := env.e.Start(context.Background(), tc.p, tc.r, ModeJSON)
			if got := protocol.CodeOf(err); got != tc.want {
				t.Fatalf("code = %q, want %q", got, tc.want)
			}
			if run != nil {
				if _, err := run.Wait(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestEffectiveLimits(t *testing.T) {
	for _, tc := range []struct {
		req       *int
		def, host int
		want      int
	}{
		{nil, 8, 0, 8},
		{nil, 8, 5, 5},
		{intp(3), 8, 5, 3},
		{intp(64), 8, 10, 10},
		{intp(64), 8, 0, 64},
		{nil, 4096, 1000, 1000},
	} {
		if got := effective(tc.req, tc.def, tc.host); got != tc.want {
			t.Errorf("effective(%v, %d, %d) = %d, want %d", tc.req, tc.def, tc.host, got, tc.want)
		}
	}
}

func TestIdleInterval(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		host   int64 // ms
		req    *int64
		wantMs int64
	}{
		{0, nil, 0},
		{0, ms(0), 0},
		{0, ms(500), 500},
		{1000, nil, 1000},
		{1000, ms(0), 1000}, // a request cannot disable host policy
		{1000, ms(5000), 1000},
		{1000, ms(200), 200},
	} {
		env := newEnv(t, conformanceProvider(true), func(o *Options, _ *ProviderInstance) {
			o.Limits.IdleTimeout = msDur(tc.host)
		})
		pl, err := env.e.validate(req("x", func(r *protocol.RunRequest) { r.IdleTimeoutMs = tc.req }))
		if err != nil {
			t.Fatal(err)
		}
		if pl.idle != msDur(tc.wantMs) {
			t.Errorf("host %d req %v: idle %v, want %dms", tc.host, tc.req, pl.idle, tc.wantMs)
		}
	}
}
