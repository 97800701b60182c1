package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval/retrievaltest"
)

func principal(subject string, corpora ...string) *runtime.Principal {
	p := &runtime.Principal{Subject: subject, Ops: map[string]bool{}}
	for _, c := range corpora {
		for _, op := range []string{"search", "index", "delete"} {
			p.Ops["retrieval."+op+":"+c] = true
		}
	}
	return p
}

func testCorpus(emb Embedder, mod func(*Corpus)) Corpus {
	c := Corpus{ID: "docs", Embedder: emb, Identity: Identity{ProviderID: "hash", Vendor: "local", AccountID: "local",
		AuthMode: "none", Model: "hash-ngram-32", Dimensions: 32, Version: "v1"}}
	if mod != nil {
		mod(&c)
	}
	return c
}

func open(t testing.TB, kv durable.KV, c ...Corpus) *Service {
	t.Helper()
	s, err := Open(context.Background(), kv, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func doc(id, rev string, n int, text func(i int) string) *IndexRequest {
	r := &IndexRequest{Corpus: "docs", Source: Source{ID: id, Revision: rev}}
	for i := range n {
		r.Chunks = append(r.Chunks, Chunk{ID: fmt.Sprintf("%s-%d", id, i), Text: text(i)})
	}
	return r
}

func wantCode(t *testing.T, what string, err error, code protocol.Code) {
	t.Helper()
	if protocol.CodeOf(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// TestPersistence: a reopened service finds what was indexed, without
// embedding anything again, and refuses a changed identity.
func TestPersistence(t *testing.T) {
	kv := durable.NewMemory()
	emb := &retrievaltest.Embedder{Dim: 32}
	s := open(t, kv, testCorpus(emb, nil))
	p := principal("alice", "docs")
	for i := range 5 {
		if _, err := s.Put(t.Context(), p, doc(fmt.Sprint("s", i), "r1", 3, func(j int) string { return fmt.Sprintf("source %d passage %d word%d", i, j, i*10+j) }), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Remove(t.Context(), p, &DeleteRequest{Corpus: "docs", SourceID: "s2", Revision: "r1"}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Find(t.Context(), p, &SearchRequest{Corpus: "docs", Query: "word31", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	emb2 := &retrievaltest.Embedder{Dim: 32}
	s2 := open(t, kv, testCorpus(emb2, nil))
	after, err := s2.Find(t.Context(), p, &SearchRequest{Corpus: "docs", Query: "word31", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	if err != nil || emb2.Texts.Load() != 1 {
		t.Fatalf("search after reopen: %v, %d texts embedded", err, emb2.Texts.Load())
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	if string(a) != string(b) || len(after.Hits) != 12 || after.Hits[0].ChunkID != "s3-1" {
		t.Errorf("before %s\nafter  %s", a, b)
	}
	for _, mod := range []func(*Corpus){
		func(c *Corpus) { c.Identity.Model = "other" },
		func(c *Corpus) { c.Identity.Dimensions = 64 },
		func(c *Corpus) { c.Identity.Version = "v2" },
		func(c *Corpus) { c.Identity.AccountID = "another-account" },
	} {
		_, err := Open(t.Context(), kv, []Corpus{testCorpus(emb2, mod)}, Options{})
		wantCode(t, "changed identity", err, CodeIndexIncompatible)
	}
	if emb2.Texts.Load() != 1 {
		t.Error("an incompatible open embedded something")
	}
}

// TestEmbeddingChecks: every vector is checked and normalised; a failed
// embedding leaves the previous document untouched.
func TestEmbeddingChecks(t *testing.T) {
	emb := &retrievaltest.Embedder{Dim: 32}
	s := open(t, durable.NewMemory(), testCorpus(emb, nil))
	p := principal("alice", "docs")
	if _, err := s.Put(t.Context(), p, doc("a", "r1", 2, func(int) string { return "old text" }), nil); err != nil {
		t.Fatal(err)
	}
	for name, mangle := range map[string]func([][]float32) [][]float32{
		"count": func(v [][]float32) [][]float32 { return v[:1] },
		"dims":  func(v [][]float32) [][]float32 { v[0] = v[0][:31]; return v },
		"nan":   func(v [][]float32) [][]float32 { v[1][3] = float32(math.NaN()); return v },
		"inf":   func(v [][]float32) [][]float32 { v[1][3] = float32(math.Inf(1)); return v },
		"zero":  func(v [][]float32) [][]float32 { v[0] = make([]float32, 32); return v },
	} {
		emb.Mangle = mangle
		_, err := s.Put(t.Context(), p, doc("a", "r2", 2, func(int) string { return "new text" }), nil)
		wantCode(t, name, err, CodeInvalidEmbedding)
	}
	emb.Mangle = nil
	for code, want := range map[protocol.Code]protocol.Code{
		protocol.CodeProviderAuth: CodeEmbeddingAuth, protocol.CodeProviderError: CodeEmbeddingHTTP,
		protocol.CodeRateLimited: protocol.CodeRateLimited, protocol.CodeProviderFailed: CodeEmbeddingFailed,
		protocol.CodeAuthRequired: protocol.CodeAuthRequired,
	} {
		emb.Fail = protocol.New(code)
		_, err := s.Put(t.Context(), p, doc("a", "r2", 2, func(int) string { return "new text" }), nil)
		wantCode(t, string(code), err, want)
	}
	emb.Fail = nil
	r, err := s.Find(t.Context(), p, &SearchRequest{Corpus: "docs", Query: "old text", Limit: 8, MaxContextBytes: 100, MinScore: -1})
	if err != nil || len(r.Hits) != 2 || r.Hits[0].Source.Revision != "r1" || math.Abs(r.Hits[0].Score-1) > 1e-5 {
		t.Fatalf("after failures: %+v %v", r, err)
	}
}

// TestBounds: capacity and embedding batches at their edges.
func TestBounds(t *testing.T) {
	emb := &retrievaltest.Embedder{Dim: 32}
	s := open(t, durable.NewMemory(), testCorpus(emb, func(c *Corpus) {
		c.MaxChunks, c.MaxPayloadBytes, c.BatchTexts, c.BatchBytes = 10, 1000, 3, 25
	}))
	p := principal("alice", "docs")
	ten := func(i int) string { return fmt.Sprintf("ten bytes%d", i) } // 10 bytes each
	if _, err := s.Put(t.Context(), p, doc("a", "r1", 7, ten), nil); err != nil {
		t.Fatal(err)
	}
	// 3 texts or 25 bytes per call: 10+10 fit, a third would make 30.
	if got := fmt.Sprint(emb.Batches()); got != "[2 2 2 1]" {
		t.Errorf("batches %s, want [2 2 2 1]", got)
	}
	_, err := s.Put(t.Context(), p, doc("b", "r1", 4, ten), nil)
	wantCode(t, "11 chunks of 10", err, CodeIndexFull)
	if _, err := s.Put(t.Context(), p, doc("b", "r1", 3, ten), nil); err != nil {
		t.Errorf("exactly 10 chunks: %v", err)
	}
	// A new revision replaces: its old chunks do not count.
	if _, err := s.Put(t.Context(), p, doc("a", "r2", 7, ten), nil); err != nil {
		t.Errorf("replace at capacity: %v", err)
	}
	big := open(t, durable.NewMemory(), testCorpus(emb, func(c *Corpus) { c.MaxPayloadBytes = 100 }))
	if _, err := big.Put(t.Context(), p, doc("a", "r1", 10, ten), nil); err != nil {
		t.Errorf("exactly 100 bytes: %v", err)
	}
	_, err = big.Put(t.Context(), p, doc("b", "r1", 1, func(int) string { return "x" }), nil)
	wantCode(t, "101 bytes", err, CodeIndexFull)
}

// TestConcurrentChanges: searches running beside index and delete of the
// same sources never return a passage of a revision that is not current
// when the search ends, nor a deleted one, and the matrix stays
// consistent with the documents (checked by a final exact comparison).
func TestConcurrentChanges(t *testing.T) {
	emb := &retrievaltest.Embedder{Dim: 32}
	s := open(t, durable.NewMemory(), testCorpus(emb, nil))
	p := principal("alice", "docs")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				id := fmt.Sprintf("s%d", (w+i)%5)
				rev := fmt.Sprintf("r%d-%d", w, i)
				_, err := s.Put(context.Background(), p, doc(id, rev, 1+i%4, func(j int) string { return "shared words " + rev }), nil)
				if c := protocol.CodeOf(err); err != nil && c != CodeSourceConflict && c != CodeChunkConflict {
					t.Errorf("put: %v", err)
				}
				if i%3 == 0 {
					s.Remove(context.Background(), p, &DeleteRequest{Corpus: "docs", SourceID: id, Revision: rev})
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := s.Find(context.Background(), p, &SearchRequest{Corpus: "docs", Query: "shared words", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1}); err != nil {
					t.Errorf("find: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	c := s.corpora["docs"]
	n := 0
	for _, d := range c.docs {
		for ord, row := range d.rows {
			n++
			if c.rows[row].doc != d || c.rows[row].ord != ord {
				t.Fatalf("row %d does not point back at %s/%d", row, d.rec.Source.ID, ord)
			}
			want := retrievaltest.Vector(d.rec.Chunks[ord].Text, 32)
			normalise(want, 32)
			if got := c.mat.row(row); dot(got, want) < 0.9999 {
				t.Fatalf("row %d holds another vector", row)
			}
		}
	}
	if n != c.mat.rows() || n != len(c.rows) || n != len(c.owner) || c.lex.live != n {
		t.Errorf("%d chunks, %d rows, %d refs, %d owners, %d lexical", n, c.mat.rows(), len(c.rows), len(c.owner), c.lex.live)
	}
}

// TestHybrid: BM25 fusion lifts a passage naming a rare exact term that
// the cosine ranking alone puts below passages sharing common words.
func TestHybrid(t *testing.T) {
	texts := map[string]string{
		"common-1": "the battery report for the quarter covers the battery report results",
		"common-2": "battery report summary and the battery report appendix",
		"rare":     "error code ZX-4411 appears when the cell overheats",
	}
	rank := func(r Ranking) []string {
		s := open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, func(c *Corpus) { c.Ranking = r }))
		p := principal("a", "docs")
		for id, tx := range texts {
			if _, err := s.Put(t.Context(), p, &IndexRequest{Corpus: "docs", Source: Source{ID: id, Revision: "r"}, Chunks: []Chunk{{ID: id, Text: tx}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.Find(t.Context(), p, &SearchRequest{Corpus: "docs", Query: "battery report ZX-4411", Limit: 3, MaxContextBytes: MaxContextBytes, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range res.Hits {
			ids = append(ids, h.ChunkID)
		}
		return ids
	}
	v, h := rank(RankVector), rank(RankHybrid)
	if len(v) != 3 || len(h) != 3 || slicesIndex(h, "rare") >= slicesIndex(v, "rare") && slicesIndex(v, "rare") != 0 {
		t.Errorf("vector %v, hybrid %v: fusion did not lift the rare term", v, h)
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}

func TestDigestIsCanonical(t *testing.T) {
	src := Source{ID: "s", Revision: "r", Title: "<a&b>"}
	a, _ := digest(src, []Chunk{{ID: "c", Text: "x"}}, nil)
	b, _ := digest(src, []Chunk{{ID: "c", Text: "x"}}, nil)
	c, _ := digest(src, []Chunk{{ID: "c", Text: "y"}}, nil)
	if a != b || a == c || len(a) != 64 {
		t.Errorf("digests %s %s %s", a, b, c)
	}
	// No HTML escaping: the canonical form holds the raw characters.
	raw, _ := json.Marshal(src)
	canon, _ := protocol.Canonical(raw)
	if !strings.Contains(string(canon), "<a&b>") {
		t.Errorf("canonical form escapes HTML: %s", canon)
	}
}

// TestMessages: every retrieval code reaches the client with its own
// fixed message, never the generic one, and a wrapped cause stays private.
func TestMessages(t *testing.T) {
	generic := protocol.Message("NO_SUCH_CODE")
	for code := range messages {
		if e := failWrap(code, fmt.Errorf("private detail")); e.Message == generic || strings.Contains(e.Message, "private") || e.Code != code {
			t.Errorf("%s: %+v", code, e.Info())
		}
	}
}
