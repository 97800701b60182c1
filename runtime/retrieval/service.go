package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Embedder turns texts into vectors: an embedder extension bound to one
// embedding instance (runtime/wasm.Embedder), or a fake in tests. Errors
// are *protocol.Error with provider codes; the service maps them to the
// embedding codes of §6.6.
type Embedder interface {
	Embed(ctx context.Context, model string, inputs []string) ([][]float32, *abi.Usage, error)
}

// Scope says who may see a corpus's sources beyond the token grant (the
// application-authorizer role of §6.1, filled by configuration).
type Scope string

const (
	// ScopeCorpus: a token's corpus grant authorizes all current sources.
	ScopeCorpus Scope = "corpus"
	// ScopeSubject: a source is visible only to the subjects recorded
	// when it was indexed (the indexing subject).
	ScopeSubject Scope = "subject"
)

// Ranking selects how hits are ordered.
type Ranking string

const (
	// RankVector orders by cosine similarity alone.
	RankVector Ranking = "vector"
	// RankHybrid fuses the cosine ranking with a BM25 ranking of the
	// same candidates by reciprocal rank fusion (lexical.go).
	RankHybrid Ranking = "hybrid"
)

// Corpus is one configured corpus.
type Corpus struct {
	ID       string
	Identity Identity
	Embedder Embedder
	// ChunkBytes is the host's chunk size for ingestion (128..16384).
	ChunkBytes int
	// MaxChunks and MaxPayloadBytes bound the stored chunks and their
	// text (INDEX_FULL).
	MaxChunks       int
	MaxPayloadBytes int64
	// BatchTexts and BatchBytes bound one embedding call.
	BatchTexts, BatchBytes int
	Scope                  Scope
	Ranking                Ranking
}

// Defaults of §6.5.
const (
	DefaultChunkBytes      = 2048
	DefaultMaxChunks       = 20_000
	DefaultMaxPayloadBytes = 128 << 20
	DefaultBatchTexts      = 32
	DefaultBatchBytes      = 64 << 10
)

// EmbeddingUsage is one embedding call's usage, metered apart from
// generation usage (§6.5) and attributed to the embedding account.
type EmbeddingUsage struct {
	Corpus, ProviderID, AccountID, Model string
	Subject, Operation                   string
	Inputs                               int
	InputTokens                          int64 // 0 when the embedder reported none
}

// Options configure a Service.
type Options struct {
	// Usage receives every successful embedding call's usage (nil: none).
	Usage func(EmbeddingUsage)
	Log   *slog.Logger
	// PDF extracts the pages of PDF documents (nil: pdf-ingestion off).
	PDF PDFExtractor
	// PDFPages bounds a PDF's pages (0: DefaultPDFPages; at most MaxPDFPages).
	PDFPages int
	// PDFAllowEmptyPages is allowEmptyPdfPages (§6.5): pages without text
	// are listed in pages.empty instead of failing with OCR_REQUIRED.
	PDFAllowEmptyPages bool
}

// Service is the retrieval family over one store: corpora, their
// documents in KV, and for each an in-memory matrix rebuilt from the store
// at Open and kept current by Index and Delete.
type Service struct {
	kv      durable.KV
	opts    Options
	corpora map[string]*corpus
	// current re-resolves a credential's principal as the configuration
	// now has it (SetPrincipals); nil: a principal is taken as given.
	current atomic.Pointer[func(credentialDigest string) *runtime.Principal]
}

// SetPrincipals installs the lookup of a credential's current principal by
// its digest (Principal.CredentialDigest), nil when no configured token has
// it any more. The token grant is this host's authorizer, so a reload that
// withdraws a corpus is a revocation: the re-check of a run's evidence
// before each model step and before run.completed (§6.3) asks the current
// grants, not the ones the run started with, and a run whose credential
// lost the corpus (or is gone) fails FORBIDDEN before its next step.
// Without it (or for a principal without a digest) the run's own
// principal is checked.
func (s *Service) SetPrincipals(resolve func(credentialDigest string) *runtime.Principal) {
	if resolve == nil {
		s.current.Store(nil)
		return
	}
	s.current.Store(&resolve)
}

// principalNow is p as the configuration has it now: nil when its
// credential is no longer configured.
func (s *Service) principalNow(p *runtime.Principal) *runtime.Principal {
	f := s.current.Load()
	if f == nil || p == nil || p.CredentialDigest == "" {
		return p
	}
	return (*f)(p.CredentialDigest)
}

type corpus struct {
	Corpus
	identityJSON []byte

	// write serialises the commit phase of index and delete (recheck,
	// store write, memory update), so that chunk-id uniqueness and
	// capacity are decided on a state no one else is changing.
	write sync.Mutex
	mu    sync.RWMutex // guards the fields below
	mat   matrix
	rows  []rowRef
	docs  map[string]*liveDoc
	owner map[string]*liveDoc // chunk id → document
	bytes int64
	lex   *lexIndex
}

type rowRef struct {
	doc *liveDoc
	ord int
}

// liveDoc is one stored document as the index sees it.
type liveDoc struct {
	rec    *docRecord
	kvRev  uint64
	rows   []int    // matrix row of each chunk
	merged []Source // each chunk's source as a hit shows it
	ingest []byte   // the manifest JSON, nil when none
	bytes  int64    // text bytes
	slots  []uint32 // each chunk's lexical slot
	terms  []string // the distinct lexical terms
}

// docRecord is a document's KV value: what the client sent (so its digest
// can be recomputed), who indexed it, and its normalised vectors.
type docRecord struct {
	Source    Source    `json:"source"`
	Chunks    []Chunk   `json:"chunks"`
	Ingestion *Manifest `json:"ingestion,omitempty"`
	Digest    string    `json:"digest"`
	Subjects  []string  `json:"subjects,omitempty"`
	// Text and MediaType are a text or Markdown document's original
	// text as ingested, kept for references (documents.go); empty for
	// documents indexed as chunks, email threads and PDFs.
	Text      string `json:"text,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	// Vectors are the chunks' vectors, little-endian float32, row after row.
	Vectors []byte `json:"vectors"`
}

// Key layout: retrieval/<hex corpus>/identity and
// retrieval/<hex corpus>/doc/<hex source> (KV keys cannot hold ':').
func identityKey(c string) string { return "retrieval/" + hex.EncodeToString([]byte(c)) + "/identity" }
func docPrefix(c string) string   { return "retrieval/" + hex.EncodeToString([]byte(c)) + "/doc/" }
func docKey(c, s string) string   { return docPrefix(c) + hex.EncodeToString([]byte(s)) }

// Open checks every corpus's identity against the one recorded in kv
// (recording it the first time) and loads its documents. A corpus whose
// stored identity differs fails with INDEX_INCOMPATIBLE: vectors of
// another model are never searched or converted.
func Open(ctx context.Context, kv durable.KV, corpora []Corpus, opts Options) (*Service, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{kv: kv, opts: opts, corpora: map[string]*corpus{}}
	for _, c := range corpora {
		c = withDefaults(c)
		id, _ := json.Marshal(c.Identity)
		cp := &corpus{Corpus: c, identityJSON: id, mat: matrix{dim: c.Identity.Dimensions},
			docs: map[string]*liveDoc{}, owner: map[string]*liveDoc{}, lex: newLexIndex()}
		if err := s.checkIdentity(ctx, cp); err != nil {
			return nil, err
		}
		if err := s.load(ctx, cp); err != nil {
			return nil, err
		}
		s.corpora[c.ID] = cp
	}
	return s, nil
}

func withDefaults(c Corpus) Corpus {
	if c.ChunkBytes == 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.MaxChunks == 0 {
		c.MaxChunks = DefaultMaxChunks
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.BatchTexts == 0 {
		c.BatchTexts = DefaultBatchTexts
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.Scope == "" {
		c.Scope = ScopeCorpus
	}
	if c.Ranking == "" {
		c.Ranking = RankHybrid
	}
	c.Identity.Metric = "cosine"
	return c
}

func (s *Service) checkIdentity(ctx context.Context, c *corpus) error {
	e, err := s.kv.Get(ctx, identityKey(c.ID))
	switch {
	case errors.Is(err, durable.ErrNotFound):
		if _, err := s.kv.Create(ctx, identityKey(c.ID), c.identityJSON); err != nil && !errors.Is(err, durable.ErrExists) {
			return fmt.Errorf("retrieval: corpus %s: record identity: %w", c.ID, err)
		} else if err != nil {
			return s.checkIdentity(ctx, c)
		}
		return nil
	case err != nil:
		return fmt.Errorf("retrieval: corpus %s: read identity: %w", c.ID, err)
	}
	if !bytes.Equal(e.Value, c.identityJSON) {
		return failWrap(CodeIndexIncompatible, fmt.Errorf("retrieval: corpus %s: the stored index identity %s differs from the configured %s", c.ID, e.Value, c.identityJSON))
	}
	return nil
}

func (s *Service) load(ctx context.Context, c *corpus) error {
	after := ""
	for {
		page, err := s.kv.List(ctx, docPrefix(c.ID), after, 256)
		if err != nil {
			return fmt.Errorf("retrieval: corpus %s: list documents: %w", c.ID, err)
		}
		for _, e := range page {
			var rec docRecord
			if err := json.Unmarshal(e.Value, &rec); err != nil {
				return fmt.Errorf("retrieval: corpus %s: document %s does not decode: %w", c.ID, e.Key, err)
			}
			vecs, err := rec.vectors(c.Identity.Dimensions)
			if err != nil {
				return fmt.Errorf("retrieval: corpus %s: document %s: %w", c.ID, e.Key, err)
			}
			c.apply(nil, &rec, vecs, e.Revision)
		}
		if len(page) < 256 {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

func (r *docRecord) vectors(dim int) ([][]float32, error) {
	if len(r.Vectors) != len(r.Chunks)*dim*4 {
		return nil, errors.New("vectors do not match the chunks and dimensions")
	}
	out := make([][]float32, len(r.Chunks))
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(r.Vectors[(i*dim+j)*4:]))
		}
		out[i] = v
	}
	return out, nil
}

func packVectors(vecs [][]float32) []byte {
	n := 0
	for _, v := range vecs {
		n += len(v)
	}
	b := make([]byte, 0, n*4)
	for _, v := range vecs {
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}

// apply replaces old (nil: none) by rec in memory. The caller holds
// c.write, or is Open.
func (c *corpus) apply(old *liveDoc, rec *docRecord, vecs [][]float32, kvRev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		c.drop(old)
	}
	if rec == nil {
		return
	}
	d := &liveDoc{rec: rec, kvRev: kvRev, rows: make([]int, len(rec.Chunks)), merged: make([]Source, len(rec.Chunks))}
	if rec.Ingestion != nil {
		d.ingest, _ = json.Marshal(rec.Ingestion)
	}
	var base Location
	if rec.Source.Location != nil {
		base = *rec.Source.Location
	}
	texts := make([]string, len(rec.Chunks))
	for i, ch := range rec.Chunks {
		loc := base.merge(ch.Location)
		loc.DocumentID = rec.Source.ID
		src := rec.Source
		src.Location = &loc
		d.merged[i] = src
		d.rows[i] = c.mat.add(vecs[i])
		c.rows = append(c.rows, rowRef{doc: d, ord: i})
		c.owner[ch.ID] = d
		d.bytes += int64(len(ch.Text))
		texts[i] = ch.Text
	}
	c.bytes += d.bytes + int64(len(rec.Text)) // the kept text is payload too
	c.docs[rec.Source.ID] = d
	c.lex.add(d, texts)
}

// drop removes d from memory; c.mu is held.
func (c *corpus) drop(d *liveDoc) {
	// Remove rows from the highest index down, so a moved row is never
	// one of d's still to be removed... except when it is: handle both.
	for ord := range d.rows {
		i := d.rows[ord]
		moved := c.mat.remove(i)
		last := len(c.rows) - 1
		if moved >= 0 {
			r := c.rows[last]
			c.rows[i] = r
			r.doc.rows[r.ord] = i
		}
		c.rows = c.rows[:last]
	}
	for _, ch := range d.rec.Chunks {
		delete(c.owner, ch.ID)
	}
	c.bytes -= d.bytes + int64(len(d.rec.Text))
	delete(c.docs, d.rec.Source.ID)
	c.lex.remove(d)
}

// visible reports whether subject may see d (the configured authorizer).
func (c *corpus) visible(d *liveDoc, subject string) bool {
	return c.Scope == ScopeCorpus || slices.Contains(d.rec.Subjects, subject)
}

// grant checks the token layer of §6.1 and finds the corpus: FORBIDDEN
// without the grant, CONTEXT_NOT_FOUND for an unknown corpus.
func (s *Service) grant(p *runtime.Principal, op, corpusID string) (*corpus, error) {
	if p == nil || !p.Can("retrieval."+op+":"+corpusID) {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	c, ok := s.corpora[corpusID]
	if !ok {
		return nil, fail(CodeContextNotFound)
	}
	return c, nil
}

// Has reports whether corpus id is configured.
func (s *Service) Has(id string) bool { _, ok := s.corpora[id]; return ok }

// PDF reports whether a PDF extractor is configured.
func (s *Service) PDF() bool { return s.opts.PDF != nil }

// digest is documentSha256 (§6.4): SHA-256 hex of the canonical JSON of
// {source, chunks, ingestion?}.
func digest(src Source, chunks []Chunk, m *Manifest) (string, error) {
	raw, err := json.Marshal(struct {
		Source    Source    `json:"source"`
		Chunks    []Chunk   `json:"chunks"`
		Ingestion *Manifest `json:"ingestion,omitempty"`
	}{src, chunks, m})
	if err != nil {
		return "", err
	}
	canon, err := protocol.Canonical(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// embed embeds texts in batches within the corpus's bounds, checking and
// normalising every vector. before runs before each batch (the
// re-authorization of §6.4).
func (s *Service) embed(ctx context.Context, c *corpus, p *runtime.Principal, op string, texts []string, before func() error) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); {
		end, size := start, 0
		for end < len(texts) && end-start < c.BatchTexts && (end == start || size+len(texts[end]) <= c.BatchBytes) {
			size += len(texts[end])
			end++
		}
		if before != nil {
			if err := before(); err != nil {
				return nil, err
			}
		}
		vecs, usage, err := c.Embedder.Embed(ctx, c.Identity.Model, texts[start:end])
		if err != nil {
			return nil, embedError(err)
		}
		if len(vecs) != end-start {
			return nil, failWrap(CodeInvalidEmbedding, fmt.Errorf("corpus %s: %d vectors for %d texts", c.ID, len(vecs), end-start))
		}
		for _, v := range vecs {
			if err := normalise(v, c.Identity.Dimensions); err != nil {
				return nil, failWrap(CodeInvalidEmbedding, fmt.Errorf("corpus %s: %w", c.ID, err))
			}
		}
		if s.opts.Usage != nil {
			u := EmbeddingUsage{Corpus: c.ID, ProviderID: c.Identity.ProviderID, AccountID: c.Identity.AccountID,
				Model: c.Identity.Model, Operation: op, Inputs: end - start}
			if p != nil {
				u.Subject = p.Subject
			}
			if usage != nil && usage.InputTokens != nil {
				u.InputTokens = *usage.InputTokens
			}
			s.opts.Usage(u)
		}
		out = append(out, vecs...)
		start = end
	}
	return out, nil
}

func normalise(v []float32, dim int) error {
	if len(v) != dim {
		return fmt.Errorf("vector of %d dimensions, want %d", len(v), dim)
	}
	var n float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return errors.New("vector is not finite")
		}
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsInf(n, 0) {
		return errors.New("vector is zero")
	}
	inv := 1 / math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
	return nil
}

// embedError maps an embedder's provider error to §6.6.
func embedError(err error) error {
	pe := protocol.AsPublic(err)
	var code protocol.Code
	switch pe.Code {
	case protocol.CodeCancelled, protocol.CodeRateLimited, protocol.CodeAuthRequired, CodeInvalidEmbedding, CodeEmbeddingFailed:
		return err
	case protocol.CodeProviderAuth:
		code = CodeEmbeddingAuth
	case protocol.CodeProviderError:
		e := failWrap(CodeEmbeddingHTTP, err)
		e.Retryable = pe.Retryable
		return e
	default:
		code = CodeEmbeddingFailed
	}
	return failWrap(code, err)
}
