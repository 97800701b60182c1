package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIIngestSearch: adhost ingest prints a receipt per file (and
// "unchanged" the second time), adhost search the passages with source,
// revision and location; a missing file fails that file only.
func TestCLIIngestSearch(t *testing.T) {
	e := newRetrEnv(t, false)
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte(retrAlice), 0o600)
	md := filepath.Join(dir, "guide notes.md")
	os.WriteFile(md, []byte("# Battery\nThe cell lasted 812 hours.\n"), 0o600)
	args := []string{"ingest", "--url", e.url, "--token-file", tok, "--corpus", "docs", md}
	code, stdout, stderr := cliTestRun(t, args...)
	if code != cliExitOK || !strings.Contains(stdout, `"sourceId":"guide-notes.md"`) || !strings.Contains(stdout, `"status":"indexed"`) || !strings.Contains(stderr, "[1/1]") {
		t.Fatalf("ingest: %d %q %q", code, stdout, stderr)
	}
	if code, stdout, _ = cliTestRun(t, args...); code != cliExitOK || !strings.Contains(stdout, `"status":"unchanged"`) {
		t.Errorf("ingest again: %d %q", code, stdout)
	}
	code, stdout, stderr = cliTestRun(t, "ingest", "--url", e.url, "--token-file", tok, "--corpus", "docs", filepath.Join(dir, "missing.txt"), md)
	if code != cliExitFail || strings.Count(stdout, "\n") != 1 || !strings.Contains(stderr, "missing.txt") {
		t.Errorf("ingest with a missing file: %d %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = cliTestRun(t, "search", "--url", e.url, "--token-file", tok, "--corpus", "docs", "battery hours")
	if code != cliExitOK || !strings.Contains(stdout, "guide-notes.md@sha256-") || !strings.Contains(stdout, `section "Battery", lines 1-2`) || !strings.Contains(stdout, "812 hours") {
		t.Errorf("search: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr = cliTestRun(t, "search", "--url", e.url, "--token-file", tok, "--corpus", "nope", "x"); code != cliExitFail || !strings.Contains(stderr, "FORBIDDEN") {
		t.Errorf("search a corpus without a grant: %d %q", code, stderr)
	}
}

// TestCLIIngestPDFByContent: a file is sent as a PDF because its content
// starts one, whatever its name (this host has no extractor, so the
// answer names PDF_EXTRACTOR_REQUIRED); a PDF too big for one request
// body is refused before anything is sent, beside a text file that goes.
func TestCLIIngestPDFByContent(t *testing.T) {
	e := newRetrEnv(t, false)
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte(retrAlice), 0o600)
	scan := filepath.Join(dir, "scan.txt")
	os.WriteFile(scan, []byte("%PDF-1.7\n1 0 obj << >> endobj\n"), 0o600)
	big := filepath.Join(dir, "big.pdf")
	os.WriteFile(big, append([]byte("%PDF-1.7\n"), make([]byte, 750_000)...), 0o600)
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("plain words\n"), 0o600)
	code, stdout, stderr := cliTestRun(t, "ingest", "--url", e.url, "--token-file", tok, "--corpus", "docs", scan, big, txt)
	if code != cliExitFail || !strings.Contains(stderr, "PDF_EXTRACTOR_REQUIRED") || !strings.Contains(stderr, "big.pdf: a PDF of 750009 bytes does not fit one request") ||
		strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, `"sourceId":"notes.txt"`) {
		t.Fatalf("ingest: %d %q %q", code, stdout, stderr)
	}
	for in, want := range map[string]bool{"%PDF-1.4": true, "junk\n%PDF-2.0\n": true, "PDF-1.4": false, "": false, strings.Repeat(" ", 1023) + "%PDF-": true, strings.Repeat(" ", 1024) + "%PDF-": false} {
		if got := cliIsPDF([]byte(in)); got != want {
			t.Errorf("cliIsPDF(%.20q…) = %v", in, got)
		}
	}
}
