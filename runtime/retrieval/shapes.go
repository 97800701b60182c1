package retrieval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"unicode/utf8"

	"adhost/runtime/attachments/sourceuri"
	"adhost/runtime/protocol"
)

// Codes of wire-extensions §6.6 (their statuses are in runtime/protocol).
const (
	CodeInvalidRetrieval     protocol.Code = "INVALID_RETRIEVAL"
	CodeNoEvidence           protocol.Code = "NO_RETRIEVAL_EVIDENCE"
	CodeContextNotFound      protocol.Code = "CONTEXT_NOT_FOUND"
	CodeContextChanged       protocol.Code = "CONTEXT_CHANGED"
	CodeIndexIncompatible    protocol.Code = "INDEX_INCOMPATIBLE"
	CodeSourceConflict       protocol.Code = "SOURCE_CONFLICT"
	CodeChunkConflict        protocol.Code = "CHUNK_CONFLICT"
	CodeIndexFull            protocol.Code = "INDEX_FULL"
	CodeInvalidEmbedding     protocol.Code = "INVALID_EMBEDDING"
	CodeEmbeddingAuth        protocol.Code = "EMBEDDING_AUTH_REJECTED"
	CodeEmbeddingHTTP        protocol.Code = "EMBEDDING_HTTP_ERROR"
	CodeEmbeddingFailed      protocol.Code = "EMBEDDING_FAILED"
	CodeInvalidIngestion     protocol.Code = "INVALID_INGESTION"
	CodeInvalidDocument      protocol.Code = "INVALID_DOCUMENT"
	CodeDocumentLimit        protocol.Code = "DOCUMENT_LIMIT"
	CodeEmptyDocument        protocol.Code = "EMPTY_DOCUMENT"
	CodeEmptyExtraction      protocol.Code = "EMPTY_EXTRACTION"
	CodeOCRRequired          protocol.Code = "OCR_REQUIRED"
	CodePDFExtractorRequired protocol.Code = "PDF_EXTRACTOR_REQUIRED"
	CodePDFEncrypted         protocol.Code = "PDF_ENCRYPTED"
	CodePDFExtractionFailed  protocol.Code = "PDF_EXTRACTION_FAILED"
	CodeUnsupportedIngestion protocol.Code = "UNSUPPORTED_INGESTION"
	CodeContextUnavailable   protocol.Code = "CONTEXT_UNAVAILABLE"
)

// idPattern is RetrievalId (§6.1): corpus, source, revision, chunk and
// namespace identifiers.
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$`)

// IsID reports whether s is a RetrievalId.
func IsID(s string) bool { return idPattern.MatchString(s) }

// Location is a source's or chunk's location (§6.1). Zero members are
// absent.
type Location struct {
	DocumentID string `json:"documentId,omitempty"`
	Page       int    `json:"page,omitempty"`
	PageEnd    int    `json:"pageEnd,omitempty"`
	StartLine  int    `json:"startLine,omitempty"`
	EndLine    int    `json:"endLine,omitempty"`
	Section    string `json:"section,omitempty"`
	ThreadID   string `json:"threadId,omitempty"`
	MessageID  string `json:"messageId,omitempty"`
}

func (l *Location) empty() bool { return *l == Location{} }

// merge returns l with the members of over that are set.
func (l Location) merge(over *Location) Location {
	if over == nil {
		return l
	}
	if over.DocumentID != "" {
		l.DocumentID = over.DocumentID
	}
	if over.Page != 0 {
		l.Page = over.Page
	}
	if over.PageEnd != 0 {
		l.PageEnd = over.PageEnd
	}
	if over.StartLine != 0 {
		l.StartLine = over.StartLine
	}
	if over.EndLine != 0 {
		l.EndLine = over.EndLine
	}
	if over.Section != "" {
		l.Section = over.Section
	}
	if over.ThreadID != "" {
		l.ThreadID = over.ThreadID
	}
	if over.MessageID != "" {
		l.MessageID = over.MessageID
	}
	return l
}

// consistent checks the ranges of a merged location.
func (l *Location) consistent() bool {
	if l.PageEnd != 0 && (l.Page == 0 || l.PageEnd < l.Page) {
		return false
	}
	if l.EndLine != 0 && (l.StartLine == 0 || l.EndLine < l.StartLine) {
		return false
	}
	return true
}

// Source is ContextSource (§6.1).
type Source struct {
	ID       string    `json:"id"`
	Revision string    `json:"revision"`
	Title    string    `json:"title,omitempty"`
	URI      string    `json:"uri,omitempty"`
	Location *Location `json:"location,omitempty"`
}

// Identity is the index identity of a corpus (§6.1, RetrievalResult.index).
type Identity struct {
	ProviderID string `json:"providerId"`
	Vendor     string `json:"vendor"`
	AccountID  string `json:"accountId"`
	AuthMode   string `json:"authMode"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	Metric     string `json:"metric"`
	Version    string `json:"version"`
}

// errShape is the private cause of a schema failure; it names the
// member, never its value.
type errShape string

func (e errShape) Error() string { return "retrieval shape: " + string(e) }

func shapeErr(code protocol.Code, format string, args ...any) error {
	return failWrap(code, errShape(fmt.Sprintf(format, args...)))
}

// object is one JSON object's members, read strictly: the body must be an
// object, and every member must be consumed by the decoder (take) — what
// is left over is unknown (rest). Duplicate keys keep the last, as
// JSON.parse does; names are case-sensitive; null is never a value.
type object struct {
	m    map[string]json.RawMessage
	code protocol.Code
	path string
	err  error
}

func parseObject(raw json.RawMessage, code protocol.Code, path string) *object {
	o := &object{code: code, path: path}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		o.fail("%s must be an object", path)
		return o
	}
	if err := json.Unmarshal(raw, &o.m); err != nil {
		o.fail("%s does not decode", path)
	}
	return o
}

func (o *object) fail(format string, args ...any) {
	if o.err == nil {
		o.err = shapeErr(o.code, format, args...)
	}
}

func (o *object) name(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

// take removes and returns member k (nil when absent; null fails).
func (o *object) take(k string) json.RawMessage {
	v, ok := o.m[k]
	if !ok {
		return nil
	}
	delete(o.m, k)
	if string(bytes.TrimSpace(v)) == "null" {
		o.fail("%s may not be null", o.name(k))
		return nil
	}
	return v
}

// str reads an optional string member ("" with ok false when absent).
func (o *object) str(k string, required bool) (string, bool) {
	v := o.take(k)
	if v == nil {
		if required {
			o.fail("%s is required", o.name(k))
		}
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.fail("%s must be a string", o.name(k))
		return "", false
	}
	return s, true
}

func (o *object) id(k string, required bool) string {
	s, ok := o.str(k, required)
	if ok && !IsID(s) {
		o.fail("%s is not a RetrievalId", o.name(k))
	}
	return s
}

// number reads an optional number member in [lo, hi]; integral requires
// an integer.
func (o *object) number(k string, lo, hi float64, integral bool) (float64, bool) {
	v := o.take(k)
	if v == nil {
		return 0, false
	}
	// json.Number also takes a string holding a number ("8"): the
	// schema's number is a JSON number, so a quoted one is refused first.
	var n json.Number
	if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '"' || json.Unmarshal(v, &n) != nil {
		o.fail("%s must be a number", o.name(k))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || f < lo || f > hi || (integral && f != math.Trunc(f)) {
		o.fail("%s is out of range", o.name(k))
		return 0, false
	}
	return f, true
}

func (o *object) int(k string, lo, hi int) (int, bool) {
	f, ok := o.number(k, float64(lo), float64(hi), true)
	return int(f), ok
}

// done fails on any member left (unknown to the shape).
func (o *object) done() error {
	for k := range o.m {
		o.fail("%s is not a known member", o.name(k))
		break
	}
	return o.err
}

// units is the length in UTF-16 code units of a valid UTF-8 string.
func units(s string) int { return protocol.UTF16Len(s) }

func decodeLocation(raw json.RawMessage, code protocol.Code, path string) (*Location, error) {
	o := parseObject(raw, code, path)
	var l Location
	l.DocumentID = o.id("documentId", false)
	l.Page, _ = o.int("page", 1, 1_000_000)
	l.PageEnd, _ = o.int("pageEnd", 1, 1_000_000)
	l.StartLine, _ = o.int("startLine", 1, 1_000_000)
	l.EndLine, _ = o.int("endLine", 1, 1_000_000)
	if s, ok := o.str("section", false); ok {
		if units(s) > 256 {
			o.fail("%s.section is too long", path)
		}
		l.Section = s
	}
	l.ThreadID = o.id("threadId", false)
	l.MessageID = o.id("messageId", false)
	return &l, o.done()
}

// decodeSource reads a ContextSource.
func decodeSource(raw json.RawMessage, code protocol.Code, path string) (Source, error) {
	o := parseObject(raw, code, path)
	var s Source
	s.ID = o.id("id", true)
	s.Revision = o.id("revision", true)
	if t, ok := o.str("title", false); ok {
		if units(t) > 256 {
			o.fail("%s.title is too long", path)
		}
		s.Title = t
	}
	if u, ok := o.str("uri", false); ok {
		// Beyond §6.1's pattern, the rules a context source's uri has
		// (wire-context §3.2 step 4): a passage becomes a result.sources
		// entry, and one whose uri names a user or password would fail
		// every run that retrieves it (INVALID_CONTEXT), so it is refused
		// here, where the caller can correct it.
		if units(u) > 2048 || !sourceuri.Schema(u) || !sourceuri.Plain(u) {
			o.fail("%s.uri is not an https:// or app:// URI without credentials", path)
		}
		s.URI = u
	}
	if v := o.take("location"); v != nil && o.err == nil {
		l, err := decodeLocation(v, code, path+".location")
		if err != nil {
			return s, err
		}
		s.Location = l
	}
	if err := o.done(); err != nil {
		return s, err
	}
	if s.Location != nil {
		if s.Location.DocumentID != "" && s.Location.DocumentID != s.ID {
			return s, shapeErr(code, "%s.location.documentId differs from the source id", path)
		}
		if !s.Location.consistent() {
			return s, shapeErr(code, "%s.location is inconsistent", path)
		}
	}
	return s, nil
}

// validText reports whether s is valid UTF-8 without NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && !bytes.ContainsRune([]byte(s), 0)
}
