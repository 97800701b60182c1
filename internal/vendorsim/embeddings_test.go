package vendorsim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postEmbeddings(t *testing.T, s *Server, key, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.Endpoint()+"embeddings", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not JSON: %s", b)
	}
	return resp, m
}

// TestEmbeddingsWire: the embeddings endpoint answers in OpenAI's shapes —
// the list with indexed embedding objects and usage, a single string
// input, requested dimensions, the error object for a bad request, a 429
// with Retry-After, an exhausted quota, a missing key — and records every
// request with the key redacted.
func TestEmbeddingsWire(t *testing.T) {
	s := MustNew(t, "openai", Options{APIKey: "k1"})
	resp, m := postEmbeddings(t, s, "k1", `{"model":"text-embedding-3-small","input":["one two","three"],"encoding_format":"float"}`)
	data, _ := m["data"].([]any)
	if resp.StatusCode != 200 || m["object"] != "list" || m["model"] != "text-embedding-3-small" || len(data) != 2 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	for i, d := range data {
		o := d.(map[string]any)
		if o["object"] != "embedding" || o["index"] != float64(i) || len(o["embedding"].([]any)) != DefaultEmbeddingDims {
			t.Errorf("data[%d] = %v", i, o)
		}
	}
	if u := m["usage"].(map[string]any); u["prompt_tokens"] != float64(3) || u["total_tokens"] != float64(3) {
		t.Errorf("usage %v", u)
	}
	if _, m := postEmbeddings(t, s, "k1", `{"model":"m","input":"single","dimensions":5}`); len(m["data"].([]any)[0].(map[string]any)["embedding"].([]any)) != 5 {
		t.Errorf("single input with dimensions 5: %v", m)
	}
	for _, c := range []struct {
		key, body  string
		status     int
		typ, code  string
		retryAfter string
	}{
		{"k1", `{"model":"m","input":[]}`, 400, "invalid_request_error", "", ""},
		{"k1", `{"input":["x"]}`, 400, "invalid_request_error", "", ""},
		{"k1", `{"model":"m","input":["x"],"encoding_format":"int8"}`, 400, "invalid_request_error", "", ""},
		{"k1", `{"model":"m","input":["x","vendorsim:rate-limit"]}`, 429, "requests", "rate_limit_exceeded", "2"},
		{"k1", `{"model":"m","input":["vendorsim:insufficient-quota"]}`, 429, "insufficient_quota", "insufficient_quota", ""},
		{"k1", `{"model":"m","input":["vendorsim:server-error"]}`, 500, "server_error", "", ""},
		{"", `{"model":"m","input":["x"]}`, 401, "invalid_request_error", "invalid_api_key", ""},
	} {
		resp, m := postEmbeddings(t, s, c.key, c.body)
		e, _ := m["error"].(map[string]any)
		code, _ := e["code"].(string)
		if resp.StatusCode != c.status || e == nil || e["type"] != c.typ || code != c.code || e["message"] == "" || resp.Header.Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: %d %v retry-after %q", c.body, resp.StatusCode, m, resp.Header.Get("Retry-After"))
		}
	}
	reqs := s.Requests()
	if len(reqs) != 9 || reqs[0].Path != "/v1/embeddings" || reqs[0].Header.Get("Authorization") != "REDACTED" || reqs[0].Credential != CredentialOK || reqs[8].Credential != CredentialMissing {
		t.Errorf("recorded %d requests, first %+v", len(reqs), reqs[0])
	}
}

func TestEmbeddingVector(t *testing.T) {
	a, b := EmbeddingVector("x", 8), EmbeddingVector("x", 8)
	c := EmbeddingVector("y", 8)
	same, zero := true, true
	for i := range a {
		same = same && a[i] == c[i]
		zero = zero && a[i] == 0
		if a[i] != b[i] {
			t.Fatal("not deterministic")
		}
	}
	if same || zero {
		t.Errorf("x and y equal %v, x zero %v", same, zero)
	}
}
