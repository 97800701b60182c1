package retrieval

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"adhost/runtime/attachments/sourceuri"
)

// Bounds of §6.2–§6.5.
const (
	MaxQueryUnits      = 16_384
	MaxQueryBytes      = 16 << 10
	MaxSourceIDs       = 1000
	DefaultLimit       = 8
	MaxLimit           = 16
	DefaultContextByte = 65_536
	MaxContextBytes    = 262_144
	MaxChunks          = 256
	MaxChunkUnits      = 16_384
)

// SearchRequest is a search body (§6.2) or the `retrieval` run option
// (§6.3, where Query may be empty: the run input).
type SearchRequest struct {
	Corpus          string
	Query           string
	SourceIDs       []string
	Limit           int
	MaxContextBytes int
	MinScore        float64
}

// DecodeSearch reads a search body strictly (INVALID_RETRIEVAL).
func DecodeSearch(body []byte) (*SearchRequest, error) { return decodeSearch(body, true) }

// DecodeRunOption reads the `retrieval` member of a run request.
func DecodeRunOption(raw json.RawMessage) (*SearchRequest, error) { return decodeSearch(raw, false) }

func decodeSearch(body []byte, queryRequired bool) (*SearchRequest, error) {
	o := parseObject(body, CodeInvalidRetrieval, "retrieval")
	r := &SearchRequest{Limit: DefaultLimit, MaxContextBytes: DefaultContextByte, MinScore: -1}
	r.Corpus = o.id("corpus", true)
	if q, ok := o.str("query", queryRequired); ok {
		// "after trim" is JavaScript's trim: a query of U+FEFF alone is
		// empty, one of U+0085 is not (strings.TrimSpace has it the other
		// way round).
		if t := strings.TrimFunc(q, sourceuri.IsJSSpace); t == "" || units(t) > MaxQueryUnits || len(q) > MaxQueryBytes {
			o.fail("query must be 1..16384 characters and at most 16 KiB")
		}
		r.Query = q
	}
	if v := o.take("sourceIds"); v != nil {
		var ids []string
		if err := json.Unmarshal(v, &ids); err != nil || len(ids) < 1 || len(ids) > MaxSourceIDs {
			o.fail("sourceIds must be 1..1000 ids")
		} else {
			seen := make(map[string]bool, len(ids))
			for _, id := range ids {
				if !IsID(id) || seen[id] {
					o.fail("sourceIds must be unique RetrievalIds")
					break
				}
				seen[id] = true
			}
			r.SourceIDs = ids
		}
	}
	if n, ok := o.int("limit", 1, MaxLimit); ok {
		r.Limit = n
	}
	if n, ok := o.int("maxContextBytes", 1, MaxContextBytes); ok {
		r.MaxContextBytes = n
	}
	if f, ok := o.number("minScore", -1, 1, false); ok {
		r.MinScore = f
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return r, nil
}

// Chunk is one passage of an index request, its location merged over the
// source's.
type Chunk struct {
	ID       string    `json:"id"`
	Text     string    `json:"text"`
	Location *Location `json:"location,omitempty"`
}

// IndexRequest is an index body (§6.4).
type IndexRequest struct {
	Corpus    string
	Source    Source
	Chunks    []Chunk
	Ingestion *Manifest
	// Text and MediaType are set by ingestion of a text or Markdown
	// document: its original text, stored with the chunks for references
	// and counted in the corpus payload; not part of documentSha256.
	Text, MediaType string
}

// Manifest is an ingestion manifest (§6.5). Unset optional members are
// absent in its JSON.
type Manifest struct {
	Format             string         `json:"format"`
	InputSHA256        string         `json:"inputSha256"`
	InputBytes         int            `json:"inputBytes"`
	Extractor          Component      `json:"extractor"`
	OCRExtractor       *Component     `json:"ocrExtractor,omitempty"`
	Chunker            ChunkerInfo    `json:"chunker"`
	ExtractedTextBytes int            `json:"extractedTextBytes"`
	IndexedTextBytes   int            `json:"indexedTextBytes"`
	Chunks             int            `json:"chunks"`
	Pages              *PageCounts    `json:"pages,omitempty"`
	Messages           *MessageCounts `json:"messages,omitempty"`
}

// Component names an extractor.
type Component struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// ChunkerInfo names the chunker and its byte bound.
type ChunkerInfo struct {
	ID       string `json:"id"`
	MaxBytes int    `json:"maxBytes"`
}

// PageCounts are a PDF's pages.
type PageCounts struct {
	Total int   `json:"total"`
	OCR   []int `json:"ocr"`
	Empty []int `json:"empty"`
}

// MessageCounts are an email thread's messages.
type MessageCounts struct {
	Total int `json:"total"`
	Empty int `json:"empty"`
}

// ChunkerID is the only chunker (§6.5).
const ChunkerID = "source-lines-v1"

// DecodeIndex reads an index body strictly (INVALID_RETRIEVAL).
func DecodeIndex(body []byte) (*IndexRequest, error) {
	o := parseObject(body, CodeInvalidRetrieval, "index")
	r := &IndexRequest{}
	r.Corpus = o.id("corpus", true)
	sv := o.take("source")
	cv := o.take("chunks")
	mv := o.take("ingestion")
	if err := o.done(); err != nil {
		return nil, err
	}
	if sv == nil || cv == nil {
		return nil, shapeErr(CodeInvalidRetrieval, "source and chunks are required")
	}
	var err error
	if r.Source, err = decodeSource(sv, CodeInvalidRetrieval, "source"); err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if json.Unmarshal(cv, &raws) != nil || len(raws) < 1 || len(raws) > MaxChunks {
		return nil, shapeErr(CodeInvalidRetrieval, "chunks must be 1..256 items")
	}
	seen := make(map[string]bool, len(raws))
	for _, raw := range raws {
		c := parseObject(raw, CodeInvalidRetrieval, "chunks[]")
		var ch Chunk
		ch.ID = c.id("id", true)
		if t, ok := c.str("text", true); ok {
			if n := units(t); n < 1 || n > MaxChunkUnits || !validText(t) {
				c.fail("chunks[].text must be 1..16384 characters of text")
			}
			ch.Text = t
		}
		if lv := c.take("location"); lv != nil && c.err == nil {
			l, err := decodeLocation(lv, CodeInvalidRetrieval, "chunks[].location")
			if err != nil {
				return nil, err
			}
			ch.Location = l
		}
		if err := c.done(); err != nil {
			return nil, err
		}
		if seen[ch.ID] {
			return nil, shapeErr(CodeInvalidRetrieval, "chunk ids must be unique")
		}
		seen[ch.ID] = true
		if ch.Location != nil {
			if ch.Location.DocumentID != "" && ch.Location.DocumentID != r.Source.ID {
				return nil, shapeErr(CodeInvalidRetrieval, "a chunk's documentId differs from the source id")
			}
			var base Location
			if r.Source.Location != nil {
				base = *r.Source.Location
			}
			if m := base.merge(ch.Location); !m.consistent() {
				return nil, shapeErr(CodeInvalidRetrieval, "a chunk's location is inconsistent")
			}
		}
		r.Chunks = append(r.Chunks, ch)
	}
	if mv != nil {
		m, err := decodeManifest(mv)
		if err != nil {
			return nil, err
		}
		if err := m.describes(r.Chunks); err != nil {
			return nil, err
		}
		r.Ingestion = m
	}
	return r, nil
}

// decodeManifest reads an ingestion manifest as strictly as every other
// body (member names exact, no nulls, numbers as JSON numbers, required
// members present; encoding/json would match names case-insensitively and
// take null or a missing count as 0).
func decodeManifest(raw json.RawMessage) (*Manifest, error) {
	o := parseObject(raw, CodeInvalidRetrieval, "ingestion")
	var m Manifest
	need := func(o *object, k string, lo, hi int) int {
		n, ok := o.int(k, lo, hi)
		if !ok {
			o.fail("%s is required", o.name(k))
		}
		return n
	}
	sub := func(k string, required bool, read func(*object)) bool {
		v := o.take(k)
		if v == nil {
			if required {
				o.fail("%s is required", o.name(k))
			}
			return false
		}
		so := parseObject(v, CodeInvalidRetrieval, o.name(k))
		read(so)
		if err := so.done(); err != nil && o.err == nil {
			o.err = err
		}
		return true
	}
	component := func(c *Component) func(*object) {
		return func(so *object) {
			c.ID, _ = so.str("id", true)
			c.Version, _ = so.str("version", true)
			if c.ID == "" || units(c.Version) > 128 {
				so.fail("%s must have an id and a version of at most 128 characters", so.path)
			}
		}
	}
	m.Format, _ = o.str("format", true)
	m.InputSHA256, _ = o.str("inputSha256", true)
	m.InputBytes = need(o, "inputBytes", 1, 33_554_432)
	sub("extractor", true, component(&m.Extractor))
	var ocr Component
	if sub("ocrExtractor", false, component(&ocr)) {
		m.OCRExtractor = &ocr
	}
	sub("chunker", true, func(so *object) {
		m.Chunker.ID, _ = so.str("id", true)
		m.Chunker.MaxBytes = need(so, "maxBytes", 128, 16_384)
	})
	m.ExtractedTextBytes = need(o, "extractedTextBytes", 0, 1<<20)
	m.IndexedTextBytes = need(o, "indexedTextBytes", 0, 1<<20)
	m.Chunks = need(o, "chunks", 1, MaxChunks)
	var pages PageCounts
	if sub("pages", false, func(so *object) {
		pages.Total = need(so, "total", 1, 1000)
		for _, k := range []string{"ocr", "empty"} {
			var list []int
			if v := so.take(k); v == nil {
				so.fail("%s is required", so.name(k))
			} else if json.Unmarshal(v, &list) != nil || len(list) > 1000 || slices.ContainsFunc(list, func(n int) bool { return n < 1 || n > 1000 }) {
				so.fail("%s must list page numbers", so.name(k))
			}
			if k == "ocr" {
				pages.OCR = list
			} else {
				pages.Empty = list
			}
		}
	}) {
		m.Pages = &pages
	}
	var msgs MessageCounts
	if sub("messages", false, func(so *object) {
		msgs.Total = need(so, "total", 0, MaxEmailMessages)
		msgs.Empty = need(so, "empty", 0, MaxEmailMessages)
	}) {
		m.Messages = &msgs
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	if (m.Format != "text" && m.Format != "markdown" && m.Format != "pdf" && m.Format != "email") ||
		!sha256Hex.MatchString(m.InputSHA256) || m.Chunker.ID != ChunkerID {
		return nil, shapeErr(CodeInvalidRetrieval, "ingestion is out of range")
	}
	return &m, nil
}

// sha256Hex is a lowercase hex SHA-256.
var sha256Hex = regexp.MustCompile(`^[a-f0-9]{64}$`)

// describes checks that m describes chunks exactly (§6.4).
func (m *Manifest) describes(chunks []Chunk) error {
	total := 0
	for _, c := range chunks {
		if len(c.Text) > m.Chunker.MaxBytes {
			return shapeErr(CodeInvalidRetrieval, "a chunk is larger than chunker.maxBytes")
		}
		total += len(c.Text)
	}
	if m.Chunks != len(chunks) || m.IndexedTextBytes != total {
		return shapeErr(CodeInvalidRetrieval, "ingestion does not describe the chunks")
	}
	return nil
}

// DeleteRequest is a delete body (§6.4).
type DeleteRequest struct {
	Corpus, SourceID, Revision string
}

// DecodeDelete reads a delete body strictly (INVALID_RETRIEVAL).
func DecodeDelete(body []byte) (*DeleteRequest, error) {
	o := parseObject(body, CodeInvalidRetrieval, "delete")
	r := &DeleteRequest{}
	r.Corpus = o.id("corpus", true)
	r.SourceID = o.id("sourceId", true)
	r.Revision = o.id("revision", true)
	if err := o.done(); err != nil {
		return nil, err
	}
	return r, nil
}
