package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// retrievalSite is the dev site with the local-hashing embedder and a
// docs corpus the dev token may search, index and delete.
func retrievalSite(t *testing.T, model string, dims int) *site {
	t.Helper()
	s := newSite(t)
	lh := copyPlugin(t, s.dir, "local-hashing", "1.0.0")
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`
[tokens.grants]
retrieval = { search = ["docs"], index = ["docs"], delete = ["docs"] }

[[extensions]]
id = "local-hashing"
version = "1.0.0"
module = %q
sha256 = %q

[[retrieval.embedders]]
id = "local-hashing"
extension = "local-hashing@1.0.0"
account_id = "local"

[retrieval.corpora.docs]
embedder = "local-hashing"
model = %q
dimensions = %d
version = "docs-v1"
`, filepath.Base(lh.path), lh.digest, model, dims)
	if err := os.WriteFile(s.config, append(doc, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func retrievalPost(t *testing.T, srv *server, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRetrievalEndToEnd: the real binary with the local-hashing wasm
// embedder and Badger: the features, adhost ingest of Markdown and text,
// an email thread over HTTP, search with provenance, the same answers
// after a restart (the matrix is rebuilt from the store), and a start
// with another embedding model refused as INDEX_INCOMPATIBLE.
func TestRetrievalEndToEnd(t *testing.T) {
	s := retrievalSite(t, "hash-ngram-256", 256)
	srv := startServer(t, s)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"scoped-retrieval","retrieval-indexing","document-ingestion"`) {
		t.Errorf("features: %s", b)
	}
	md := filepath.Join(s.dir, "guide.md")
	os.WriteFile(md, []byte("# Battery\nThe cell lasted 812 hours.\n\n# Charging\nTwo hours at room temperature.\n"), 0o600)
	txt := filepath.Join(s.dir, "notes.txt")
	os.WriteFile(txt, []byte("Line one about revenue.\nLine two about Europe.\n"), 0o600)
	tok := filepath.Join(s.dir, "data", "dev.token")
	code, stdout, stderr := adhost(t, "ingest", "--config", s.config, "--url", srv.URL, "--token-file", tok, "--corpus", "docs", md, txt)
	if code != 0 || strings.Count(stdout, `"status":"indexed"`) != 2 {
		t.Fatalf("adhost ingest: %d %s %s", code, stdout, stderr)
	}
	st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"email","source":{"id":"mail","revision":"r1"},"threadId":"th-1","messages":[{"id":"m-1","text":"Did the battery pass?"},{"id":"m-2","text":"Yes, 812 hours."}]}}`)
	if st != 200 {
		t.Fatalf("ingest email: %d %s", st, body)
	}
	search := func() []map[string]any {
		st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery 812 hours","limit":16}`)
		var r struct{ Hits []map[string]any }
		if st != 200 || json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("search: %d %s", st, body)
		}
		return r.Hits
	}
	before := search()
	prov := map[string]bool{}
	for _, h := range before {
		src := h["source"].(map[string]any)
		loc := src["location"].(map[string]any)
		if src["revision"] == nil || loc["startLine"] == nil || loc["endLine"] == nil || loc["documentId"] != src["id"] {
			t.Errorf("hit without provenance: %v", h)
		}
		key := fmt.Sprint(src["id"], "/", loc["section"], loc["messageId"])
		prov[key] = true
	}
	for _, want := range []string{"guide.md/Battery<nil>", "guide.md/Charging<nil>", "mail/<nil>m-1", "mail/<nil>m-2", "notes.txt/<nil> <nil>"} {
		if !prov[want] {
			t.Errorf("no hit from %s in %v", want, prov)
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	srv = startServer(t, s)
	after := search()
	a, _ := json.Marshal(before)
	c, _ := json.Marshal(after)
	if string(a) != string(c) {
		t.Errorf("after a restart:\n%s\nbefore:\n%s", c, a)
	}
	srv.stop(t, syscall.SIGTERM)

	// Another model under the same corpus: refused before anything is embedded.
	cfg, _ := os.ReadFile(s.config)
	cfg = []byte(strings.NewReplacer(`model = "hash-ngram-256"`, `model = "hash-ngram-128"`, `dimensions = 256`, `dimensions = 128`).Replace(string(cfg)))
	os.WriteFile(s.config, cfg, 0o644)
	code, _, stderr = adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "INDEX_INCOMPATIBLE") {
		t.Errorf("serve with another model: %d %s", code, stderr)
	}
}
