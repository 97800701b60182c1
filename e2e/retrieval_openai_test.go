package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"adhost/internal/vendorsim"
	"adhost/runtime"
	"adhost/store"
)

// TestRetrievalOpenAIEmbeddings: a corpus on the openai-embeddings
// extension, pointed at the loopback simulator, beside the local-hashing
// one: the host injects the key (the simulator checks it; the plugin never
// sees it), search reports the corpus's own index identity (vendor openai,
// api-key, its embedding account), and the provider's 429 and rejected
// key reach the client as RATE_LIMITED and EMBEDDING_AUTH_REJECTED, a
// 500 as EMBEDDING_HTTP_ERROR, a vector short as INVALID_EMBEDDING.
func TestRetrievalOpenAIEmbeddings(t *testing.T) {
	const key = "sk-e2e-embeddings-0123456789"
	sim := vendorsim.MustNew(t, "openai", vendorsim.Options{APIKey: key, EmbeddingDims: 16})
	t.Parallel()
	s := retrievalSite(t, "hash-ngram-256", 256)
	if err := os.WriteFile(filepath.Join(s.dir, "embed.key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oe := copyPlugin(t, s.dir, "openai-embeddings", "1.0.0")
	editSiteConfig(t, s, `retrieval = { search = ["docs"], index = ["docs"], delete = ["docs"] }`,
		`retrieval = { search = ["docs", "research"], index = ["docs", "research"], delete = ["docs"] }`)
	appendSiteConfig(t, s, fmt.Sprintf(`
[[extensions]]
id = "openai-embeddings"
version = "1.0.0"
module = %q
sha256 = %q

[[retrieval.embedders]]
id = "research-embeddings"
extension = "openai-embeddings@1.0.0"
account_id = "research-api"
settings = { endpoint = %q }
secrets = { api_key = { file = "embed.key" } }

[retrieval.corpora.research]
embedder = "research-embeddings"
model = "text-embedding-3-small"
dimensions = 16
version = "passages-v1"
`, filepath.Base(oe.path), oe.digest, sim.Endpoint()))
	srv := startServer(t, s)
	ingest := func(id, text string) (int, string) {
		return retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", fmt.Sprintf(
			`{"corpus":"research","document":{"type":"text","source":{"id":%q,"revision":"r1"},"mediaType":"text/plain","text":%q}}`, id, text))
	}
	if st, body := ingest("paper-1", "The measured battery lifetime was 812 hours.\n\nCharging took two hours."); st != 200 || !strings.Contains(body, `"status":"indexed"`) {
		t.Fatalf("ingest: %d %s", st, body)
	}
	st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"research","query":"battery lifetime"}`)
	var r struct {
		Index map[string]any
		Hits  []struct{ Source struct{ ID, Revision string } }
	}
	if st != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Hits) == 0 {
		t.Fatalf("search: %d %s", st, body)
	}
	want := map[string]any{"providerId": "research-embeddings", "vendor": "openai", "accountId": "research-api", "authMode": "api-key",
		"model": "text-embedding-3-small", "dimensions": float64(16), "metric": "cosine", "version": "passages-v1"}
	for k, v := range want {
		if r.Index[k] != v {
			t.Errorf("index.%s = %v, want %v", k, r.Index[k], v)
		}
	}
	for _, h := range r.Hits {
		if h.Source.ID != "paper-1" || h.Source.Revision != "r1" {
			t.Errorf("hit from %+v", h.Source)
		}
	}
	reqs := sim.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d embedding requests, want 2 (ingest, search)", len(reqs))
	}
	for _, q := range reqs {
		if q.Path != "/v1/embeddings" || q.Credential != vendorsim.CredentialOK || strings.Contains(string(q.Body), key) {
			t.Errorf("request %s credential %s", q.Path, q.Credential)
		}
	}
	for _, c := range []struct {
		text, code string
		status     int
	}{
		{"vendorsim:rate-limit", "RATE_LIMITED", 429},
		{"vendorsim:unauthorized", "EMBEDDING_AUTH_REJECTED", 502},
		{"vendorsim:server-error", "EMBEDDING_HTTP_ERROR", 502},
		{"vendorsim:embed-missing", "INVALID_EMBEDDING", 502},
	} {
		st, body := ingest("fail-"+c.code, c.text)
		if st != c.status || !strings.Contains(body, `"`+c.code+`"`) || strings.Contains(body, "Rate limit reached") {
			t.Errorf("%s: %d %s, want %d %s", c.text, st, body, c.status, c.code)
		}
	}
	// The local-hashing corpus beside it is untouched.
	if st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"anything"}`); st != 200 {
		t.Errorf("docs search: %d %s", st, body)
	}

	// The binary metered both embedding calls that succeeded on their own,
	// under the embedding account with the provider's token counts, and
	// wrote no generation usage for them.
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	st2, err := store.Open(filepath.Join(s.dir, "data"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var recs []*runtime.EmbeddingUsageRecord
	st2.EmbeddingUsage(t.Context(), time.Time{}, func(r *runtime.EmbeddingUsageRecord) bool {
		if r.Corpus == "research" {
			recs = append(recs, r)
		}
		return true
	})
	if len(recs) != 2 || recs[0].Operation != "index" || recs[1].Operation != "search" {
		t.Fatalf("embedding usage %+v", recs)
	}
	for i, want := range []int64{11, 2} { // the simulator counts words: the one passage, the query
		r := recs[i]
		if r.AccountID != "research-api" || r.Provider != "research-embeddings" || r.Model != "text-embedding-3-small" ||
			r.Subject != "dev-user" || r.InputTokens == nil || *r.InputTokens != want {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	generation := 0
	st2.Usage(t.Context(), time.Time{}, func(*runtime.UsageRecord) bool { generation++; return true })
	if generation != 0 {
		t.Errorf("%d generation usage records", generation)
	}
}
