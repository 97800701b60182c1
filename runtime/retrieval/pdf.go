package retrieval

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"adhost/runtime/protocol"
)

// PDFExtractor extracts the text of a PDF's pages inside a sandbox
// (pdf-ingestion). Errors are *protocol.Error with the PDF codes of §6.6.
type PDFExtractor interface {
	Extractor() Component
	Pages(ctx context.Context, data []byte, maxPages int) ([]string, error)
}

// MaxPDFPages is the page bound of §6.5 (default and maximum).
const (
	DefaultPDFPages = 200
	MaxPDFPages     = 1000
)

// pdfSegments decodes and extracts a pdf document: one segment per page
// that has text, located by its 1-based page number. The input digest
// covers the decoded bytes (§6.5 "over the original bytes").
//
// Pages without text are OCR_REQUIRED (this host has no OCR adapter: a
// client that sent a scanned page would rather hear what to do than find
// it silently missing, §6.5 step 2), unless Options.PDFAllowEmptyPages
// (allowEmptyPdfPages) lists them in pages.empty instead. A document
// without any text is OCR_REQUIRED either way: §6.5 has it always fail,
// and of its codes OCR_REQUIRED is the one that says why (a scan), where
// EMPTY_DOCUMENT would suggest the file itself was empty. The original-size bound is checked on the decoded bytes
// before PDFium sees them.
func (s *Service) pdfSegments(ctx context.Context, d *document, m *Manifest) ([]segment, []byte, error) {
	if s.opts.PDF == nil {
		return nil, nil, fail(CodePDFExtractorRequired)
	}
	data, err := base64.StdEncoding.DecodeString(d.Data)
	if err != nil {
		return nil, nil, shapeErr(CodeInvalidIngestion, "document.data is not base64")
	}
	if len(data) > MaxDocumentBytes {
		return nil, nil, fail(CodeDocumentLimit)
	}
	maxPages := s.opts.PDFPages
	if maxPages <= 0 || maxPages > MaxPDFPages {
		maxPages = DefaultPDFPages
	}
	pages, err := s.opts.PDF.Pages(ctx, data, maxPages)
	if err != nil {
		return nil, nil, err
	}
	if len(pages) == 0 || len(pages) > maxPages {
		return nil, nil, failWrap(CodeInvalidExtraction, fmt.Errorf("extractor returned %d pages, bound %d", len(pages), maxPages))
	}
	m.Format, m.Extractor = "pdf", s.opts.PDF.Extractor()
	m.Pages = &PageCounts{Total: len(pages), OCR: []int{}, Empty: []int{}}
	var segs []segment
	for i, p := range pages {
		text := normaliseLines(p)
		if !validText(text) {
			return nil, nil, failWrap(CodeInvalidExtraction, fmt.Errorf("page %d is not valid text", i+1))
		}
		if strings.TrimSpace(text) == "" {
			m.Pages.Empty = append(m.Pages.Empty, i+1)
			continue
		}
		m.ExtractedTextBytes += len(text)
		segs = append(segs, segment{loc: Location{Page: i + 1}, text: text, firstLine: 1})
	}
	switch {
	case len(segs) == 0:
		// No text at all fails whatever the policy: a scanned document
		// needs OCR, which this host does not have.
		return nil, nil, fail(CodeOCRRequired)
	case len(m.Pages.Empty) > 0 && !s.opts.PDFAllowEmptyPages:
		return nil, nil, fail(CodeOCRRequired)
	}
	return segs, data, nil
}

// CodeInvalidExtraction is an extractor answer that does not match the
// document (§6.6, 502).
const CodeInvalidExtraction protocol.Code = "INVALID_EXTRACTION"
