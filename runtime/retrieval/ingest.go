package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// Ingestion bounds (§6.5 defaults; the host can lower them).
const (
	MaxDocumentBytes  = 8 << 20
	MaxExtractedBytes = 1 << 20
	MaxTextUnits      = 1_000_000
	MaxEmailMessages  = 1000
	MaxMessageUnits   = 1_048_576
	MaxPDFDataUnits   = 44_739_244
)

// IngestRequest is an ingest body.
type IngestRequest struct {
	Corpus   string
	Doc      document
	MaxBytes int // 0: the corpus's chunk size
	// IdleTimeout is idleTimeoutMs (0: none). The host has no ingest
	// idle timer of its own, so the request's positive value is the
	// effective one (§6.5: the minimum of the positive values).
	IdleTimeout time.Duration
}

type document struct {
	Type      string // text, email, pdf, reference
	Source    Source
	MediaType string
	Text      string
	ThreadID  string
	Messages  []emailMessage
	Data      string // pdf, base64
}

type emailMessage struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// DecodeIngest reads an ingest body strictly (INVALID_INGESTION).
func DecodeIngest(body []byte) (*IngestRequest, error) {
	o := parseObject(body, CodeInvalidIngestion, "ingest")
	r := &IngestRequest{}
	r.Corpus = o.id("corpus", true)
	dv := o.take("document")
	if cv := o.take("chunking"); cv != nil {
		c := parseObject(cv, CodeInvalidIngestion, "chunking")
		r.MaxBytes, _ = c.int("maxBytes", 128, MaxChunkUnits)
		if err := c.done(); err != nil {
			return nil, err
		}
	}
	if ms, ok := o.int("idleTimeoutMs", 0, 2_147_483_647); ok {
		r.IdleTimeout = time.Duration(ms) * time.Millisecond
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	if dv == nil {
		return nil, shapeErr(CodeInvalidIngestion, "document is required")
	}
	d := parseObject(dv, CodeInvalidIngestion, "document")
	typ, _ := d.str("type", true)
	r.Doc.Type = typ
	takeSource := func() {
		if sv := d.take("source"); sv == nil {
			d.fail("document.source is required")
		} else if d.err == nil {
			src, err := decodeSource(sv, CodeInvalidIngestion, "document.source")
			if err != nil {
				d.err = err
			}
			r.Doc.Source = src
		}
	}
	switch typ {
	case "text":
		takeSource()
		r.Doc.MediaType, _ = d.str("mediaType", true)
		if r.Doc.MediaType != "text/plain" && r.Doc.MediaType != "text/markdown" {
			d.fail("document.mediaType must be text/plain or text/markdown")
		}
		r.Doc.Text, _ = d.str("text", true)
		if n := units(r.Doc.Text); n < 1 || n > MaxTextUnits {
			d.fail("document.text must be 1..1000000 characters")
		}
	case "email":
		takeSource()
		r.Doc.ThreadID = d.id("threadId", true)
		if mv := d.take("messages"); mv == nil {
			d.fail("document.messages is required")
		} else {
			var raws []json.RawMessage
			if json.Unmarshal(mv, &raws) != nil || len(raws) < 1 || len(raws) > MaxEmailMessages {
				d.fail("document.messages must be 1..1000 messages")
			}
			for _, raw := range raws {
				m := parseObject(raw, CodeInvalidIngestion, "document.messages[]")
				var em emailMessage
				em.ID = m.id("id", true)
				em.Text, _ = m.str("text", true)
				if units(em.Text) > MaxMessageUnits {
					m.fail("a message is longer than 1048576 characters")
				}
				if err := m.done(); err != nil {
					return nil, err
				}
				r.Doc.Messages = append(r.Doc.Messages, em)
			}
		}
	case "pdf":
		takeSource()
		r.Doc.MediaType, _ = d.str("mediaType", true)
		if r.Doc.MediaType != "application/pdf" {
			d.fail("document.mediaType must be application/pdf")
		}
		r.Doc.Data, _ = d.str("data", true)
		if n := len(r.Doc.Data); n < 1 || n > MaxPDFDataUnits {
			d.fail("document.data must be 1..44739244 characters of base64")
		}
	case "reference":
		r.Doc.Source.ID = d.id("id", true)
		r.Doc.Source.Revision = d.id("revision", true)
		r.Doc.MediaType, _ = d.str("mediaType", true)
	default:
		d.fail("document.type must be text, pdf, reference or email")
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return r, nil
}

// Ingest serves POST /v1/retrieval/ingest.
func (s *Service) Ingest(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	req, err := DecodeIngest(body)
	if err != nil {
		return nil, err
	}
	res, err := s.IngestDocument(ctx, p, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// segment is one part of a document chunks never cross: the whole text,
// a Markdown section, an email message or a PDF page.
type segment struct {
	loc       Location // section / thread and message / page
	text      string   // LF line ends
	firstLine int      // the line number of its first line
}

// errIngestIdle is the cause of an ingestion's context when its idle
// timer fires.
var errIngestIdle = errors.New("ingestion idle timeout")

// IngestDocument extracts, chunks and indexes one document for p (§6.5).
// With an idle timeout, the timer starts once the corpus grant passed and
// is reset by real progress only — the extraction, the chunking, each
// embedding batch and its authorization re-check, the store write — never
// by waiting; when it fires, whatever was running is cancelled and the
// answer is IDLE_TIMEOUT (504), the previous document untouched.
func (s *Service) IngestDocument(ctx context.Context, p *runtime.Principal, req *IngestRequest) (*IndexResult, error) {
	if req.IdleTimeout <= 0 {
		return s.ingestDocument(ctx, p, req, func() {})
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(req.IdleTimeout, func() { cancel(errIngestIdle) })
	defer timer.Stop()
	res, err := s.ingestDocument(ctx, p, req, func() { timer.Reset(req.IdleTimeout) })
	if err != nil && errors.Is(context.Cause(ctx), errIngestIdle) {
		return nil, &protocol.Error{Code: protocol.CodeIdleTimeout, Message: "The ingestion made no progress for longer than its idleTimeoutMs."}
	}
	return res, err
}

func (s *Service) ingestDocument(ctx context.Context, p *runtime.Principal, req *IngestRequest, progress func()) (*IndexResult, error) {
	c, err := s.grant(p, "index", req.Corpus)
	if err != nil {
		return nil, err
	}
	src := req.Doc.Source
	// 1. The exact source must be authorized before anything is parsed.
	if _, err := c.indexable(p.Subject, Source{ID: src.ID}, ""); err != nil {
		return nil, err
	}
	progress() // authorized
	maxBytes := c.ChunkBytes
	if req.MaxBytes > 0 && req.MaxBytes < maxBytes {
		maxBytes = req.MaxBytes
	}
	m := &Manifest{Chunker: ChunkerInfo{ID: ChunkerID, MaxBytes: maxBytes}, Extractor: Component{Version: "1"}}
	var segs []segment
	var input []byte
	switch req.Doc.Type {
	case "reference":
		return nil, fail(CodeContextUnavailable)
	case "pdf":
		if segs, input, err = s.pdfSegments(ctx, &req.Doc, m); err != nil {
			return nil, err
		}
	case "text":
		input = []byte(req.Doc.Text)
		if !validText(req.Doc.Text) {
			return nil, fail(CodeInvalidDocument)
		}
		text := normaliseLines(req.Doc.Text)
		m.ExtractedTextBytes = len(text)
		if req.Doc.MediaType == "text/markdown" {
			m.Format, m.Extractor.ID = "markdown", "markdown-sections"
			segs = markdownSections(text)
		} else {
			m.Format, m.Extractor.ID = "text", "plain-text"
			segs = []segment{{text: text, firstLine: 1}}
		}
	case "email":
		m.Format, m.Extractor.ID = "email", "email-plain-text"
		// The JSON of {threadId, messages} as JavaScript writes it: no
		// HTML escaping (json.Marshal would write < > & as \u003c …, so a
		// thread mentioning "a < b" had another inputSha256).
		input, _ = marshal(struct {
			ThreadID string         `json:"threadId"`
			Messages []emailMessage `json:"messages"`
		}{req.Doc.ThreadID, req.Doc.Messages})
		m.Messages = &MessageCounts{Total: len(req.Doc.Messages)}
		for _, msg := range req.Doc.Messages {
			if !validText(msg.Text) {
				return nil, fail(CodeInvalidDocument)
			}
			if strings.TrimSpace(msg.Text) == "" {
				m.Messages.Empty++
				continue
			}
			text := normaliseLines(msg.Text)
			m.ExtractedTextBytes += len(text)
			segs = append(segs, segment{loc: Location{ThreadID: req.Doc.ThreadID, MessageID: msg.ID}, text: text, firstLine: 1})
		}
	}
	if len(input) > MaxDocumentBytes {
		return nil, fail(CodeDocumentLimit)
	}
	progress() // extracted
	sum := sha256.Sum256(input)
	m.InputSHA256, m.InputBytes = hex.EncodeToString(sum[:]), len(input)
	if m.ExtractedTextBytes > MaxExtractedBytes {
		return nil, fail(CodeDocumentLimit)
	}
	offset := 0
	if src.Location != nil && src.Location.StartLine > 1 {
		offset = src.Location.StartLine - 1
	}
	chunks, err := chunkSegments(src.ID, segs, maxBytes, offset)
	if err != nil {
		return nil, err
	}
	if len(chunks) == 0 {
		return nil, fail(CodeEmptyDocument)
	}
	progress() // chunked
	m.Chunks = len(chunks)
	for _, ch := range chunks {
		m.IndexedTextBytes += len(ch.Text)
	}
	ir := &IndexRequest{Corpus: req.Corpus, Source: src, Chunks: chunks, Ingestion: m}
	if req.Doc.Type == "text" {
		ir.Text, ir.MediaType = req.Doc.Text, req.Doc.MediaType // for references (documents.go)
	}
	return s.Put(ctx, p, ir, progress)
}

// normaliseLines turns CRLF and CR into LF.
func normaliseLines(s string) string {
	if !strings.ContainsRune(s, '\r') {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// markdownSections splits Markdown at ATX ("# Title") and setext
// ("Title" over "===" or "---") headings outside fenced code blocks; each
// section is named by its heading and starts at the heading's line.
func markdownSections(text string) []segment {
	lines := strings.Split(text, "\n")
	var segs []segment
	cur := segment{firstLine: 1}
	var body []string
	flush := func(next segment) {
		if len(body) > 0 {
			cur.text = strings.Join(body, "\n")
			segs = append(segs, cur)
		}
		cur, body = next, nil
	}
	fence := ""
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		t := strings.TrimLeft(ln, " ")
		indent := len(ln) - len(t)
		if fence != "" {
			if indent < 4 && strings.HasPrefix(t, fence) && strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" {
				fence = ""
			}
			body = append(body, ln)
			continue
		}
		if indent < 4 && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			body = append(body, ln)
			continue
		}
		if title, ok := atxHeading(t, indent); ok {
			flush(segment{loc: Location{Section: clip(title)}, firstLine: i + 1})
			body = append(body, ln)
			continue
		}
		if i+1 < len(lines) && strings.TrimSpace(ln) != "" && indent < 4 && setextUnderline(lines[i+1]) && !setextUnderline(ln) {
			flush(segment{loc: Location{Section: clip(strings.TrimSpace(ln))}, firstLine: i + 1})
			body = append(body, ln, lines[i+1])
			i++
			continue
		}
		body = append(body, ln)
	}
	flush(segment{})
	return segs
}

func atxHeading(t string, indent int) (string, bool) {
	if indent >= 4 || !strings.HasPrefix(t, "#") {
		return "", false
	}
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n > 6 || (len(t) > n && t[n] != ' ' && t[n] != '\t') {
		return "", false
	}
	title := strings.TrimSpace(t[n:])
	title = strings.TrimSpace(strings.TrimRight(title, "#"))
	return title, true
}

func setextUnderline(ln string) bool {
	t := strings.TrimSpace(ln)
	if t == "" || len(ln)-len(strings.TrimLeft(ln, " ")) >= 4 {
		return false
	}
	return strings.Trim(t, "=") == "" || strings.Trim(t, "-") == ""
}

// clip bounds a section name to 256 UTF-16 units at a rune boundary.
func clip(s string) string {
	for units(s) > 256 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// chunkSegments is chunker source-lines-v1: passages never cross a
// segment; whole lines stay together while they fit in maxBytes; a longer
// line is split at UTF-8 boundaries; blank lines at a passage's edges are
// left out. Every chunk records its 1-based lines (plus offset).
func chunkSegments(sourceID string, segs []segment, maxBytes, offset int) ([]Chunk, error) {
	var out []Chunk
	for _, sg := range segs {
		lines := strings.Split(sg.text, "\n")
		var buf []string
		size, start := 0, 0
		emit := func(text string, first, last int) error {
			if strings.TrimSpace(text) == "" {
				return nil
			}
			if len(out) == MaxChunks {
				return fail(CodeDocumentLimit)
			}
			loc := sg.loc
			loc.StartLine, loc.EndLine = first+offset, last+offset
			id := chunkID(sourceID, &loc, text, len(out))
			l := loc
			out = append(out, Chunk{ID: id, Text: text, Location: &l})
			return nil
		}
		flush := func(endLine int) error {
			// Trim blank lines at both edges.
			i, j := 0, len(buf)
			for i < j && strings.TrimSpace(buf[i]) == "" {
				i++
			}
			for j > i && strings.TrimSpace(buf[j-1]) == "" {
				j--
			}
			var err error
			if i < j {
				err = emit(strings.Join(buf[i:j], "\n"), start+i, start+j-1)
			}
			buf, size = nil, 0
			return err
		}
		for k, ln := range lines {
			n := sg.firstLine + k
			if len(ln) > maxBytes {
				if err := flush(n - 1); err != nil {
					return nil, err
				}
				for rest := ln; rest != ""; {
					cut := min(len(rest), maxBytes)
					for cut > 0 && cut < len(rest) && !utf8.RuneStart(rest[cut]) {
						cut--
					}
					if err := emit(rest[:cut], n, n); err != nil {
						return nil, err
					}
					rest = rest[cut:]
				}
				continue
			}
			extra := len(ln)
			if len(buf) > 0 {
				extra++ // the joining newline
			}
			if size+extra > maxBytes {
				if err := flush(n - 1); err != nil {
					return nil, err
				}
				extra = len(ln)
			}
			if len(buf) == 0 {
				start = n
			}
			buf = append(buf, ln)
			size += extra
		}
		if err := flush(sg.firstLine + len(lines) - 1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chunkID is "p-" + sha256hex(JSON([sourceId, location, text, ordinal]))
// with the location's keys in segment order, then startLine, endLine.
func chunkID(sourceID string, l *Location, text string, ordinal int) string {
	var b bytes.Buffer
	str := func(s string) {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('[')
	str(sourceID)
	b.WriteString(",{")
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		str(k)
		b.WriteByte(':')
	}
	if l.Page != 0 {
		key("page")
		b.WriteString(strconv.Itoa(l.Page))
	}
	if l.Section != "" {
		key("section")
		str(l.Section)
	}
	if l.ThreadID != "" {
		key("threadId")
		str(l.ThreadID)
	}
	if l.MessageID != "" {
		key("messageId")
		str(l.MessageID)
	}
	key("startLine")
	b.WriteString(strconv.Itoa(l.StartLine))
	key("endLine")
	b.WriteString(strconv.Itoa(l.EndLine))
	b.WriteString("},")
	str(text)
	b.WriteByte(',')
	b.WriteString(strconv.Itoa(ordinal))
	b.WriteByte(']')
	sum := sha256.Sum256(b.Bytes())
	return "p-" + hex.EncodeToString(sum[:])
}
