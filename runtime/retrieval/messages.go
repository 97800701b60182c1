package retrieval

import "adhost/runtime/protocol"

// messages are the fixed public messages of the retrieval codes: they
// say what went wrong in the caller's terms and never name a value, a
// path or an upstream answer.
var messages = map[protocol.Code]string{
	CodeInvalidRetrieval:     "The retrieval request does not match the v1 schema or its bounds.",
	CodeNoEvidence:           "Retrieval found no evidence for the run.",
	CodeContextNotFound:      "The corpus or source does not exist or is not authorized.",
	CodeContextChanged:       "A source changed since its evidence was retrieved.",
	CodeIndexIncompatible:    "The corpus index was built with another embedding identity.",
	CodeSourceConflict:       "The source's stored revision or content conflicts with the request.",
	CodeChunkConflict:        "A chunk id is already used by another source of the corpus.",
	CodeIndexFull:            "The corpus is at its capacity.",
	CodeInvalidEmbedding:     "The embedding provider returned invalid vectors.",
	CodeEmbeddingAuth:        "The embedding provider rejected the credential.",
	CodeEmbeddingHTTP:        "The embedding provider answered with an error.",
	CodeEmbeddingFailed:      "The embedding provider failed.",
	CodeInvalidIngestion:     "The ingest request does not match the v1 schema or its bounds.",
	CodeInvalidDocument:      "The document is not valid UTF-8 text without NUL.",
	CodeDocumentLimit:        "The document exceeds an ingestion limit.",
	CodeEmptyDocument:        "The document has no text.",
	CodeEmptyExtraction:      "Pages of the document are empty after extraction.",
	CodeOCRRequired:          "Pages of the document need OCR.",
	CodePDFExtractorRequired: "PDF ingestion is not configured on this host.",
	CodePDFEncrypted:         "The PDF is encrypted.",
	CodePDFExtractionFailed:  "The PDF could not be extracted.",
	CodeUnsupportedIngestion: "This kind of ingestion is not supported.",
	CodeContextUnavailable:   "Reference documents cannot be resolved on this host.",
}

// fail is the public error of a retrieval code.
func fail(code protocol.Code) *protocol.Error {
	e := protocol.New(code)
	if m, ok := messages[code]; ok {
		e.Message = m
	}
	return e
}

// failWrap is fail carrying err as the private cause.
func failWrap(code protocol.Code, err error) *protocol.Error {
	e := fail(code)
	e.Err = err
	return e
}
