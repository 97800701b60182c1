package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"regexp"

	"adhost/runtime/protocol"
)

// The retrieval family's calls (wire-extensions §6.2–§6.5). Each receipt
// and result is checked before it is returned: a host answering another
// corpus or source, a digest that is not SHA-256 hex, or an ingestion
// manifest that does not describe its chunks is INVALID_RESPONSE.

var (
	retrievalIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$`)
	sha256Pattern      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// RetrievalLocation is a passage's location.
type RetrievalLocation struct {
	DocumentID string `json:"documentId,omitempty"`
	Page       int    `json:"page,omitempty"`
	PageEnd    int    `json:"pageEnd,omitempty"`
	StartLine  int    `json:"startLine,omitempty"`
	EndLine    int    `json:"endLine,omitempty"`
	Section    string `json:"section,omitempty"`
	ThreadID   string `json:"threadId,omitempty"`
	MessageID  string `json:"messageId,omitempty"`
}

// RetrievalSource is a ContextSource.
type RetrievalSource struct {
	ID       string             `json:"id"`
	Revision string             `json:"revision"`
	Title    string             `json:"title,omitempty"`
	URI      string             `json:"uri,omitempty"`
	Location *RetrievalLocation `json:"location,omitempty"`
}

// IndexIdentity is RetrievalResult.index.
type IndexIdentity struct {
	ProviderID string `json:"providerId"`
	Vendor     string `json:"vendor"`
	AccountID  string `json:"accountId"`
	AuthMode   string `json:"authMode"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	Metric     string `json:"metric"`
	Version    string `json:"version"`
}

// RetrievalHit is one passage.
type RetrievalHit struct {
	ChunkID        string          `json:"chunkId"`
	Source         RetrievalSource `json:"source"`
	Text           string          `json:"text"`
	Score          float64         `json:"score"`
	DocumentSHA256 string          `json:"documentSha256"`
	Ingestion      json.RawMessage `json:"ingestion,omitempty"`
}

// RetrievalResult is a search answer.
type RetrievalResult struct {
	Corpus    string         `json:"corpus"`
	Index     IndexIdentity  `json:"index"`
	Hits      []RetrievalHit `json:"hits"`
	Truncated bool           `json:"truncated"`
}

// SearchRequest is a search body; zero members are left out.
type SearchRequest struct {
	Corpus          string   `json:"corpus"`
	Query           string   `json:"query"`
	SourceIDs       []string `json:"sourceIds,omitempty"`
	Limit           int      `json:"limit,omitempty"`
	MaxContextBytes int      `json:"maxContextBytes,omitempty"`
	MinScore        *float64 `json:"minScore,omitempty"`
}

// IngestionManifest is a receipt's ingestion manifest.
type IngestionManifest struct {
	Format      string `json:"format"`
	InputSHA256 string `json:"inputSha256"`
	InputBytes  int    `json:"inputBytes"`
	Extractor   *struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"extractor"`
	OCRExtractor *struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"ocrExtractor,omitempty"`
	Chunker *struct {
		ID       string `json:"id"`
		MaxBytes int    `json:"maxBytes"`
	} `json:"chunker"`
	ExtractedTextBytes int `json:"extractedTextBytes"`
	IndexedTextBytes   int `json:"indexedTextBytes"`
	Chunks             int `json:"chunks"`
	Pages              *struct {
		Total int   `json:"total"`
		OCR   []int `json:"ocr"`
		Empty []int `json:"empty"`
	} `json:"pages,omitempty"`
	Messages *struct {
		Total int `json:"total"`
		Empty int `json:"empty"`
	} `json:"messages,omitempty"`
}

// IndexReceipt is the index and ingest response.
type IndexReceipt struct {
	Corpus         string             `json:"corpus"`
	SourceID       string             `json:"sourceId"`
	Revision       string             `json:"revision"`
	DocumentSHA256 string             `json:"documentSha256"`
	Chunks         int                `json:"chunks"`
	Status         string             `json:"status"`
	Ingestion      *IngestionManifest `json:"ingestion,omitempty"`
}

// DeleteReceipt is the delete response.
type DeleteReceipt struct {
	Corpus   string `json:"corpus"`
	SourceID string `json:"sourceId"`
	Revision string `json:"revision"`
	Deleted  bool   `json:"deleted"`
}

// Search calls POST /v1/retrieval/search.
func (c *Client) Search(ctx context.Context, req *SearchRequest) (*RetrievalResult, error) {
	body, err := c.postOp(ctx, "/v1/retrieval/search", req)
	if err != nil {
		return nil, err
	}
	var r RetrievalResult
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, invalidResponse("the retrieval result does not decode")
	}
	if err := checkRetrievalResult(&r, req.Corpus); err != nil {
		return nil, invalidResponse("%s", err)
	}
	return &r, nil
}

// Index calls POST /v1/retrieval/index with a raw index body (corpus,
// source, chunks, ingestion?).
func (c *Client) Index(ctx context.Context, corpus string, source RetrievalSource, body json.RawMessage) (*IndexReceipt, error) {
	out, err := c.postOp(ctx, "/v1/retrieval/index", body)
	if err != nil {
		return nil, err
	}
	return checkReceipt(out, corpus, source.ID, source.Revision, false)
}

// Ingest calls POST /v1/retrieval/ingest: document is one of the four
// document variants (§6.5), naming source (for a reference: its id and
// revision).
func (c *Client) Ingest(ctx context.Context, corpus string, source RetrievalSource, document json.RawMessage) (*IndexReceipt, error) {
	out, err := c.postOp(ctx, "/v1/retrieval/ingest", map[string]any{"corpus": corpus, "document": document})
	if err != nil {
		return nil, err
	}
	return checkReceipt(out, corpus, source.ID, source.Revision, true)
}

// Delete calls POST /v1/retrieval/delete.
func (c *Client) Delete(ctx context.Context, corpus, sourceID, revision string) (*DeleteReceipt, error) {
	out, err := c.postOp(ctx, "/v1/retrieval/delete", map[string]string{"corpus": corpus, "sourceId": sourceID, "revision": revision})
	if err != nil {
		return nil, err
	}
	var d DeleteReceipt
	if json.Unmarshal(out, &d) != nil || d.Corpus != corpus || d.SourceID != sourceID || d.Revision != revision {
		return nil, invalidResponse("the delete receipt does not name the source asked for")
	}
	return &d, nil
}

func checkReceipt(body []byte, corpus, sourceID, revision string, manifest bool) (*IndexReceipt, error) {
	var r IndexReceipt
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, invalidResponse("the receipt does not decode")
	}
	switch {
	case r.Corpus != corpus || r.SourceID != sourceID || r.Revision != revision:
		return nil, invalidResponse("the receipt does not name the corpus, source and revision asked for")
	case !sha256Pattern.MatchString(r.DocumentSHA256):
		return nil, invalidResponse("documentSha256 is not SHA-256 hex")
	case r.Chunks < 1 || r.Chunks > 256:
		return nil, invalidResponse("chunks is out of range")
	case r.Status != "indexed" && r.Status != "unchanged":
		return nil, invalidResponse("status is not indexed or unchanged")
	case manifest && r.Ingestion == nil:
		return nil, invalidResponse("the ingestion manifest is missing")
	}
	if m := r.Ingestion; m != nil {
		if err := checkManifest(m, r.Chunks); err != "" {
			return nil, invalidResponse("%s", err)
		}
	}
	return &r, nil
}

func checkManifest(m *IngestionManifest, chunks int) string {
	switch {
	case m.Format != "text" && m.Format != "markdown" && m.Format != "pdf" && m.Format != "email":
		return "ingestion.format is unknown"
	case !sha256Pattern.MatchString(m.InputSHA256):
		return "ingestion.inputSha256 is not SHA-256 hex"
	case m.InputBytes < 1 || m.InputBytes > 33_554_432:
		return "ingestion.inputBytes is out of range"
	case m.Extractor == nil || m.Extractor.ID == "" || len(m.Extractor.Version) > 128:
		return "ingestion.extractor is missing"
	case m.Chunker == nil || m.Chunker.ID != "source-lines-v1" || m.Chunker.MaxBytes < 128 || m.Chunker.MaxBytes > 16_384:
		return "ingestion.chunker is not source-lines-v1 with a valid maxBytes"
	case m.ExtractedTextBytes < 0 || m.ExtractedTextBytes > 1<<20 || m.IndexedTextBytes < 0 || m.IndexedTextBytes > m.ExtractedTextBytes:
		return "ingestion byte counts are inconsistent"
	case m.Chunks != chunks || m.IndexedTextBytes > m.Chunks*m.Chunker.MaxBytes:
		return "ingestion.chunks does not match the receipt"
	case (m.Format == "pdf") != (m.Pages != nil):
		return "ingestion.pages must be present exactly for a PDF"
	case m.Format != "email" && m.Messages != nil:
		return "ingestion.messages belongs to an email thread"
	case m.OCRExtractor != nil && (m.OCRExtractor.ID == "" || len(m.OCRExtractor.Version) > 128):
		return "ingestion.ocrExtractor is invalid"
	}
	// Passages never cross a page or a message (§6.5): every page or
	// message with text gave at least one chunk, and a document with no
	// text at all is never stored.
	if p := m.Pages; p != nil {
		if p.Total < 1 || p.Total > 1000 || !pageList(p.OCR, p.Total) || !pageList(p.Empty, p.Total) {
			return "ingestion.pages is inconsistent"
		}
		if len(p.OCR) > 0 && m.OCRExtractor == nil {
			return "ingestion.pages.ocr without an ocrExtractor"
		}
		if len(p.Empty) >= p.Total || m.Chunks < p.Total-len(p.Empty) {
			return "ingestion.chunks does not cover the pages with text"
		}
	}
	if e := m.Messages; e != nil && (e.Total < 1 || e.Total > 1000 || e.Empty < 0 || e.Empty >= e.Total || m.Chunks < e.Total-e.Empty) {
		return "ingestion.messages is inconsistent"
	}
	return ""
}

// pageList: increasing page numbers within 1..total.
func pageList(pages []int, total int) bool {
	if pages == nil {
		return false
	}
	prev := 0
	for _, p := range pages {
		if p <= prev || p > total {
			return false
		}
		prev = p
	}
	return true
}

func checkRetrievalResult(r *RetrievalResult, corpus string) error {
	id := r.Index
	switch {
	case r.Corpus != corpus:
		return fieldError("the result is for another corpus")
	case id.Dimensions < 1 || id.Dimensions > 4096 || id.Metric != "cosine" || (id.AuthMode != "api-key" && id.AuthMode != "none") ||
		id.Model == "" || id.ProviderID == "" || id.Version == "":
		return fieldError("the index identity is invalid")
	case r.Hits == nil || len(r.Hits) > 16:
		return fieldError("hits must be an array of at most 16")
	}
	seen := map[string]bool{}
	for _, h := range r.Hits {
		l := h.Source.Location
		switch {
		case !retrievalIDPattern.MatchString(h.ChunkID) || seen[h.ChunkID]:
			return fieldError("chunk ids must be unique RetrievalIds")
		case !retrievalIDPattern.MatchString(h.Source.ID) || !retrievalIDPattern.MatchString(h.Source.Revision):
			return fieldError("a hit's source is invalid")
		case math.IsNaN(h.Score) || h.Score < -1 || h.Score > 1:
			return fieldError("a score is outside -1..1")
		case !sha256Pattern.MatchString(h.DocumentSHA256):
			return fieldError("a hit's documentSha256 is not SHA-256 hex")
		case l != nil && ((l.PageEnd != 0 && l.PageEnd < l.Page) || (l.EndLine != 0 && l.EndLine < l.StartLine) ||
			(l.DocumentID != "" && l.DocumentID != h.Source.ID)):
			return fieldError("a hit's location is inconsistent")
		}
		seen[h.ChunkID] = true
	}
	return nil
}

// validateResultRetrieval checks result.retrieval against the run's
// `retrieval` option (wire-extensions §6.3): required and a valid
// RetrievalResult of the corpus asked for, hits only from the selected
// sources, each hit's ingestion manifest consistent, and each hit supplied
// to the model as a result.sources entry of origin "retrieval" with the
// chunk id, the document's revision and id, and the SHA-256 and byte count
// of exactly the passage text (a client can recompute both, so it does).
// Without the option the member is an extension the client did not ask
// for and is ignored.
func validateResultRetrieval(m object, req *protocol.RunRequest, r *protocol.RunResult) error {
	if len(req.Retrieval) == 0 {
		return nil
	}
	var opt struct {
		Corpus    string   `json:"corpus"`
		SourceIDs []string `json:"sourceIds"`
	}
	if err := json.Unmarshal(req.Retrieval, &opt); err != nil {
		return fieldError("the request's retrieval option does not decode")
	}
	raw, present := m["retrieval"]
	ro, ok := asObject(raw)
	if !present || !ok {
		return fieldError("result.retrieval is missing for a run with retrieval")
	}
	// encoding/json turns null into zero values: check what it would hide.
	hitsRaw, ok := asArray(ro["hits"])
	if !ok {
		return fieldError("result.retrieval.hits is not an array")
	}
	for _, h := range hitsRaw {
		ho, ok := asObject(h)
		if !ok {
			return fieldError("a hit is not an object")
		}
		if _, ok := asNumber(ho["score"]); !ok {
			return fieldError("a hit's score is not a number")
		}
		if ing, present := ho["ingestion"]; present && firstByte(ing) != '{' {
			return fieldError("a hit's ingestion is not an object")
		}
	}
	var res RetrievalResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fieldError("result.retrieval does not decode")
	}
	if err := checkRetrievalResult(&res, opt.Corpus); err != nil {
		return err
	}
	var sources []struct {
		ID, Revision, MediaType, Sha256, Origin string
		Bytes                                   int
		Location                                *RetrievalLocation
	}
	if len(r.Sources) > 0 {
		if err := json.Unmarshal(r.Sources, &sources); err != nil {
			return fieldError("result.sources does not decode")
		}
	}
	byID := make(map[string]int, len(sources))
	for i, s := range sources {
		byID[s.ID] = i
	}
	for _, h := range res.Hits {
		if opt.SourceIDs != nil && !contains(opt.SourceIDs, h.Source.ID) {
			return fieldError("a hit comes from a source the run did not select")
		}
		if len(h.Ingestion) > 0 {
			var mf IngestionManifest
			if err := json.Unmarshal(h.Ingestion, &mf); err != nil {
				return fieldError("a hit's ingestion manifest does not decode")
			}
			if msg := checkManifest(&mf, mf.Chunks); msg != "" {
				return fieldError(msg)
			}
		}
		i, ok := byID[h.ChunkID]
		if !ok {
			return fieldError("a hit has no result.sources entry")
		}
		s := sources[i]
		sum := sha256.Sum256([]byte(h.Text))
		if s.Origin != "retrieval" || s.Revision != h.Source.Revision || s.Location == nil || s.Location.DocumentID != h.Source.ID ||
			s.Bytes != len(h.Text) || s.Sha256 != hex.EncodeToString(sum[:]) {
			return fieldError("a hit's result.sources entry does not describe the passage")
		}
	}
	r.Retrieval = compact(raw)
	return nil
}

// RetrievalOption is the `retrieval` run option for RunRequest.Retrieval
// (wire-extensions §6.3): the search request's fields, with Query
// optional (empty: the host searches with the run input).
func RetrievalOption(req *SearchRequest) json.RawMessage {
	b, _ := json.Marshal(req)
	if req.Query == "" {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		delete(m, "query")
		b, _ = json.Marshal(m)
	}
	return b
}

// ResultRetrieval decodes res.Retrieval, the evidence of a run with the
// retrieval option (checked when the result was read); nil without one.
func ResultRetrieval(res *protocol.RunResult) (*RetrievalResult, error) {
	if len(res.Retrieval) == 0 {
		return nil, nil
	}
	var out RetrievalResult
	if err := json.Unmarshal(res.Retrieval, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
