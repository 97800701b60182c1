package host

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/retrieval"
	"adhost/runtime/retrieval/retrievaltest"
	"adhost/store"
)

// TestEmbeddingUsageMeteredApart: over HTTP, an ingest and a search on two
// corpora with different embedding accounts write embedding usage records
// (the account, subject, corpus, operation and counts of each call) to the
// store, and not one generation usage record (wire-extensions §6.5).
func TestEmbeddingUsageMeteredApart(t *testing.T) {
	st, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := runtime.New(runtime.Options{UsageSink: st, HostID: "host-7"})
	if err != nil {
		t.Fatal(err)
	}
	emb := &retrievaltest.Embedder{Dim: 32}
	corpus := func(id, account string) retrieval.Corpus {
		return retrieval.Corpus{ID: id, Embedder: emb, BatchTexts: 2, Identity: retrieval.Identity{ProviderID: "hash-" + id, Vendor: "local",
			AccountID: account, AuthMode: "none", Model: "hash-ngram-32", Dimensions: 32, Version: "v1"}}
	}
	svc, err := retrieval.Open(t.Context(), st, []retrieval.Corpus{corpus("docs", "acct-docs"), corpus("notes", "acct-notes")},
		retrieval.Options{Usage: cliEmbeddingUsage(st, eng.HostID, slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{"retrieval.search:docs", "retrieval.index:docs", "retrieval.search:notes", "retrieval.index:notes"}
	s := NewServer(ServerOptions{Engine: eng, Retrieval: svc, Features: retrievalFeatures,
		Tokens: []Token{{ID: "a", Subject: "alice", Secret: retrAlice, Ops: ops}, {ID: "b", Subject: "bob", Secret: retrBob, Ops: ops}}})
	s.SetReady()
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = s.newHTTPServer()
	ts.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		ts.Close()
	}()
	e := &retrEnv{url: ts.URL, emb: emb}
	// Three lines of 200 bytes at chunk size 256: three chunks, two calls
	// of at most two texts.
	line := func(w string) string {
		b := make([]byte, 0, 200)
		for len(b) < 195 {
			b = append(b, w...)
			b = append(b, ' ')
		}
		return string(b)
	}
	text := line("alpha") + "\n" + line("beta") + "\n" + line("gamma")
	if st, b := e.post(t, retrAlice, "/v1/retrieval/ingest", `{"corpus":"docs","chunking":{"maxBytes":256},"document":{"type":"text","source":{"id":"d1","revision":"r1"},"mediaType":"text/plain","text":`+quoteJSON(text)+`}}`); st != 200 {
		t.Fatalf("ingest: %d %s", st, b)
	}
	if st, b := e.post(t, retrBob, "/v1/retrieval/ingest", `{"corpus":"notes","document":{"type":"text","source":{"id":"n1","revision":"r1"},"mediaType":"text/plain","text":"alpha note"}}`); st != 200 {
		t.Fatalf("ingest notes: %d %s", st, b)
	}
	if st, b := e.post(t, retrBob, "/v1/retrieval/search", `{"corpus":"notes","query":"alpha"}`); st != 200 {
		t.Fatalf("search: %d %s", st, b)
	}
	type row struct {
		account, subject, corpus, op string
		inputs                       int
		tokens                       int64
	}
	var got []row
	if err := st.EmbeddingUsage(t.Context(), time.Time{}, func(r *runtime.EmbeddingUsageRecord) bool {
		if r.Schema != runtime.EmbeddingUsageSchema || r.HostID != "host-7" || r.EventID == "" || r.Model != "hash-ngram-32" || r.Provider != "hash-"+r.Corpus || r.InputTokens == nil {
			t.Errorf("record %+v", r)
		}
		var tok int64
		if r.InputTokens != nil {
			tok = *r.InputTokens
		}
		got = append(got, row{r.AccountID, r.Subject, r.Corpus, r.Operation, r.Inputs, tok})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []row{{"acct-docs", "alice", "docs", "index", 2, 2}, {"acct-docs", "alice", "docs", "index", 1, 1},
		{"acct-notes", "bob", "notes", "index", 1, 1}, {"acct-notes", "bob", "notes", "search", 1, 1}}
	if len(got) != len(want) {
		t.Fatalf("embedding records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	n := 0
	if err := st.Usage(t.Context(), time.Time{}, func(*runtime.UsageRecord) bool { n++; return true }); err != nil || n != 0 {
		t.Fatalf("%d generation usage records (%v), want none", n, err)
	}
}
