package main

import (
	"os"
	"testing"

	"adhost/runtime/manifest"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

func TestParseSettings(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok       bool
		endpoint string
	}{
		{in: ``, ok: true, endpoint: DefaultEndpoint},
		{in: `{}`, ok: true, endpoint: DefaultEndpoint},
		{in: `{"endpoint":"https://api.groq.com/openai/v1"}`, ok: true, endpoint: "https://api.groq.com/openai/v1/"},
		{in: `{"endpoint":"http://127.0.0.1:8080/v1/"}`, ok: true, endpoint: "http://127.0.0.1:8080/v1/"},
		{in: `{"endpoint":"http://localhost:11434/v1/"}`, ok: true, endpoint: "http://localhost:11434/v1/"},
		{in: `{"endpoint":"http://[::1]:8000/v1"}`, ok: true, endpoint: "http://[::1]:8000/v1/"},
		{in: `{"endpoint":"http://example.com/v1/"}`},          // plain HTTP off loopback
		{in: `{"endpoint":"https://user:pw@example.com/v1/"}`}, // credentials in the URL
		{in: `{"endpoint":"https://example.com/v1/?key=x"}`},   // query
		{in: `{"endpoint":"https://example.com/v1/#x"}`},       // fragment
		{in: `{"endpoint":"ftp://example.com/"}`},
		{in: `{"endpoint":"/v1/"}`},
		{in: `{"maxTokensField":"max_tokens"}`, ok: true, endpoint: DefaultEndpoint},
		{in: `{"maxTokensField":"tokens"}`},
		{in: `{"structuredOutput":"yes"}`},
		{in: `{"bogus":1}`},
	} {
		cfg, err := parseSettings([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("parseSettings(%s) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err == nil && cfg.endpoint != tc.endpoint {
			t.Errorf("parseSettings(%s).endpoint = %q, want %q", tc.in, cfg.endpoint, tc.endpoint)
		}
	}
	cfg, _ := parseSettings([]byte(`{"structuredOutput":false,"includeUsage":false}`))
	if cfg.structuredOutput || cfg.includeUsage {
		t.Errorf("booleans not applied: %+v", cfg)
	}
}

// TestManifest checks manifests/openai.toml: it parses, it matches the
// plugin's registered identity, and its settings schema agrees with the
// plugin's own validation on the cases that matter.
func TestManifest(t *testing.T) {
	b, err := os.ReadFile("../../manifests/openai.toml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	info := sdktest.Info(t, sdk.Registered())
	if m.ID != info.ID || m.Version != info.Version || m.Kind != info.Kind {
		t.Errorf("manifest %s@%s (%s) vs registered %+v", m.ID, m.Version, m.Kind, info)
	}
	if !m.Capability("tools") || !m.Capability("textStreaming") || !m.Inspect {
		t.Errorf("capabilities %v inspect %v", m.Capabilities, m.Inspect)
	}
	if len(m.Credentials) != 1 || m.Credentials[0].Header != "Authorization" || m.Credentials[0].Prefix != "Bearer " {
		t.Errorf("credentials %+v", m.Credentials)
	}
	if m.EndpointSetting() != "endpoint" {
		t.Errorf("endpointSetting %q", m.EndpointSetting())
	}
	for _, s := range []string{
		`{}`,
		`{"endpoint":"https://api.openai.com/v1/"}`,
		`{"endpoint":"http://127.0.0.1:9/v1/","maxTokensField":"max_tokens","structuredOutput":false,"includeUsage":false}`,
		`{"endpoint":"http://example.com/v1/"}`,
		`{"endpoint":"https://example.com/v1/?x=1"}`,
		`{"maxTokensField":"tokens"}`,
		`{"bogus":true}`,
	} {
		_, perr := parseSettings([]byte(s))
		merr := m.ValidateSettings([]byte(s))
		if (perr == nil) != (merr == nil) {
			t.Errorf("settings %s: plugin says %v, manifest schema says %v", s, perr, merr)
		}
	}
}
