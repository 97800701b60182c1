// Package pdfium is the sandboxed PDF text extractor of pdf-ingestion
// (wire-extensions §6.5): PDFium compiled to WebAssembly (go-pdfium's
// webassembly mode) run on wazero, so that parsing an untrusted document
// happens inside a guest with no file system, no network, a memory cap and
// a deadline. It implements runtime/retrieval.PDFExtractor.
//
// It lives under runtime/wasm because only that tree runs WebAssembly
// (DESIGN §1); unlike the ABI extensions it runs a foreign module with its
// own imports, not an adhost plugin.
//
// Nothing is compiled until the first PDF: PDFium is about 5.8 MB of
// WebAssembly and takes about five seconds to compile on the 2-core
// machine (about 0.15 s from a warm compilation cache), so a host or test
// that never ingests a PDF pays nothing.
package pdfium

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	gopdfium "github.com/klippa-app/go-pdfium"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
	"adhost/runtime/wasm"
)

// ID and Version name the extractor in ingestion manifests. The version
// is the go-pdfium release (which fixes the bundled PDFium build): a new
// one may extract different text, so re-ingesting a revision under it is
// SOURCE_CONFLICT, as §6.5 step 4 asks for a changed extractor version.
const (
	ID      = "pdfium-text"
	Version = "go-pdfium-1.21.4"
)

// Defaults of Options.
const (
	DefaultWorkers   = 2
	DefaultMemoryMiB = 256
	DefaultTimeout   = 30 * time.Second
	MaxWorkers       = 16
	MaxMemoryMiB     = 2048
)

// Codes of §6.6 runtime/retrieval does not name itself:
// PDF_EXTRACTOR_UNAVAILABLE (502) is PDFium failing to compile or
// instantiate; PDF_PERMISSIONS (400) a document whose permissions forbid
// extracting its text.
const (
	CodeExtractorUnavailable protocol.Code = "PDF_EXTRACTOR_UNAVAILABLE"
	CodePermissions          protocol.Code = "PDF_PERMISSIONS"
)

// Options configure New. Zero members take the defaults.
type Options struct {
	// Workers bounds the PDFium instances alive at once (each is a
	// WebAssembly instance with up to MemoryMiB of memory); more documents
	// wait for one, or for their context.
	Workers int
	// MemoryMiB caps each instance's linear memory. A document needing
	// more fails with PDF_EXTRACTION_FAILED; the host's memory is safe.
	MemoryMiB int
	// Timeout bounds one document's extraction, whatever the caller's
	// context says: a document that makes PDFium loop is stopped then.
	Timeout time.Duration
	// CacheDir is a compilation cache directory, created private (0700);
	// empty compiles in memory on every start.
	CacheDir string
	// Logger hears when PDFium was compiled and how long it took (the
	// first PDF waits for it); nil: silent.
	Logger *slog.Logger
}

// Extractor is the PDFium extractor. Its zero value is not usable; make
// one with New and Close it when done.
type Extractor struct {
	opts Options
	sem  chan struct{}

	mu     sync.Mutex
	pool   gopdfium.Pool
	err    error // the first start's failure, kept: it is deterministic
	closed bool
}

// New returns an extractor that compiles PDFium on its first document.
func New(opts Options) (*Extractor, error) {
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = DefaultMemoryMiB
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	switch {
	case opts.Workers < 1 || opts.Workers > MaxWorkers:
		return nil, fmt.Errorf("pdfium: workers %d out of range 1..%d", opts.Workers, MaxWorkers)
	case opts.MemoryMiB < 16 || opts.MemoryMiB > MaxMemoryMiB:
		return nil, fmt.Errorf("pdfium: memory %d MiB out of range 16..%d", opts.MemoryMiB, MaxMemoryMiB)
	case opts.Timeout < 0:
		return nil, fmt.Errorf("pdfium: negative timeout")
	}
	return &Extractor{opts: opts, sem: make(chan struct{}, opts.Workers)}, nil
}

// Extractor names the extractor (retrieval.PDFExtractor).
func (e *Extractor) Extractor() retrieval.Component {
	return retrieval.Component{ID: ID, Version: Version}
}

// Started reports whether PDFium has been compiled (a document came).
func (e *Extractor) Started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pool != nil
}

// Close releases the compiled module and every instance. Documents in
// progress fail.
func (e *Extractor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.pool == nil {
		return nil
	}
	p := e.pool
	e.pool = nil
	return p.Close()
}

// start compiles PDFium once. The runtime has no file system mounted (the
// go-pdfium default mounts "/"), discards the guest's output, caps memory
// and closes a module whose context ends, which is how a stuck call is
// stopped.
func (e *Extractor) start() (gopdfium.Pool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("pdfium: closed")
	}
	if e.pool != nil || e.err != nil {
		return e.pool, e.err
	}
	rc := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(e.opts.MemoryMiB) * 16) // 64 KiB pages
	if e.opts.CacheDir != "" {
		if err := wasm.PrivateCacheDir(e.opts.CacheDir); err != nil {
			e.err = fmt.Errorf("pdfium: %w", err)
			return nil, e.err
		}
		cc, err := wazero.NewCompilationCacheWithDir(e.opts.CacheDir)
		if err != nil {
			e.err = fmt.Errorf("pdfium: compilation cache: %w", err)
			return nil, e.err
		}
		rc = rc.WithCompilationCache(cc)
	}
	began := time.Now()
	p, err := webassembly.Init(webassembly.Config{
		MaxTotal:      e.opts.Workers,
		FSConfig:      wazero.NewFSConfig(),
		Stdout:        io.Discard,
		Stderr:        io.Discard,
		RuntimeConfig: rc,
		// A fresh instance per document: what one hostile file did to
		// PDFium's heap never meets the next (an instance costs ~3 ms).
		ReuseWorkers: false,
	})
	if err != nil {
		e.err = fmt.Errorf("pdfium: %w", err)
		if e.opts.Logger != nil {
			e.opts.Logger.Error("pdfium did not compile: pdf-ingestion answers PDF_EXTRACTOR_UNAVAILABLE", "err", err)
		}
		return nil, e.err
	}
	e.pool = p
	if e.opts.Logger != nil {
		e.opts.Logger.Info("pdfium compiled for pdf-ingestion", "took", time.Since(began).Round(time.Millisecond), "compilation_cache", e.opts.CacheDir != "")
	}
	return p, nil
}

// publicErr is a retrieval error with a fixed public message; cause stays
// private (logs at debug, never the client).
func publicErr(code protocol.Code, msg string, cause error) *protocol.Error {
	e := protocol.New(code)
	e.Message = msg
	e.Err = cause
	return e
}

var (
	errMalformed = "The document is not a readable PDF."
	errEncrypted = "The PDF is encrypted."
	errFailed    = "The PDF could not be extracted."
	errPages     = "The PDF has more pages than this host ingests."
	errText      = "The PDF's text exceeds the ingestion limit."
	errNoStart   = "The PDF extractor is not available on this host."
	errPerms     = "The PDF's permissions do not allow extracting its text."
)

// Pages returns the plain text of every page of data, in page order, with
// LF line ends, no NUL and valid UTF-8 (PDFium's own output uses CRLF and
// may carry NUL for unmapped glyphs).
//
// Errors (*protocol.Error):
//   - a file PDFium cannot parse (not a PDF, truncated, broken xref it
//     cannot repair): INVALID_DOCUMENT, a client error (400) — the input is
//     at fault, not the extractor;
//   - a password, or a security handler PDFium does not implement:
//     PDF_ENCRYPTED (an empty user password opens as usual);
//   - an encrypted document (opened with its empty user password) whose
//     user permissions withhold "copy or extract text" (bit 5 of /P):
//     PDF_PERMISSIONS — the author's restriction is honoured, as Poppler's
//     pdftotext honours it, rather than read past;
//   - more than maxPages pages, or more than 1 MiB of text in all:
//     DOCUMENT_LIMIT, decided before (pages) or while (text) extracting;
//   - the guest trapped, ran out of its memory cap or its time:
//     PDF_EXTRACTION_FAILED;
//   - PDFium could not be compiled: PDF_EXTRACTOR_UNAVAILABLE;
//   - ctx ended first: CANCELLED, wrapping ctx's error.
func (e *Extractor) Pages(ctx context.Context, data []byte, maxPages int) ([]string, error) {
	if len(data) == 0 {
		return nil, publicErr(retrieval.CodeInvalidDocument, errMalformed, errors.New("empty PDF"))
	}
	pool, err := e.start()
	if err != nil {
		return nil, publicErr(CodeExtractorUnavailable, errNoStart, err)
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, protocol.Wrap(protocol.CodeCancelled, ctx.Err())
	}
	defer func() { <-e.sem }()
	parent := ctx
	if e.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opts.Timeout)
		defer cancel()
	}
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, e.ctxErr(parent, ctx)
		}
		return nil, publicErr(CodeExtractorUnavailable, errNoStart, err)
	}
	type result struct {
		pages []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			// go-pdfium's Go side reads guest memory with unsafe
			// pointers; a hostile document must not take the host down.
			if p := recover(); p != nil {
				r = result{err: publicErr(retrieval.CodePDFExtractionFailed, errFailed, fmt.Errorf("panic: %v", p))}
			}
			done <- r
		}()
		r.pages, r.err = extract(ctx, inst, data, maxPages)
	}()
	select {
	case r := <-done:
		_ = inst.Close()
		return r.pages, r.err
	case <-ctx.Done():
		// Kill cancels the worker's context, which closes its module
		// (WithCloseOnContextDone): the guest stops at its next
		// function call or loop back-edge, and the goroutine returns.
		_ = inst.Kill()
		<-done
		return nil, e.ctxErr(parent, ctx)
	}
}

// ctxErr is CANCELLED carrying the caller's context error when the caller
// gave up (parent done), else the extractor's own deadline as
// PDF_EXTRACTION_FAILED.
func (e *Extractor) ctxErr(parent, ctx context.Context) error {
	if err := parent.Err(); err != nil {
		return protocol.Wrap(protocol.CodeCancelled, err)
	}
	if ctx.Err() != nil {
		return publicErr(retrieval.CodePDFExtractionFailed, errFailed, fmt.Errorf("extraction exceeded %v", e.opts.Timeout))
	}
	return nil
}

// testHookPage, when set, runs before each page's text is read.
var testHookPage func(ctx context.Context, page int)

func extract(ctx context.Context, inst gopdfium.Pdfium, data []byte, maxPages int) ([]string, error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		return nil, openErr(err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	perms, err := inst.FPDF_GetDocUserPermissions(&requests.FPDF_GetDocUserPermissions{Document: doc.Document})
	if err != nil {
		return nil, publicErr(retrieval.CodePDFExtractionFailed, errFailed, err)
	}
	if perms.DocUserPermissions != 0xffffffff && !perms.CopyOrExtractText {
		return nil, publicErr(CodePermissions, errPerms, fmt.Errorf("permissions %#x", perms.DocUserPermissions))
	}
	n, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return nil, publicErr(retrieval.CodePDFExtractionFailed, errFailed, err)
	}
	if n.PageCount < 1 {
		return nil, publicErr(retrieval.CodeInvalidDocument, errMalformed, errors.New("no pages"))
	}
	if maxPages > 0 && n.PageCount > maxPages {
		return nil, publicErr(retrieval.CodeDocumentLimit, errPages, fmt.Errorf("%d pages, at most %d", n.PageCount, maxPages))
	}
	pages := make([]string, 0, n.PageCount)
	total := 0
	for i := 0; i < n.PageCount; i++ {
		if testHookPage != nil {
			testHookPage(ctx, i+1)
		}
		t, err := inst.GetPageText(&requests.GetPageText{Page: requests.Page{ByIndex: &requests.PageByIndex{Document: doc.Document, Index: i}}})
		if err != nil {
			return nil, publicErr(retrieval.CodePDFExtractionFailed, errFailed, fmt.Errorf("page %d: %w", i+1, err))
		}
		text := cleanText(t.Text)
		total += len(text)
		if total > retrieval.MaxExtractedBytes {
			return nil, publicErr(retrieval.CodeDocumentLimit, errText, fmt.Errorf("more than %d bytes of text by page %d", retrieval.MaxExtractedBytes, i+1))
		}
		pages = append(pages, text)
	}
	return pages, nil
}

// openErr maps FPDF_GetLastError's answer for a document that did not
// open. ErrFormat/ErrFile are the input's fault; a wasm trap or a closed
// module is the extractor's.
func openErr(err error) error {
	switch {
	case errors.Is(err, pdferrors.ErrPassword), errors.Is(err, pdferrors.ErrSecurity):
		return publicErr(retrieval.CodePDFEncrypted, errEncrypted, err)
	case errors.Is(err, pdferrors.ErrFormat), errors.Is(err, pdferrors.ErrFile), errors.Is(err, pdferrors.ErrPage):
		return publicErr(retrieval.CodeInvalidDocument, errMalformed, err)
	}
	return publicErr(retrieval.CodePDFExtractionFailed, errFailed, err)
}

// cleanText turns CRLF and CR into LF, drops NUL and the byte-order and
// soft-hyphen marks PDFium emits, and replaces invalid UTF-8.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case 0, '\uFEFF', '\uFFFE':
			continue
		case '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			r = '\n'
		}
		b.WriteRune(r)
	}
	return b.String()
}
