//go:build !wasip1

package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/internal/vendorsim"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

const testKey = "sk-test-embeddings-0123456789"

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func TestManifestMatches(t *testing.T) {
	m := plugintest.Manifest(t, ID)
	if m.ID != ID || m.Version != Version || m.Kind != "embedder" || !m.HasNetwork() || m.AuthMode != "api-key" {
		t.Fatalf("manifest %s@%s kind %s network %v auth %s", m.ID, m.Version, m.Kind, m.HasNetwork(), m.AuthMode)
	}
}

func TestSettings(t *testing.T) {
	for raw, want := range map[string]string{
		``:                                     "https://api.openai.com/v1/embeddings",
		`{}`:                                   "https://api.openai.com/v1/embeddings",
		`{"endpoint":"http://127.0.0.1:9/v1"}`: "http://127.0.0.1:9/v1/embeddings",
		`{"endpoint":"https://llm.example/v1/","dimensions":4096}`: "https://llm.example/v1/embeddings",
		`{"endpoint":"http://llm.example/v1/"}`:                    "",
		`{"endpoint":"https://u:p@llm.example/v1/"}`:               "",
		`{"dimensions":4097}`:                                      "",
		`{"dimensions":-1}`:                                        "",
		`{"other":1}`:                                              "",
	} {
		cfg, err := parseSettings([]byte(raw))
		if want == "" {
			if err == nil {
				t.Errorf("%s accepted", raw)
			}
			continue
		}
		if err != nil || cfg.url != want {
			t.Errorf("%s: %+v, %v, want %s", raw, cfg, err, want)
		}
	}
}

// TestDecode: vectors in input order by index, whatever the order of
// data; a missing, repeated or out-of-range index and a body that is not
// JSON are INVALID_PROVIDER_RESPONSE.
func TestDecode(t *testing.T) {
	out, err := decode([]byte(`{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,1]},{"object":"embedding","index":0,"embedding":[1,0]}],"model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}`), 2)
	if err != nil || out.Vectors[0][0] != 1 || out.Vectors[1][1] != 1 || out.Usage == nil || *out.Usage.InputTokens != 7 {
		t.Fatalf("decode: %+v, %v", out, err)
	}
	if out, err := decode([]byte(`{"data":[{"index":0,"embedding":[1]}]}`), 1); err != nil || out.Usage != nil {
		t.Errorf("without usage: %+v, %v", out, err)
	}
	// A count or dimension mismatch is the service's to judge
	// (INVALID_EMBEDDING): passed on as it came.
	if out, err := decode([]byte(`{"data":[{"index":0,"embedding":[1]}]}`), 2); err != nil || len(out.Vectors) != 1 {
		t.Errorf("one vector for two inputs: %+v, %v", out, err)
	}
	if out, err := decode([]byte(`{"data":[{"index":1,"embedding":[1,2]},{"index":0,"embedding":[1]}]}`), 2); err != nil || len(out.Vectors[0]) != 1 || len(out.Vectors[1]) != 2 {
		t.Errorf("ragged vectors: %+v, %v", out, err)
	}
	for _, bad := range []string{
		`{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}`,
		`{"data":[{"index":0,"embedding":[1]},{"index":2,"embedding":[1]}]}`,
		`{"data":[{"index":0,"embedding":[1]},{"embedding":[1]}]}`,
		`{"data":[{"index":0,"embedding":["x"]},{"index":1,"embedding":[1]}]}`,
		`<html>`,
	} {
		_, err := decode([]byte(bad), 2)
		var se interface{ Error() string }
		if err == nil || !strings.Contains(err.Error(), "INVALID_PROVIDER_RESPONSE") {
			t.Errorf("%s: %v (%v)", bad, err, se)
		}
	}
}

// loadEmbedder builds the module (once per test binary), loads it by its
// digest and binds an instance to endpoint with the test key.
func loadEmbedder(t *testing.T, settings string, key string) *wasm.Embedder {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	return plugintest.LoadEmbedder(t, "plugins/openai-embeddings", ID, Version, json.RawMessage(settings), key)
}

// TestWasm: the real module through runtime/wasm against the simulator's
// embeddings endpoint — the wire request, the host-injected credential,
// vectors in order with usage, and every failure a client meets mapped to
// its code.
func TestWasm(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey, EmbeddingDims: 16})
	e := loadEmbedder(t, `{"endpoint":"`+s.Endpoint()+`"}`, testKey)

	inputs := []string{"first passage about batteries", "second passage", "third"}
	vecs, usage, err := e.Embed(t.Context(), "text-embedding-3-small", inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		want := vendorsim.EmbeddingVector(in, 16)
		if len(vecs[i]) != 16 || vecs[i][3] != want[3] || vecs[i][15] != want[15] {
			t.Errorf("vector %d differs from the simulator's", i)
		}
	}
	if usage == nil || usage.InputTokens == nil || *usage.InputTokens != 7 {
		t.Errorf("usage %+v, want 7 prompt tokens", usage)
	}
	reqs := s.Requests()
	r := reqs[len(reqs)-1]
	var body map[string]any
	json.Unmarshal(r.Body, &body)
	if r.Method != "POST" || r.Path != "/v1/embeddings" || r.Credential != vendorsim.CredentialOK || r.Header.Get("Authorization") != "REDACTED" ||
		body["model"] != "text-embedding-3-small" || body["encoding_format"] != "float" || len(body["input"].([]any)) != 3 || body["dimensions"] != nil {
		t.Errorf("request %s %s credential %s body %s", r.Method, r.Path, r.Credential, r.Body)
	}

	for _, c := range []struct {
		input      string
		code       protocol.Code
		retryable  bool
		retryAfter time.Duration
	}{
		{"vendorsim:rate-limit", protocol.CodeRateLimited, true, 2 * time.Second},
		{"vendorsim:insufficient-quota", protocol.CodeRateLimited, true, 0},
		{"vendorsim:unauthorized", protocol.CodeProviderAuth, false, 0},
		{"vendorsim:server-error", protocol.CodeProviderError, true, 0},
		{"vendorsim:bad-request", protocol.CodeProviderError, false, 0},
	} {
		_, _, err := e.Embed(t.Context(), "m", []string{"ok", c.input})
		pe := protocol.AsPublic(err)
		if pe.Code != c.code || pe.Retryable != c.retryable || pe.RetryAfter != c.retryAfter {
			t.Errorf("%s: %s retryable %v after %v (%v), want %s retryable %v after %v", c.input, pe.Code, pe.Retryable, pe.RetryAfter, err, c.code, c.retryable, c.retryAfter)
		}
		if strings.Contains(pe.Message, "quota") || strings.Contains(pe.Message, "Rate limit") {
			t.Errorf("%s: the vendor's text reached the public message %q", c.input, pe.Message)
		}
	}
	// One vector short: passed on for the service to refuse.
	if vecs, _, err := e.Embed(t.Context(), "m", []string{"ok", "vendorsim:embed-missing"}); err != nil || len(vecs) != 1 {
		t.Errorf("embed-missing: %d vectors, %v", len(vecs), err)
	}
	// Reversed data comes back in input order.
	rev := []string{"alpha", "vendorsim:embed-reversed", "gamma"}
	vecs, _, err = e.Embed(t.Context(), "m", rev)
	if err != nil || vecs[0][5] != vendorsim.EmbeddingVector("alpha", 16)[5] || vecs[2][5] != vendorsim.EmbeddingVector("gamma", 16)[5] {
		t.Errorf("reversed: %v", err)
	}
}

// TestWasmSettings: dimensions is sent when set; a wrong key is
// PROVIDER_AUTH.
func TestWasmSettings(t *testing.T) {
	s := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: testKey})
	e := loadEmbedder(t, `{"endpoint":"`+s.Endpoint()+`","dimensions":12}`, testKey)
	vecs, _, err := e.Embed(t.Context(), "text-embedding-3-large", []string{"x"})
	if err != nil || len(vecs[0]) != 12 {
		t.Fatalf("dimensions 12: %v", err)
	}
	wrong := loadEmbedder(t, `{"endpoint":"`+s.Endpoint()+`"}`, "sk-wrong")
	if _, _, err := wrong.Embed(t.Context(), "m", []string{"x"}); protocol.CodeOf(err) != protocol.CodeProviderAuth {
		t.Errorf("wrong key: %v", err)
	}
}
