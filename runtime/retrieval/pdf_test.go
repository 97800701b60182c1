package retrieval

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval/retrievaltest"
)

// fakePDF answers fixed pages (or an error) and records the bound it was
// given; the real extractor is runtime/wasm/pdfium, tested there and end
// to end.
type fakePDF struct {
	pages    []string
	err      error
	maxPages int
	calls    int
}

func (f *fakePDF) Extractor() Component { return Component{ID: "fake-pdf", Version: "7"} }

func (f *fakePDF) Pages(_ context.Context, data []byte, maxPages int) ([]string, error) {
	f.calls++
	f.maxPages = maxPages
	return f.pages, f.err
}

func pdfService(t *testing.T, x PDFExtractor, pages int) *Service {
	t.Helper()
	s, err := Open(context.Background(), durable.NewMemory(), []Corpus{testCorpus(&retrievaltest.Embedder{Dim: 32}, nil)}, Options{PDF: x, PDFPages: pages})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pdfBody(data string) string {
	return `{"corpus":"docs","document":{"type":"pdf","source":{"id":"paper","revision":"r1"},"mediaType":"application/pdf","data":"` + data + `"}}`
}

// TestIngestPDFPages: one segment per page, every chunk located by its
// page and its lines within the page, the manifest naming the extractor
// and the page count, the digest over the decoded bytes.
func TestIngestPDFPages(t *testing.T) {
	x := &fakePDF{pages: []string{"First page line one\r\nline two", "Second page", "Third\npage"}}
	s := pdfService(t, x, 0)
	raw := "%PDF-1.7 pretend"
	res, err := ingest(t, s, pdfBody(base64.StdEncoding.EncodeToString([]byte(raw))))
	if err != nil {
		t.Fatal(err)
	}
	if x.maxPages != DefaultPDFPages {
		t.Errorf("page bound %d, want %d", x.maxPages, DefaultPDFPages)
	}
	m := res.Ingestion
	sum := sha256.Sum256([]byte(raw))
	if m.Format != "pdf" || m.Extractor != (Component{ID: "fake-pdf", Version: "7"}) || m.InputSHA256 != hex.EncodeToString(sum[:]) ||
		m.InputBytes != len(raw) || m.Pages == nil || m.Pages.Total != 3 || len(m.Pages.Empty) != 0 || len(m.Pages.OCR) != 0 || m.Chunks != 3 {
		t.Fatalf("manifest %+v pages %+v", m, m.Pages)
	}
	r, err := s.Find(t.Context(), principal("alice", "docs"), &SearchRequest{Corpus: "docs", Query: "page line", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]int{"First page line one\nline two": {1, 1, 2}, "Second page": {2, 1, 1}, "Third\npage": {3, 1, 2}}
	if len(r.Hits) != len(want) {
		t.Fatalf("%d hits", len(r.Hits))
	}
	for _, h := range r.Hits {
		l := h.Source.Location
		if w, ok := want[h.Text]; !ok || l == nil || [3]int{l.Page, l.StartLine, l.EndLine} != w {
			t.Errorf("hit %q at %+v, want page/lines %v", h.Text, l, w)
		}
	}
	// The same bytes again: unchanged (extraction still runs); another
	// extractor version under the same revision: SOURCE_CONFLICT.
	if res, err := ingest(t, s, pdfBody(base64.StdEncoding.EncodeToString([]byte(raw)))); err != nil || res.Status != "unchanged" {
		t.Fatalf("re-ingest: %+v, %v", res, err)
	}
	if x.calls != 2 {
		t.Errorf("%d extractions, want 2", x.calls)
	}
}

func TestIngestPDFErrors(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7"))
	cases := []struct {
		name  string
		x     PDFExtractor
		body  string
		pages int
		want  protocol.Code
	}{
		{"no extractor", nil, pdfBody(b64), 0, CodePDFExtractorRequired},
		{"not base64", &fakePDF{pages: []string{"x"}}, pdfBody("%%%not-base64"), 0, CodeInvalidIngestion},
		{"over 8 MiB decoded", &fakePDF{pages: []string{"x"}}, pdfBody(base64.StdEncoding.EncodeToString(make([]byte, MaxDocumentBytes+1))), 0, CodeDocumentLimit},
		{"extractor's own code", &fakePDF{err: fail(CodePDFEncrypted)}, pdfBody(b64), 0, CodePDFEncrypted},
		{"no pages returned", &fakePDF{}, pdfBody(b64), 0, CodeInvalidExtraction},
		{"more pages than the bound", &fakePDF{pages: []string{"a", "b", "c"}}, pdfBody(b64), 2, CodeInvalidExtraction},
		{"NUL in page text", &fakePDF{pages: []string{"a\x00b"}}, pdfBody(b64), 0, CodeInvalidExtraction},
		{"an empty page", &fakePDF{pages: []string{"text", "  \n "}}, pdfBody(b64), 0, CodeOCRRequired},
		{"scanned only", &fakePDF{pages: []string{"", ""}}, pdfBody(b64), 0, CodeOCRRequired},
		{"text over 1 MiB", &fakePDF{pages: []string{strings.Repeat("word ", MaxExtractedBytes/5+1)}}, pdfBody(b64), 0, CodeDocumentLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := pdfService(t, c.x, c.pages)
			_, err := ingest(t, s, c.body)
			wantCode(t, c.name, err, c.want)
		})
	}
	// Exactly 8 MiB decoded reaches the extractor.
	x := &fakePDF{pages: []string{"edge"}}
	s := pdfService(t, x, 0)
	if _, err := ingest(t, s, pdfBody(base64.StdEncoding.EncodeToString(make([]byte, MaxDocumentBytes)))); err != nil || x.calls != 1 {
		t.Fatalf("8 MiB: %v, %d calls", err, x.calls)
	}
	// A host bound above 1000 falls back to the default.
	x = &fakePDF{pages: []string{"p"}}
	if _, err := ingest(t, pdfService(t, x, MaxPDFPages+1), pdfBody(b64)); err != nil || x.maxPages != DefaultPDFPages {
		t.Fatalf("bound %d, %v", x.maxPages, err)
	}
}

// TestIngestPDFAllowEmptyPages: with allowEmptyPdfPages a blank page is
// listed in pages.empty and the others are indexed with their own page
// numbers; a document of blank pages still fails.
func TestIngestPDFAllowEmptyPages(t *testing.T) {
	x := &fakePDF{pages: []string{"first", " \n", "third"}}
	s, err := Open(context.Background(), durable.NewMemory(), []Corpus{testCorpus(&retrievaltest.Embedder{Dim: 32}, nil)}, Options{PDF: x, PDFAllowEmptyPages: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ingest(t, s, pdfBody(base64.StdEncoding.EncodeToString([]byte("%PDF-1.7"))))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Ingestion.Pages; p.Total != 3 || len(p.Empty) != 1 || p.Empty[0] != 2 || res.Chunks != 2 {
		t.Fatalf("pages %+v, chunks %d", p, res.Chunks)
	}
	r, _ := s.Find(t.Context(), principal("alice", "docs"), &SearchRequest{Corpus: "docs", Query: "third first", Limit: 16, MaxContextBytes: MaxContextBytes, MinScore: -1})
	for _, h := range r.Hits {
		if want := map[string]int{"first": 1, "third": 3}[h.Text]; h.Source.Location.Page != want {
			t.Errorf("%q on page %d, want %d", h.Text, h.Source.Location.Page, want)
		}
	}
	x.pages = []string{"", " "}
	_, err = ingest(t, s, `{"corpus":"docs","document":{"type":"pdf","source":{"id":"scan","revision":"r1"},"mediaType":"application/pdf","data":"JVBERg=="}}`)
	wantCode(t, "blank pages only", err, CodeOCRRequired)
}
