package retrieval

import "context"

// PDFExtractor extracts the text of a PDF's pages inside a sandbox
// (pdf-ingestion). Errors are *protocol.Error with the PDF codes of §6.6.
type PDFExtractor interface {
	Extractor() Component
	Pages(ctx context.Context, data []byte, maxPages int) ([]string, error)
}
