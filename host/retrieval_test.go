package host

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
	"adhost/runtime/retrieval/retrievaltest"
)

// The retrieval endpoints over real HTTP (wire-extensions §6.2, §6.4): a
// Server with a retrieval.Service on a durable.Memory store, an in-process
// hashing embedder, and tokens of several subjects with different grants.

const (
	retrAlice = "retr-alice-token-0123456789abcdef0123456789"
	retrBob   = "retr-bob-token-0123456789abcdef0123456789ab"
	retrCarol = "retr-carol-token-0123456789abcdef012345678"
)

type retrEnv struct {
	url string
	emb *retrievaltest.Embedder
}

func newRetrEnv(t *testing.T, off bool) *retrEnv {
	t.Helper()
	eng, err := runtime.New(runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	emb := &retrievaltest.Embedder{Dim: 64}
	all := []string{"retrieval.search:docs", "retrieval.index:docs", "retrieval.delete:docs",
		"retrieval.search:private", "retrieval.index:private", "retrieval.delete:private", "retrieval.search:gone"}
	opts := ServerOptions{
		Engine: eng,
		Tokens: []Token{
			{ID: "a", Subject: "alice", Secret: retrAlice, Ops: all},
			{ID: "b", Subject: "bob", Secret: retrBob, Ops: all},
			{ID: "c", Subject: "carol", Secret: retrCarol, Ops: []string{"retrieval.search:private"}},
		},
	}
	if !off {
		identity := func(v string) retrieval.Identity {
			return retrieval.Identity{ProviderID: "hash", Vendor: "local", AccountID: "local", AuthMode: "none",
				Model: "hash-ngram-64", Dimensions: 64, Version: v}
		}
		svc, err := retrieval.Open(t.Context(), durable.NewMemory(), []retrieval.Corpus{
			{ID: "docs", Identity: identity("docs-v1"), Embedder: emb},
			{ID: "private", Identity: identity("private-v1"), Embedder: emb, Scope: retrieval.ScopeSubject},
		}, retrieval.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Retrieval = svc
		opts.Features = retrievalFeatures
	}
	s := NewServer(opts)
	s.SetReady()
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = s.newHTTPServer()
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		ts.Close()
	})
	return &retrEnv{url: ts.URL, emb: emb}
}

func (e *retrEnv) post(t *testing.T, token, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *retrEnv) features(t *testing.T, token string) string {
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func indexBody(corpus, id, rev string, texts ...string) string {
	var chunks []string
	for i, tx := range texts {
		chunks = append(chunks, `{"id":"`+id+`-c`+string(rune('0'+i))+`","text":`+quoteJSON(tx)+`,"location":{"startLine":`+string(rune('1'+i))+`,"endLine":`+string(rune('1'+i))+`}}`)
	}
	return `{"corpus":"` + corpus + `","source":{"id":"` + id + `","revision":"` + rev + `","title":"T ` + id + `","uri":"app://docs/` + id + `"},"chunks":[` + strings.Join(chunks, ",") + `]}`
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

type searchResult struct {
	Corpus string             `json:"corpus"`
	Index  retrieval.Identity `json:"index"`
	Hits   []struct {
		ChunkID        string           `json:"chunkId"`
		Source         retrieval.Source `json:"source"`
		Text           string           `json:"text"`
		Score          float64          `json:"score"`
		DocumentSHA256 string           `json:"documentSha256"`
	} `json:"hits"`
	Truncated bool `json:"truncated"`
}

func (e *retrEnv) search(t *testing.T, token, body string) searchResult {
	t.Helper()
	st, b := e.post(t, token, "/v1/retrieval/search", body)
	if st != 200 {
		t.Fatalf("search %s: %d %s", body, st, b)
	}
	var r searchResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRetrievalOff(t *testing.T) {
	e := newRetrEnv(t, true)
	for _, p := range []string{"search", "index", "delete", "ingest"} {
		st, b := e.post(t, retrAlice, "/v1/retrieval/"+p, `{}`)
		wantError(t, p, st, b, 404, protocol.CodeNotFound)
	}
	if f := e.features(t, retrAlice); strings.Contains(f, "retrieval") || strings.Contains(f, "ingestion") {
		t.Errorf("features without retrieval: %s", f)
	}
}

// TestRetrievalIndexSearchDelete: the index lifecycle of one source, with
// its receipts, the provenance of the hits and every conflict code.
func TestRetrievalIndexSearchDelete(t *testing.T) {
	e := newRetrEnv(t, false)
	if f := e.features(t, retrAlice); !strings.Contains(f, `"scoped-retrieval","retrieval-indexing","document-ingestion"`) {
		t.Errorf("features: %s", f)
	}
	body := indexBody("docs", "battery", "r1", "The measured battery lifetime was 812 hours.", "Charging took two hours at room temperature.")
	st, b := e.post(t, retrAlice, "/v1/retrieval/index", body)
	var rec struct {
		Corpus, SourceID, Revision, DocumentSHA256, Status string
		Chunks                                             int
	}
	if json.Unmarshal(b, &rec); st != 200 || rec.Status != "indexed" || rec.Chunks != 2 || len(rec.DocumentSHA256) != 64 || rec.SourceID != "battery" || rec.Revision != "r1" {
		t.Fatalf("index: %d %s", st, b)
	}
	calls := e.emb.Calls.Load()
	st, b = e.post(t, retrAlice, "/v1/retrieval/index", body)
	if !strings.Contains(string(b), `"status":"unchanged"`) || e.emb.Calls.Load() != calls {
		t.Errorf("re-index: %d %s (embedding calls %d → %d)", st, b, calls, e.emb.Calls.Load())
	}
	st, b = e.post(t, retrAlice, "/v1/retrieval/index", indexBody("docs", "battery", "r1", "Other text."))
	wantError(t, "same revision, other content", st, b, 409, retrieval.CodeSourceConflict)
	st, b = e.post(t, retrAlice, "/v1/retrieval/index", strings.Replace(indexBody("docs", "other", "r1", "x"), `"other-c0"`, `"battery-c0"`, 1))
	wantError(t, "chunk id of another source", st, b, 409, retrieval.CodeChunkConflict)
	e.post(t, retrAlice, "/v1/retrieval/index", indexBody("docs", "revenue", "r7", "Quarterly revenue grew in Europe."))

	r := e.search(t, retrBob, `{"corpus":"docs","query":"battery lifetime hours","limit":1}`)
	if len(r.Hits) != 1 || !r.Truncated || r.Index.Model != "hash-ngram-64" || r.Index.Metric != "cosine" {
		t.Fatalf("search: %+v", r)
	}
	h := r.Hits[0]
	if h.ChunkID != "battery-c0" || h.Source.ID != "battery" || h.Source.Revision != "r1" || h.Source.Title != "T battery" ||
		h.Source.Location == nil || h.Source.Location.DocumentID != "battery" || h.Source.Location.StartLine != 1 ||
		h.DocumentSHA256 != rec.DocumentSHA256 || h.Score <= 0 || h.Score > 1.0001 {
		t.Errorf("hit: %+v", h)
	}
	r = e.search(t, retrBob, `{"corpus":"docs","query":"battery","sourceIds":["revenue"]}`)
	if len(r.Hits) != 1 || r.Hits[0].Source.ID != "revenue" {
		t.Errorf("search within a source: %+v", r)
	}
	// The byte budget drops whole passages.
	r = e.search(t, retrBob, `{"corpus":"docs","query":"battery lifetime","maxContextBytes":44}`)
	for _, h := range r.Hits {
		if len(h.Text) > 44 {
			t.Errorf("passage of %d bytes within a budget of 44", len(h.Text))
		}
	}
	if !r.Truncated {
		t.Error("a budget that left passages out is not truncated")
	}
	st, b = e.post(t, retrAlice, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"battery","revision":"r0"}`)
	wantError(t, "delete another revision", st, b, 409, retrieval.CodeSourceConflict)
	st, b = e.post(t, retrAlice, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"battery","revision":"r1"}`)
	if st != 200 || !strings.Contains(string(b), `"deleted":true`) {
		t.Errorf("delete: %d %s", st, b)
	}
	st, b = e.post(t, retrAlice, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"battery","revision":"r1"}`)
	if st != 200 || !strings.Contains(string(b), `"deleted":false`) {
		t.Errorf("delete again: %d %s", st, b)
	}
	st, b = e.post(t, retrBob, "/v1/retrieval/search", `{"corpus":"docs","query":"battery","sourceIds":["battery"]}`)
	wantError(t, "search a deleted source", st, b, 502, retrieval.CodeContextNotFound)
	for _, h := range e.search(t, retrBob, `{"corpus":"docs","query":"battery lifetime"}`).Hits {
		if h.Source.ID == "battery" {
			t.Error("a deleted source is still found")
		}
	}
	// A chunk id is free again once its source is gone.
	st, b = e.post(t, retrAlice, "/v1/retrieval/index", strings.Replace(indexBody("docs", "other", "r1", "x"), `"other-c0"`, `"battery-c0"`, 1))
	if st != 200 {
		t.Errorf("reuse a deleted source's chunk id: %d %s", st, b)
	}
}

// TestRetrievalAuthorization: both layers of §6.1 — the token grant per
// corpus and operation, and the source scope — where an unauthorized
// source answers exactly as a missing one.
func TestRetrievalAuthorization(t *testing.T) {
	e := newRetrEnv(t, false)
	st, b := e.post(t, retrAlice, "/v1/retrieval/index", indexBody("private", "diary", "r1", "Alice's notes about the battery."))
	if st != 200 {
		t.Fatalf("index: %d %s", st, b)
	}
	for _, c := range []struct {
		token, path, body string
		status            int
		code              protocol.Code
	}{
		{retrCarol, "/v1/retrieval/search", `{"corpus":"docs","query":"x"}`, 403, protocol.CodeForbidden},
		{retrCarol, "/v1/retrieval/index", indexBody("private", "c", "r1", "x"), 403, protocol.CodeForbidden},
		{retrCarol, "/v1/retrieval/delete", `{"corpus":"private","sourceId":"diary","revision":"r1"}`, 403, protocol.CodeForbidden},
		{retrAlice, "/v1/retrieval/search", `{"corpus":"nope","query":"x"}`, 403, protocol.CodeForbidden},
		{retrAlice, "/v1/retrieval/search", `{"corpus":"gone","query":"x"}`, 502, retrieval.CodeContextNotFound},
		{retrBob, "/v1/retrieval/search", `{"corpus":"private","query":"battery","sourceIds":["diary"]}`, 502, retrieval.CodeContextNotFound},
		{retrBob, "/v1/retrieval/search", `{"corpus":"private","query":"battery","sourceIds":["missing"]}`, 502, retrieval.CodeContextNotFound},
		{retrBob, "/v1/retrieval/index", indexBody("private", "diary", "r2", "Bob's takeover."), 502, retrieval.CodeContextNotFound},
	} {
		st, b := e.post(t, c.token, c.path, c.body)
		wantError(t, c.path+" "+c.body, st, b, c.status, c.code)
	}
	if r := e.search(t, retrBob, `{"corpus":"private","query":"battery notes"}`); len(r.Hits) != 0 {
		t.Errorf("bob sees alice's private source: %+v", r.Hits)
	}
	if r := e.search(t, retrCarol, `{"corpus":"private","query":"battery notes"}`); len(r.Hits) != 0 {
		t.Errorf("carol sees alice's private source: %+v", r.Hits)
	}
	st, b = e.post(t, retrBob, "/v1/retrieval/delete", `{"corpus":"private","sourceId":"diary","revision":"r1"}`)
	if st != 200 || !strings.Contains(string(b), `"deleted":false`) {
		t.Errorf("bob deletes alice's source: %d %s", st, b)
	}
	if r := e.search(t, retrAlice, `{"corpus":"private","query":"battery notes"}`); len(r.Hits) != 1 {
		t.Errorf("alice's own source: %+v", r.Hits)
	}
}

// TestRetrievalShapes: strict bodies, each bound at its edge.
func TestRetrievalShapes(t *testing.T) {
	e := newRetrEnv(t, false)
	long := strings.Repeat("a", 128)
	for _, c := range []struct {
		path, body string
		ok         bool
	}{
		{"search", `{"corpus":"docs","query":"x","limit":16}`, true},
		{"search", `{"corpus":"docs","query":"x","limit":17}`, false},
		{"search", `{"corpus":"docs","query":"x","limit":0}`, false},
		{"search", `{"corpus":"docs","query":"x","limit":1.5}`, false},
		{"search", `{"corpus":"docs","query":"x","maxContextBytes":262144}`, true},
		{"search", `{"corpus":"docs","query":"x","maxContextBytes":262145}`, false},
		{"search", `{"corpus":"docs","query":"x","minScore":-1}`, true},
		{"search", `{"corpus":"docs","query":"x","minScore":1.01}`, false},
		{"search", `{"corpus":"docs","query":"   "}`, false},
		{"search", `{"corpus":"docs","query":"` + strings.Repeat("q", 16384) + `"}`, true},
		{"search", `{"corpus":"docs","query":"` + strings.Repeat("q", 16385) + `"}`, false},
		{"search", `{"corpus":"docs"}`, false},
		{"search", `{"corpus":"docs","query":"x","extra":1}`, false},
		{"search", `{"corpus":"docs","query":null}`, false},
		{"search", `{"Corpus":"docs","query":"x"}`, false},
		{"search", `{"corpus":"docs","query":"x","sourceIds":[]}`, false},
		{"search", `{"corpus":"docs","query":"x","sourceIds":["a","a"]}`, false},
		{"search", `{"corpus":"` + long[:127] + `","query":"x"}`, false}, // valid id, no grant: FORBIDDEN, not a shape error
		{"index", `{"corpus":"docs","source":{"id":"` + long + `","revision":"r"},"chunks":[{"id":"c","text":"x"}]}`, true},
		{"index", `{"corpus":"docs","source":{"id":"` + long + `b","revision":"r"},"chunks":[{"id":"c2","text":"x"}]}`, false},
		{"index", `{"corpus":"docs","source":{"id":"s","revision":"r"},"chunks":[]}`, false},
		{"index", `{"corpus":"docs","source":{"id":"s","revision":"r","uri":"http://x"},"chunks":[{"id":"c","text":"x"}]}`, false},
		{"index", `{"corpus":"docs","source":{"id":"s","revision":"r","location":{"documentId":"t"}},"chunks":[{"id":"c","text":"x"}]}`, false},
		{"index", `{"corpus":"docs","source":{"id":"s","revision":"r"},"chunks":[{"id":"c","text":"x","location":{"startLine":5,"endLine":4}}]}`, false},
		{"index", `{"corpus":"docs","source":{"id":"s","revision":"r"},"chunks":[{"id":"c","text":""}]}`, false},
		{"delete", `{"corpus":"docs","sourceId":"s"}`, false},
	} {
		st, b := e.post(t, retrAlice, "/v1/retrieval/"+c.path, c.body)
		switch {
		case c.ok && st != 200:
			t.Errorf("%s %.80s: %d %s, want 200", c.path, c.body, st, b)
		case !c.ok && st == 200:
			t.Errorf("%s %.80s: accepted", c.path, c.body)
		case !c.ok && st == 400 && !strings.Contains(string(b), string(retrieval.CodeInvalidRetrieval)):
			t.Errorf("%s %.80s: %s", c.path, c.body, b)
		}
	}
	st, b := e.post(t, retrAlice, "/v1/retrieval/search", `{"corpus":`)
	wantError(t, "not JSON", st, b, 400, protocol.CodeInvalidRequest)
}

// TestRetrievalIngest: Markdown and an email thread over HTTP, searched
// back with their provenance; a PDF without an extractor.
func TestRetrievalIngest(t *testing.T) {
	e := newRetrEnv(t, false)
	md := "# Battery\nThe cell lasted 812 hours.\n\n# Charging\nTwo hours at room temperature.\n"
	st, b := e.post(t, retrAlice, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"r1","title":"Guide"},"mediaType":"text/markdown","text":`+quoteJSON(md)+`}}`)
	if st != 200 || !strings.Contains(string(b), `"format":"markdown"`) || !strings.Contains(string(b), `"chunks":2`) {
		t.Fatalf("ingest markdown: %d %s", st, b)
	}
	st, b = e.post(t, retrAlice, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"email","source":{"id":"mail","revision":"r1"},"threadId":"th-9","messages":[{"id":"m-1","text":"Did the battery pass?"},{"id":"m-2","text":"Yes: 812 hours."}]}}`)
	if st != 200 || !strings.Contains(string(b), `"messages":{"total":2,"empty":0}`) {
		t.Fatalf("ingest email: %d %s", st, b)
	}
	r := e.search(t, retrBob, `{"corpus":"docs","query":"battery 812 hours","limit":16}`)
	seen := map[string]bool{}
	for _, h := range r.Hits {
		l := h.Source.Location
		switch h.Source.ID {
		case "guide":
			if h.Source.Revision != "r1" || l.Section == "" || l.StartLine < 1 || l.EndLine < l.StartLine || !strings.HasPrefix(h.ChunkID, "p-") {
				t.Errorf("markdown hit %+v", h)
			}
			seen[l.Section] = true
		case "mail":
			if l.ThreadID != "th-9" || l.MessageID == "" || l.StartLine != 1 {
				t.Errorf("email hit %+v", h)
			}
			seen[l.MessageID] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("provenance seen: %v", seen)
	}
	st, b = e.post(t, retrAlice, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"pdf","source":{"id":"p","revision":"r1"},"mediaType":"application/pdf","data":"JVBERi0xLjQK"}}`)
	wantError(t, "pdf without an extractor", st, b, 400, retrieval.CodePDFExtractorRequired)
	st, b = e.post(t, retrCarol, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"text","source":{"id":"x","revision":"r1"},"mediaType":"text/plain","text":"x"}}`)
	wantError(t, "ingest without the index grant", st, b, 403, protocol.CodeForbidden)
}
