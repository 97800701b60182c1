package pdfium

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-pdf/fpdf"
	"go.uber.org/goleak"

	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
)

// shared is one extractor for the package's tests: PDFium compiles once
// per process (from a compilation cache kept across runs in the temp
// directory, ~0.15 s warm, ~5 s cold).
var (
	sharedOnce sync.Once
	sharedX    *Extractor
)

func cacheDir() string { return filepath.Join(os.TempDir(), "adhost-pdfium-test-cache") }

func shared(t *testing.T) *Extractor {
	t.Helper()
	sharedOnce.Do(func() {
		x, err := New(Options{Workers: 2, CacheDir: cacheDir()})
		if err != nil {
			t.Fatal(err)
		}
		sharedX = x
	})
	return sharedX
}

// TestMain closes the shared extractor and then checks that nothing of
// PDFium's pool or runtime is left running.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedX != nil {
		sharedX.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left after Close:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// multiPage writes a PDF of the given pages, each a list of lines.
func multiPage(t testing.TB, pages [][]string) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	p.SetFont("Helvetica", "", 11)
	p.SetCompression(true)
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

func code(err error) protocol.Code { return protocol.CodeOf(err) }

func TestPagesInOrder(t *testing.T) {
	x := shared(t)
	data := multiPage(t, [][]string{
		{"Battery lifetime was 812 cycles.", "Measured at 25 C."},
		{"Page two: the anode coating."},
		{"Third page, last line."},
	})
	pages, err := x.Pages(context.Background(), data, 200)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Battery lifetime was 812 cycles.\nMeasured at 25 C.",
		"Page two: the anode coating.",
		"Third page, last line.",
	}
	if len(pages) != len(want) {
		t.Fatalf("%d pages, want %d: %q", len(pages), len(want), pages)
	}
	for i := range want {
		if strings.TrimSpace(pages[i]) != want[i] {
			t.Errorf("page %d = %q, want %q", i+1, pages[i], want[i])
		}
		if strings.ContainsAny(pages[i], "\r\x00") {
			t.Errorf("page %d keeps CR or NUL: %q", i+1, pages[i])
		}
	}
	if c := x.Extractor(); c.ID != ID || c.Version != Version {
		t.Errorf("extractor = %+v", c)
	}
}

// The manifest's extractor version is the go-pdfium release go.mod
// requires: a dependency bump must bump Version (and so SOURCE_CONFLICT a
// re-ingested revision rather than change its text silently).
func TestVersionIsTheRequiredModule(t *testing.T) {
	mod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(mod), "\n") {
		f := strings.Fields(ln)
		if len(f) >= 2 && f[0] == "github.com/klippa-app/go-pdfium" {
			if "go-pdfium-"+strings.TrimPrefix(f[1], "v") != Version {
				t.Fatalf("Version = %q, go.mod requires %s", Version, f[1])
			}
			return
		}
	}
	t.Fatal("go.mod does not require github.com/klippa-app/go-pdfium")
}

// A hostile document beside a normal one: each gets its own stable code,
// nothing panics, and the extractor keeps working afterwards.
func TestHostileDocuments(t *testing.T) {
	x := shared(t)
	good := multiPage(t, [][]string{{"alpha page one"}, {"beta page two"}})
	protected := func(flags byte, user string) []byte {
		p := fpdf.New("P", "mm", "A4", "")
		p.SetProtection(flags, user, "owner-secret")
		p.SetFont("Helvetica", "", 11)
		p.AddPage()
		p.Cell(0, 6, "hidden text")
		var b bytes.Buffer
		if err := p.Output(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	cases := []struct {
		name string
		data []byte
		max  int
		want protocol.Code
	}{
		{"not a PDF", []byte("hello, this is plain text and not a PDF at all"), 200, retrieval.CodeInvalidDocument},
		{"header only", []byte("%PDF-1.7\n"), 200, retrieval.CodeInvalidDocument},
		{"truncated", good[:len(good)/3], 200, retrieval.CodeInvalidDocument},
		{"empty", nil, 200, retrieval.CodeInvalidDocument},
		{"encrypted", protected(fpdf.CnProtectPrint, "user-secret"), 200, retrieval.CodePDFEncrypted},
		{"copying forbidden", protected(fpdf.CnProtectPrint, ""), 200, CodePermissions},
		{"pages over the bound", pagesPDF(1001), 1000, retrieval.CodeDocumentLimit},
		{"lying page count", lyingCountPDF(), 1000, ""},
		{"deeply nested", nestedPDF(200_000), 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pages, err := x.Pages(context.Background(), c.data, c.max)
			if c.want == "" {
				// PDFium repairs or ignores it: any answer but a crash
				// or a hang, and no uncoded error.
				if err != nil && code(err) == protocol.CodeInternalError {
					t.Fatalf("uncoded error %v", err)
				}
				return
			}
			if code(err) != c.want {
				t.Fatalf("err = %v (%s), pages %d, want %s", err, code(err), len(pages), c.want)
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Message == "" || strings.Contains(pe.Message, "pdfium") {
				t.Errorf("public message %q", pe.Message)
			}
		})
	}
	// The pool is fine after all of that.
	pages, err := x.Pages(context.Background(), good, 2)
	if err != nil || len(pages) != 2 || strings.TrimSpace(pages[1]) != "beta page two" {
		t.Fatalf("after hostile documents: %q, %v", pages, err)
	}
	// Encrypted with an empty user password and copying allowed: read.
	if pages, err := x.Pages(context.Background(), protected(fpdf.CnProtectCopy, ""), 2); err != nil || strings.TrimSpace(pages[0]) != "hidden text" {
		t.Fatalf("copy allowed: %q, %v", pages, err)
	}
	// Exactly at the page bound passes.
	if pages, err := x.Pages(context.Background(), pagesPDF(1000), 1000); err != nil || len(pages) != 1000 {
		t.Fatalf("1000 pages at bound 1000: %d, %v", len(pages), err)
	}
}

// A flate bomb (a page's content expanding to 96 MiB) inside a 32 MiB
// instance: PDFium runs out of its own memory, the host does not.
func TestMemoryCap(t *testing.T) {
	x, err := New(Options{Workers: 1, MemoryMiB: 32, CacheDir: cacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	z := spaceBomb(96<<20, "BT /F1 12 Tf 72 712 Td (after the bomb) Tj ET")
	bomb := buildPDF([]string{"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(z), z),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"})
	bp, err := x.Pages(context.Background(), bomb, 10)
	if code(err) != retrieval.CodePDFExtractionFailed {
		t.Fatalf("flate bomb: %d pages, %v (%s), want PDF_EXTRACTION_FAILED", len(bp), err, code(err))
	}
	good := multiPage(t, [][]string{{"still alive"}})
	if pages, err := x.Pages(context.Background(), good, 10); err != nil || strings.TrimSpace(pages[0]) != "still alive" {
		t.Fatalf("after the bomb: %q, %v", pages, err)
	}
}

// A caller that gives up mid-document gets its context's error; the
// instance is killed and the next document gets a fresh one.
func TestCancelMidDocument(t *testing.T) {
	x := shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	testHookPage = func(_ context.Context, page int) {
		if page == 2 {
			cancel()
		}
	}
	defer func() { testHookPage = nil }()
	_, err := x.Pages(ctx, multiPage(t, [][]string{{"one"}, {"two"}, {"three"}}), 10)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	testHookPage = nil
	if pages, err := x.Pages(context.Background(), multiPage(t, [][]string{{"again"}}), 10); err != nil || strings.TrimSpace(pages[0]) != "again" {
		t.Fatalf("after a kill: %q, %v", pages, err)
	}
}

// The extractor's own deadline is PDF_EXTRACTION_FAILED; a caller's
// deadline that passes first is the caller's context error.
func TestOwnDeadline(t *testing.T) {
	x, err := New(Options{Workers: 1, Timeout: 1, CacheDir: cacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	_, err = x.Pages(context.Background(), multiPage(t, [][]string{{"late"}}), 10)
	if code(err) != retrieval.CodePDFExtractionFailed {
		t.Fatalf("err = %v (%s), want PDF_EXTRACTION_FAILED", err, code(err))
	}
	// The caller's own deadline, passed first, stays the caller's error.
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	if _, err := shared(t).Pages(ctx, multiPage(t, [][]string{{"late"}}), 10); !errors.Is(err, context.DeadlineExceeded) || code(err) == retrieval.CodePDFExtractionFailed {
		t.Fatalf("caller's deadline: %v", err)
	}
}

func TestLazyAndBounds(t *testing.T) {
	x, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x.Started() {
		t.Fatal("compiled before the first document")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Pages(context.Background(), []byte("%PDF-1.4"), 1); code(err) != CodeExtractorUnavailable {
		t.Fatalf("after Close: %v", err)
	}
	for _, o := range []Options{{Workers: MaxWorkers + 1}, {Workers: -1}, {MemoryMiB: 8}, {MemoryMiB: MaxMemoryMiB + 1}, {Timeout: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	for _, o := range []Options{{Workers: MaxWorkers}, {Workers: 1}, {MemoryMiB: 16}, {MemoryMiB: MaxMemoryMiB}} {
		if _, err := New(o); err != nil {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
}

func TestCacheDirMustBePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	x, _ := New(Options{CacheDir: dir})
	defer x.Close()
	if _, err := x.Pages(context.Background(), []byte("%PDF-1.4"), 1); code(err) != CodeExtractorUnavailable {
		t.Fatalf("world-writable cache: %v", err)
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"a\r\nb\rc\nd": "a\nb\nc\nd",
		"x\x00y\uFEFF": "xy",
		"bad\xffbyte":  "bad\uFFFDbyte",
		"":             "",
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// buildPDF writes objects 1..n with a correct cross-reference table.
func buildPDF(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, x)
	return b.Bytes()
}

// pagesPDF has n one-word pages.
func pagesPDF(n int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		"<< /Length 36 >>\nstream\nBT /F1 12 Tf 72 712 Td (word) Tj ET\nendstream"}
	kids := make([]string, n)
	for i := 0; i < n; i++ {
		kids[i] = fmt.Sprintf("%d 0 R", len(objs)+1)
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> >> >>")
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n)
	return buildPDF(objs)
}

// lyingCountPDF claims 2^31-1 pages and has one.
func lyingCountPDF() []byte {
	return buildPDF([]string{"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 3 0 R 2 0 R] /Count 2147483647 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"})
}

// nestedPDF's catalog carries an array nested depth deep.
func nestedPDF(depth int) []byte {
	return buildPDF([]string{"<< /Type /Catalog /Pages 2 0 R /Deep " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + " >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		"<< /Length " + fmt.Sprint(depth*2) + " >>\nstream\n" + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\nendstream"})
}

// spaceBomb is a zlib stream of n spaces then tail, written by hand (one
// fixed-Huffman block of length-258 copies: 13 bits per 258 bytes) so that
// the test need not run a 96 MiB compression under the race detector.
func spaceBomb(n int, tail string) []byte {
	var out []byte
	var acc uint64
	var nbits uint
	put := func(v uint64, k uint) { // LSB first
		acc |= v << nbits
		nbits += k
		for nbits >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			nbits -= 8
		}
	}
	code := func(c uint64, k uint) { // Huffman codes go MSB first
		var r uint64
		for i := uint(0); i < k; i++ {
			r = r<<1 | (c>>i)&1
		}
		put(r, k)
	}
	lit := func(b byte) { code(0x30+uint64(b), 8) } // bytes 0..143
	put(1, 1)                                       // BFINAL
	put(1, 2)                                       // fixed Huffman
	lit(' ')
	left := n - 1
	for left >= 258 {
		code(0xC5, 8) // length code 285: 258 bytes
		code(0, 5)    // distance code 0: 1 back
		left -= 258
	}
	for ; left > 0; left-- {
		lit(' ')
	}
	for i := 0; i < len(tail); i++ {
		lit(tail[i])
	}
	code(0, 7) // end of block
	if nbits > 0 {
		out = append(out, byte(acc))
	}
	// Adler-32 of the spaces in closed form, then of the tail.
	const mod = 65521
	a := (1 + 32*uint64(n)) % mod
	b := (uint64(n) + 32*(uint64(n)*uint64(n+1)/2)) % mod
	for i := 0; i < len(tail); i++ {
		a = (a + uint64(tail[i])) % mod
		b = (b + a) % mod
	}
	z := []byte{0x78, 0x01}
	z = append(z, out...)
	return append(z, byte(b>>8), byte(b), byte(a>>8), byte(a))
}

func TestSpaceBomb(t *testing.T) {
	for _, n := range []int{1, 258, 259, 1000, 70_000} {
		r, err := zlib.NewReader(bytes.NewReader(spaceBomb(n, "(x) Tj")))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != strings.Repeat(" ", n)+"(x) Tj" {
			t.Fatalf("n=%d: %d bytes, %v", n, len(got), err)
		}
	}
}

// BenchmarkPages: one 50-page generated document per op through a warm
// extractor (a fresh PDFium instance per document, as in production),
// reported as pages per second.
func BenchmarkPages(b *testing.B) {
	x, err := New(Options{Workers: 1, CacheDir: cacheDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	var pages [][]string
	for i := range 50 {
		pages = append(pages, []string{fmt.Sprintf("Page %d of the benchmark report.", i+1), "Battery lifetime, charging cycles and temperature.", "A third line of ordinary text."})
	}
	data := multiPage(b, pages)
	if _, err := x.Pages(b.Context(), data, 200); err != nil { // compile outside the timing
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		got, err := x.Pages(b.Context(), data, 200)
		if err != nil {
			b.Fatal(err)
		}
		n += len(got)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pages/s")
}

// TestConcurrentDocuments: more documents at once than instances, normal
// and hostile interleaved: each waits for an instance, gets its own
// answer, and none sees another's pages.
func TestConcurrentDocuments(t *testing.T) {
	x := shared(t)
	type job struct {
		data []byte
		want string // first page's text, or a code
	}
	var jobs []job
	for i := range 6 {
		if i%3 == 2 {
			jobs = append(jobs, job{[]byte("%PDF-1.7\nbroken " + fmt.Sprint(i)), string(retrieval.CodeInvalidDocument)})
			continue
		}
		text := fmt.Sprintf("document number %d", i)
		jobs = append(jobs, job{multiPage(t, [][]string{{text}, {"second page"}}), text})
	}
	var wg sync.WaitGroup
	errs := make([]string, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages, err := x.Pages(context.Background(), j.data, 10)
			got := string(code(err))
			if err == nil {
				got = strings.TrimSpace(pages[0])
			}
			if got != j.want {
				errs[i] = fmt.Sprintf("job %d: %q, want %q", i, got, j.want)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
}
