package e2e_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-pdf/fpdf"
)

// pdfOf writes a PDF with one page per entry (lines per page), generated
// here so that nothing binary is committed; password non-empty encrypts it.
func pdfOf(t *testing.T, password string, pages ...[]string) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	if password != "" {
		p.SetProtection(fpdf.CnProtectPrint, password, password+"-owner")
	}
	p.SetFont("Helvetica", "", 11)
	for _, lines := range pages {
		p.AddPage()
		for _, ln := range lines {
			p.Cell(0, 6, ln)
			p.Ln(6)
		}
	}
	var b bytes.Buffer
	if err := p.Output(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRetrievalPDFEndToEnd: the real binary with [retrieval] pdf = true
// advertises all four retrieval features; `adhost ingest` sends a
// generated three-page PDF by its content (the file is not named .pdf),
// another comes over HTTP, and every hit of a search names its source,
// the revision it was ingested under and the page its text is on. An
// encrypted, a malformed and a truncated PDF beside them get their codes
// and the host goes on serving.
func TestRetrievalPDFEndToEnd(t *testing.T) {
	t.Parallel()
	s := retrievalSite(t, "hash-ngram-256", 256)
	appendSiteConfig(t, s, "[retrieval]\npdf = true\npdf_max_pages = 5\n")
	srv := startServer(t, s)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, f := range []string{"scoped-retrieval", "retrieval-indexing", "document-ingestion", "pdf-ingestion"} {
		if !strings.Contains(string(b), `"`+f+`"`) {
			t.Errorf("feature %s missing: %s", f, b)
		}
	}

	report := pdfOf(t, "",
		[]string{"Battery report, page one.", "The cell lasted 812 hours."},
		[]string{"Charging took two hours.", "Room temperature throughout."},
		[]string{"Appendix: the battery was model Z-12."})
	path := filepath.Join(s.dir, "report.bin")
	os.WriteFile(path, report, 0o600)
	tok := filepath.Join(s.dir, "data", "dev.token")
	code, stdout, stderr := adhost(t, "ingest", "--config", s.config, "--url", srv.URL, "--token-file", tok, "--corpus", "docs", path)
	if code != 0 || !strings.Contains(stdout, `"status":"indexed"`) {
		t.Fatalf("adhost ingest: %d %s %s", code, stdout, stderr)
	}
	var rec struct {
		Revision  string
		Ingestion struct {
			Format      string
			Extractor   struct{ ID, Version string }
			Pages       struct{ Total int }
			InputSha256 string
		}
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &rec); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(report)
	if rec.Ingestion.Format != "pdf" || rec.Ingestion.Pages.Total != 3 || rec.Ingestion.Extractor.ID != "pdfium-text" ||
		rec.Ingestion.InputSha256 != hex.EncodeToString(sum[:]) || rec.Revision != "sha256-"+hex.EncodeToString(sum[:]) {
		t.Errorf("receipt %s", stdout)
	}

	memo := pdfOf(t, "", []string{"Memo: battery recall for model Z-12."}, []string{"Signed, the lab."})
	ingest := func(id string, data []byte) (int, string) {
		return retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", fmt.Sprintf(
			`{"corpus":"docs","document":{"type":"pdf","source":{"id":%q,"revision":"r1"},"mediaType":"application/pdf","data":%q}}`,
			id, base64.StdEncoding.EncodeToString(data)))
	}
	if st, body := ingest("memo", memo); st != 200 {
		t.Fatalf("ingest memo: %d %s", st, body)
	}
	for _, c := range []struct {
		id   string
		data []byte
		st   int
		code string
	}{
		{"locked", pdfOf(t, "secret", []string{"hidden"}), 400, "PDF_ENCRYPTED"},
		{"junk", []byte("%PDF-1.7\nnot really"), 400, "INVALID_DOCUMENT"},
		{"cut", report[:len(report)/3], 400, "INVALID_DOCUMENT"},
		{"blank-page", pdfOf(t, "", []string{"text"}, []string{}), 400, "OCR_REQUIRED"},
		{"long", pdfOf(t, "", []string{"1"}, []string{"2"}, []string{"3"}, []string{"4"}, []string{"5"}, []string{"6"}), 400, "DOCUMENT_LIMIT"},
	} {
		st, body := ingest(c.id, c.data)
		if st != c.st || !strings.Contains(body, `"`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.id, st, body, c.st, c.code)
		}
	}

	st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery 812 hours model Z-12 charging","limit":16}`)
	var r struct {
		Hits []struct {
			Text   string
			Source struct {
				ID, Revision string
				Location     struct {
					DocumentID               string
					Page, StartLine, EndLine int
				}
			}
		}
	}
	if st != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("search: %d %s", st, body)
	}
	want := map[string]struct {
		id, rev string
		page    int
	}{
		"The cell lasted 812 hours":      {"report.bin", rec.Revision, 1},
		"Charging took two hours":        {"report.bin", rec.Revision, 2},
		"the battery was model Z-12":     {"report.bin", rec.Revision, 3},
		"battery recall for model Z-12.": {"memo", "r1", 1},
	}
	found := map[string]bool{}
	for _, h := range r.Hits {
		l := h.Source.Location
		if l.Page < 1 || l.StartLine < 1 || l.EndLine < l.StartLine || l.DocumentID != h.Source.ID {
			t.Errorf("hit without page provenance: %+v", h)
		}
		for frag, w := range want {
			if strings.Contains(h.Text, frag) {
				found[frag] = true
				if h.Source.ID != w.id || h.Source.Revision != w.rev || l.Page != w.page {
					t.Errorf("%q from %s@%s page %d, want %s@%s page %d", frag, h.Source.ID, h.Source.Revision, l.Page, w.id, w.rev, w.page)
				}
			}
		}
	}
	for frag := range want {
		if !found[frag] {
			t.Errorf("no hit has %q: %s", frag, body)
		}
	}
}
