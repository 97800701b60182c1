package retrieval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"adhost/abi"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval/retrievaltest"
)

func ingest(t *testing.T, s *Service, body string) (*IndexResult, error) {
	t.Helper()
	req, err := DecodeIngest([]byte(body))
	if err != nil {
		return nil, err
	}
	return s.IngestDocument(t.Context(), principal("alice", "docs"), req)
}

const guide = "Intro line\r\n\r\n# Install\r\nRun make.\r\n```\r\n# not a heading\r\n```\r\nDone.\r\n\r\nUsage\r\n=====\r\nCall it.\r\n"

// TestIngestMarkdown: sections at ATX and setext headings but not inside
// fenced code, CRLF normalised, lines 1-based, and the manifest and chunk
// ids by the recipes of §6.5.
func TestIngestMarkdown(t *testing.T) {
	s := open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, nil))
	body := `{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"r1"},"mediaType":"text/markdown","text":` + quoteJSON(guide) + `}}`
	res, err := ingest(t, s, body)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.Find(t.Context(), principal("alice", "docs"), &SearchRequest{Corpus: "docs", Query: "make heading call intro", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	got := map[string]string{}
	for _, h := range r.Hits {
		l := h.Source.Location
		got[h.Text] = l.Section + ":" + itoa(l.StartLine) + "-" + itoa(l.EndLine)
	}
	want := map[string]string{
		"Intro line": ":1-1",
		"# Install\nRun make.\n```\n# not a heading\n```\nDone.": "Install:3-8",
		"Usage\n=====\nCall it.":                                 "Usage:10-12",
	}
	if len(got) != len(want) {
		t.Fatalf("chunks %v", got)
	}
	for text, loc := range want {
		if got[text] != loc {
			t.Errorf("chunk %q at %q, want %q", text, got[text], loc)
		}
	}
	m := res.Ingestion
	sum := sha256.Sum256([]byte(guide))
	if res.Status != "indexed" || m.Format != "markdown" || m.Extractor.ID != "markdown-sections" || m.InputSHA256 != hex.EncodeToString(sum[:]) ||
		m.InputBytes != len(guide) || m.ExtractedTextBytes != len(strings.ReplaceAll(guide, "\r\n", "\n")) || m.Chunks != 3 || m.Chunker.MaxBytes != DefaultChunkBytes {
		t.Errorf("manifest %+v", m)
	}
	// The chunk id recipe, computed independently.
	loc := json.RawMessage(`{"section":"Usage","startLine":10,"endLine":12}`)
	raw, _ := json.Marshal([]any{"guide", loc, "Usage\n=====\nCall it.", 2})
	idSum := sha256.Sum256(raw)
	found := false
	for _, h := range r.Hits {
		found = found || h.ChunkID == "p-"+hex.EncodeToString(idSum[:])
	}
	if !found {
		t.Error("no chunk has the recipe's id")
	}
	if again, err := ingest(t, s, body); err != nil || again.Status != "unchanged" || again.DocumentSHA256 != res.DocumentSHA256 {
		t.Errorf("re-ingest: %+v %v", again, err)
	}
	_, err = ingest(t, s, strings.Replace(body, "Call it.", "Call it twice.", 1))
	wantCode(t, "changed text, same revision", err, CodeSourceConflict)
	_, err = ingest(t, s, strings.Replace(body, `"document"`, `"chunking":{"maxBytes":128},"document"`, 1))
	wantCode(t, "changed chunking, same revision", err, CodeSourceConflict)
}

func itoa(n int) string         { b, _ := json.Marshal(n); return string(b) }
func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestIngestEmail: one segment per message, each chunk with its thread
// and message, empty messages counted, the digest over {threadId, messages}.
func TestIngestEmail(t *testing.T) {
	s := open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, nil))
	res, err := ingest(t, s, `{"corpus":"docs","document":{"type":"email","source":{"id":"thread-1","revision":"r1"},"threadId":"t-1","messages":[`+
		`{"id":"m-1","text":"Can we ship Friday?"},{"id":"m-2","text":"  "},{"id":"m-3","text":"Yes, after the battery test.\nThanks"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Ingestion; m.Format != "email" || m.Messages == nil || m.Messages.Total != 3 || m.Messages.Empty != 1 || m.Chunks != 2 {
		t.Fatalf("manifest %+v", res.Ingestion)
	}
	r, _ := s.Find(t.Context(), principal("alice", "docs"), &SearchRequest{Corpus: "docs", Query: "battery ship", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	for _, h := range r.Hits {
		l := h.Source.Location
		if l.ThreadID != "t-1" || (l.MessageID != "m-1" && l.MessageID != "m-3") || l.StartLine != 1 || l.DocumentID != "thread-1" {
			t.Errorf("hit %q at %+v", h.Text, l)
		}
	}
	// inputSha256 is over the JSON of {threadId, messages} as JavaScript
	// writes it, with no HTML escaping: computed here from the literal.
	res, err = ingest(t, s, `{"corpus":"docs","document":{"type":"email","source":{"id":"html","revision":"r1"},"threadId":"t","messages":[{"id":"a","text":"<b> & \"c\""}]}}`)
	if want := sha256.Sum256([]byte(`{"threadId":"t","messages":[{"id":"a","text":"<b> & \"c\""}]}`)); err != nil || res.Ingestion.InputSHA256 != hex.EncodeToString(want[:]) {
		t.Errorf("inputSha256 of a thread with < > &: %+v %v", res, err)
	}
	_, err = ingest(t, s, `{"corpus":"docs","document":{"type":"email","source":{"id":"e","revision":"r1"},"threadId":"t","messages":[{"id":"m","text":" "}]}}`)
	wantCode(t, "only empty messages", err, CodeEmptyDocument)
}

// TestIngestErrors: every refusal with its code.
func TestIngestErrors(t *testing.T) {
	s := open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, func(c *Corpus) { c.Scope = ScopeSubject }))
	text := func(tx string) string {
		return `{"corpus":"docs","document":{"type":"text","source":{"id":"d","revision":"r1"},"mediaType":"text/plain","text":` + quoteJSON(tx) + `}}`
	}
	for _, c := range []struct {
		body string
		code protocol.Code
	}{
		{text("a\x00b"), CodeInvalidDocument},
		{text("\n \n"), CodeEmptyDocument},
		{text(strings.Repeat("x", MaxTextUnits+1)), CodeInvalidIngestion},
		{`{"corpus":"docs","document":{"type":"pdf","source":{"id":"d","revision":"r1"},"mediaType":"application/pdf","data":"JVBERg=="}}`, CodePDFExtractorRequired},
		{`{"corpus":"docs","document":{"type":"reference","id":"d","revision":"r1","mediaType":"text/plain"}}`, CodeContextUnavailable},
		{`{"corpus":"docs","document":{"type":"html","source":{"id":"d","revision":"r1"}}}`, CodeInvalidIngestion},
		{`{"corpus":"docs","document":{"type":"text","source":{"id":"d","revision":"r1"},"mediaType":"text/html","text":"x"}}`, CodeInvalidIngestion},
		{`{"corpus":"docs","chunking":{"maxBytes":127},"document":{"type":"text","source":{"id":"d","revision":"r1"},"mediaType":"text/plain","text":"x"}}`, CodeInvalidIngestion},
		{`{"corpus":"docs","document":{"type":"text","source":{"id":"d","revision":"r1"},"mediaType":"text/plain","text":"x"},"extra":true}`, CodeInvalidIngestion},
		{text(strings.Repeat("line of text\n", 257*2048/13)), CodeDocumentLimit},
	} {
		_, err := ingest(t, s, c.body)
		wantCode(t, c.body[:min(len(c.body), 100)], err, c.code)
	}
	// Another subject's source in a subject-scoped corpus is not there,
	// before anything is parsed.
	if _, err := ingest(t, s, text("mine")); err != nil {
		t.Fatal(err)
	}
	req, _ := DecodeIngest([]byte(text("a\x00b")))
	_, err := s.IngestDocument(t.Context(), principal("bob", "docs"), req)
	wantCode(t, "bob ingests alice's source", err, CodeContextNotFound)
}

// FuzzChunk: whatever the text, chunks fit maxBytes, are valid UTF-8,
// stay within their lines, and ids are unique.
func FuzzChunk(f *testing.F) {
	f.Add(guide, 128)
	f.Add(strings.Repeat("é", 300)+"\nx", 128)
	f.Add("# a\n===\n---\n~~~\n# b\n~~~\n", 200)
	f.Fuzz(func(t *testing.T, text string, maxBytes int) {
		if !utf8.ValidString(text) || maxBytes < 128 || maxBytes > 4096 || len(text) > 20000 {
			t.Skip()
		}
		text = normaliseLines(text)
		lines := strings.Split(text, "\n")
		chunks, err := chunkSegments("s", markdownSections(text), maxBytes, 0)
		if err != nil {
			return // DOCUMENT_LIMIT
		}
		seen := map[string]bool{}
		for _, c := range chunks {
			l := c.Location
			if len(c.Text) > maxBytes || !utf8.ValidString(c.Text) || seen[c.ID] || l.StartLine < 1 || l.EndLine < l.StartLine || l.EndLine > len(lines) {
				t.Fatalf("chunk %+v (max %d, %d lines)", c, maxBytes, len(lines))
			}
			seen[c.ID] = true
			if span := strings.Join(lines[l.StartLine-1:l.EndLine], "\n"); !strings.Contains(span, c.Text) {
				t.Fatalf("chunk %q is not in lines %d-%d", c.Text, l.StartLine, l.EndLine)
			}
		}
	})
}

// stalledEmbedder never answers on its own: its first call waits for the
// call's context, so only the ingestion's idle timer can end it.
type stalledEmbedder struct{ calls atomic.Int64 }

func (e *stalledEmbedder) Embed(ctx context.Context, _ string, _ []string) ([][]float32, *abi.Usage, error) {
	e.calls.Add(1)
	<-ctx.Done()
	return nil, nil, protocol.Wrap(protocol.CodeCancelled, ctx.Err())
}

// TestIngestIdleTimeout: idleTimeoutMs (§6.5) ends an ingestion whose
// embedding makes no progress with IDLE_TIMEOUT (504), the stored
// revision untouched; idleTimeoutMs 0 and a generous one are no limit, and
// the schema bounds it.
func TestIngestIdleTimeout(t *testing.T) {
	body := func(rev string, ms int) string {
		return `{"corpus":"docs","idleTimeoutMs":` + strconv.Itoa(ms) + `,"document":{"type":"text","source":{"id":"d","revision":"` + rev + `"},"mediaType":"text/plain","text":"The cell lasted 812 hours."}}`
	}
	good := open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, nil))
	for _, ms := range []int{0, 600_000} {
		if res, err := ingest(t, good, body("r1", ms)); err != nil || res.Status != "indexed" {
			t.Errorf("idleTimeoutMs %d: %+v %v", ms, res, err)
		}
		good = open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, nil))
	}
	for _, bad := range []string{`-1`, `2147483648`, `1.5`, `"10"`} {
		_, err := ingest(t, good, strings.Replace(body("r1", 0), `"idleTimeoutMs":0`, `"idleTimeoutMs":`+bad, 1))
		wantCode(t, "idleTimeoutMs "+bad, err, CodeInvalidIngestion)
	}

	emb := &stalledEmbedder{}
	kv := durable.NewMemory()
	s := open(t, kv, testCorpus(emb, nil))
	_, err := ingest(t, s, body("r1", 5))
	wantCode(t, "a stalled embedding", err, protocol.CodeIdleTimeout)
	if protocol.HTTPStatus(protocol.CodeOf(err)) != 504 {
		t.Errorf("IDLE_TIMEOUT as %v", err)
	}
	if emb.calls.Load() != 1 {
		t.Errorf("%d embedding calls, want 1", emb.calls.Load())
	}
	c := s.corpora["docs"]
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.docs) != 0 || c.mat.rows() != 0 {
		t.Errorf("after the timeout %d documents, %d rows are stored", len(c.docs), c.mat.rows())
	}
}
