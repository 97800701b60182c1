package config

import (
	"fmt"
	"regexp"
)

// Retrieval is [retrieval]: the retrieval family (wire-extensions §6).
// Absent, or with no corpora: the feature is off and not advertised.
//
//	[retrieval]
//	pdf = true                       # pdf-ingestion through the sandboxed extractor
//	pdf_max_pages = 200              # 1..1000 pages per PDF
//	pdf_workers = 2                  # 1..16 PDFium instances at once
//	pdf_memory_mib = 256             # 16..2048 MiB of memory per instance
//	pdf_timeout_ms = 30000           # 1..600000 ms per document
//	pdf_allow_empty_pages = false    # list pages without text instead of OCR_REQUIRED
//
//	[[retrieval.embedders]]          # an embedding instance of an embedder extension
//	id = "local-hashing"
//	extension = "local-hashing@1.0.0"
//	account_id = "local"             # the embedding account, apart from generation's
//	settings = {}                    # the manifest's settings schema checks them
//	secrets = {}                     # credential slots, as for [[providers]]
//
//	[retrieval.corpora.docs]         # the table key is the corpus id
//	embedder = "local-hashing"
//	model = "hash-ngram-256"
//	dimensions = 256
//	version = "docs-v1"              # the index version of the identity
//	chunk_bytes = 2048               # 128..16384
//	max_chunks = 20000               # 1..1,000,000
//	max_payload_bytes = 134217728    # up to 1 GiB
//	batch_texts = 32                 # 1..256 texts per embedding call
//	batch_bytes = 65536              # 1..1 MiB per embedding call
//	scope = "corpus"                 # or "subject": sources visible to their indexer only
//	ranking = "hybrid"               # or "vector"
//
// Tokens reach a corpus through [tokens.grants] retrieval = { search =
// ["docs"], index = […], delete = […] }.
type Retrieval struct {
	PDF          bool `toml:"pdf"`
	PDFMaxPages  int  `toml:"pdf_max_pages"`
	PDFWorkers   int  `toml:"pdf_workers"`
	PDFMemoryMiB int  `toml:"pdf_memory_mib"`
	PDFTimeoutMs int  `toml:"pdf_timeout_ms"`
	// PDFAllowEmptyPages is §6.5's allowEmptyPdfPages: a page without
	// text (a blank or scanned page) is listed in pages.empty and skipped
	// instead of failing the document with OCR_REQUIRED.
	PDFAllowEmptyPages bool                       `toml:"pdf_allow_empty_pages"`
	Embedders          []Embedder                 `toml:"embedders"`
	Corpora            map[string]RetrievalCorpus `toml:"corpora"`
}

// Embedder is one [[retrieval.embedders]] instance.
type Embedder struct {
	ID        string               `toml:"id"`
	Extension string               `toml:"extension"`
	AccountID string               `toml:"account_id"`
	Settings  map[string]any       `toml:"settings"`
	Secrets   map[string]SecretRef `toml:"secrets"`
}

// RetrievalCorpus is one [retrieval.corpora.ID] table.
type RetrievalCorpus struct {
	Embedder        string `toml:"embedder"`
	Model           string `toml:"model"`
	Dimensions      int    `toml:"dimensions"`
	Version         string `toml:"version"`
	ChunkBytes      int    `toml:"chunk_bytes"`
	MaxChunks       int    `toml:"max_chunks"`
	MaxPayloadBytes int64  `toml:"max_payload_bytes"`
	BatchTexts      int    `toml:"batch_texts"`
	BatchBytes      int    `toml:"batch_bytes"`
	Scope           string `toml:"scope"`
	Ranking         string `toml:"ranking"`
}

// Bounds of [retrieval] (wire-extensions §6.5).
const (
	MaxCorpora             = 1000
	MaxCorpusChunks        = 1_000_000
	MaxCorpusPayloadBytes  = 1 << 30
	MaxEmbeddingBatchTexts = 256
	MaxEmbeddingBatchBytes = 1 << 20
	MinChunkBytes          = 128
	MaxChunkBytes          = 16_384
	MaxEmbeddingDimensions = 4096
	MaxPDFPages            = 1000
	MaxPDFWorkers          = 16
	MinPDFMemoryMiB        = 16
	MaxPDFMemoryMiB        = 2048
	MaxPDFTimeoutMs        = 600_000
)

var retrievalIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$`)

// resolveRetrievalPaths makes the embedders' secret files relative to
// host.toml's directory, as the providers' are: a key file beside
// host.toml must not depend on the directory serve was started from.
func (f *File) resolveRetrievalPaths(res func(*string)) {
	if f.Retrieval == nil {
		return
	}
	for i := range f.Retrieval.Embedders {
		for k, s := range f.Retrieval.Embedders[i].Secrets {
			res(&s.File)
			f.Retrieval.Embedders[i].Secrets[k] = s
		}
	}
}

// RetrievalOn reports whether at least one corpus is configured.
func (f *File) RetrievalOn() bool { return f.Retrieval != nil && len(f.Retrieval.Corpora) > 0 }

func (f *File) hasCorpus(id string) bool {
	if f.Retrieval == nil {
		return false
	}
	_, ok := f.Retrieval.Corpora[id]
	return ok
}

// EmbedderByID returns the [[retrieval.embedders]] entry id, or nil.
func (r *Retrieval) EmbedderByID(id string) *Embedder {
	for i := range r.Embedders {
		if r.Embedders[i].ID == id {
			return &r.Embedders[i]
		}
	}
	return nil
}

func (f *File) validateRetrieval(p *problems) {
	r := f.Retrieval
	if r == nil {
		return // grants of a feature that is off are ignored, as for jobs
	}
	// A grant naming a corpus the host does not serve would never work:
	// say so at load rather than answer FORBIDDEN later.
	for i, t := range f.Tokens {
		g := t.Grants.Retrieval
		if g == nil {
			continue
		}
		for _, op := range []struct {
			k   string
			ids []string
		}{{"search", g.Search}, {"index", g.Index}, {"delete", g.Delete}} {
			for j, id := range op.ids {
				if !f.hasCorpus(id) {
					p.add(fmt.Sprintf("tokens[%d].grants.retrieval.%s[%d]", i, op.k, j), "%q is not a configured corpus ([retrieval.corpora])", id)
				}
			}
		}
	}
	if _, set := f.pos["retrieval.pdf_allow_empty_pages"]; set && !r.PDF {
		p.add("retrieval.pdf_allow_empty_pages", "set, but pdf-ingestion is off (pdf = true enables it)")
	}
	if r.PDF && len(r.Corpora) == 0 {
		p.add("retrieval.pdf", "pdf-ingestion needs a corpus to ingest into ([retrieval.corpora.ID])")
	}
	// The PDF extractor's bounds (§6.5: the host can lower the page
	// bound, never raise it). Set without pdf = true they would be
	// ignored, which the operator should hear about.
	for _, b := range []struct {
		k      string
		v      int
		lo, hi int
	}{{"pdf_max_pages", r.PDFMaxPages, 1, MaxPDFPages}, {"pdf_workers", r.PDFWorkers, 1, MaxPDFWorkers},
		{"pdf_memory_mib", r.PDFMemoryMiB, MinPDFMemoryMiB, MaxPDFMemoryMiB}, {"pdf_timeout_ms", r.PDFTimeoutMs, 1, MaxPDFTimeoutMs}} {
		_, set := f.pos["retrieval."+b.k]
		switch {
		case set && !r.PDF:
			p.add("retrieval."+b.k, "set, but pdf-ingestion is off (pdf = true enables it)")
		case (set || b.v != 0) && (b.v < b.lo || b.v > b.hi):
			p.add("retrieval."+b.k, "%d out of range %d..%d", b.v, b.lo, b.hi)
		}
	}
	ids := map[string]int{}
	for i, e := range r.Embedders {
		key := fmt.Sprintf("retrieval.embedders[%d]", i)
		if !idPattern.MatchString(e.ID) {
			p.add(key+".id", "%q is missing or does not match %s", e.ID, idPattern)
		} else if j, dup := ids[e.ID]; dup {
			p.add(key+".id", "duplicate embedder id %q (also retrieval.embedders[%d])", e.ID, j)
		} else {
			ids[e.ID] = i
		}
		if e.Extension == "" {
			p.add(key+".extension", "required (\"id@version\" of a pinned [[extensions]] entry)")
		} else if f.ExtensionByRef(e.Extension) == nil {
			p.add(key+".extension", "%q is not a pinned extension (pinned: %s)", e.Extension, quoteList(f.refs()))
		}
		if !idPattern.MatchString(e.AccountID) {
			p.add(key+".account_id", "%q is missing or does not match %s", e.AccountID, idPattern)
		}
		for _, slot := range sortedKeys(e.Secrets) {
			sk := key + ".secrets." + slot
			if !slotPattern.MatchString(slot) {
				p.add(sk, "invalid credential slot name")
			}
			e.Secrets[slot].validate(p, sk)
		}
	}
	if len(r.Corpora) > MaxCorpora {
		p.add("retrieval.corpora", "%d corpora, at most %d", len(r.Corpora), MaxCorpora)
	}
	for _, id := range sortedKeys(r.Corpora) {
		c := r.Corpora[id]
		key := "retrieval.corpora." + id
		set := func(k string) bool { _, ok := f.pos[key+"."+k]; return ok }
		between := func(k string, v, lo, hi int64) {
			if (set(k) || v != 0) && (v < lo || v > hi) {
				p.add(key+"."+k, "%d out of range %d..%d", v, lo, hi)
			}
		}
		if !retrievalIDPattern.MatchString(id) {
			p.add(key, "%q is not a corpus id (%s)", id, retrievalIDPattern)
		}
		if c.Embedder == "" {
			p.add(key+".embedder", "required: the id of a [[retrieval.embedders]] entry")
		} else if r.EmbedderByID(c.Embedder) == nil {
			p.add(key+".embedder", "%q is not a [[retrieval.embedders]] id", c.Embedder)
		}
		if !modelPattern.MatchString(c.Model) {
			p.add(key+".model", "%q is missing or does not match %s", c.Model, modelPattern)
		}
		if c.Dimensions < 1 || c.Dimensions > MaxEmbeddingDimensions {
			p.add(key+".dimensions", "%d out of range 1..%d (required)", c.Dimensions, MaxEmbeddingDimensions)
		}
		if !retrievalIDPattern.MatchString(c.Version) {
			p.add(key+".version", "%q is missing or not a RetrievalId (the index version)", c.Version)
		}
		between("chunk_bytes", int64(c.ChunkBytes), MinChunkBytes, MaxChunkBytes)
		between("max_chunks", int64(c.MaxChunks), 1, MaxCorpusChunks)
		between("max_payload_bytes", c.MaxPayloadBytes, 1, MaxCorpusPayloadBytes)
		between("batch_texts", int64(c.BatchTexts), 1, MaxEmbeddingBatchTexts)
		between("batch_bytes", int64(c.BatchBytes), 1, MaxEmbeddingBatchBytes)
		if c.Scope != "" && c.Scope != "corpus" && c.Scope != "subject" {
			p.add(key+".scope", "%q is not one of corpus, subject", c.Scope)
		}
		if c.Ranking != "" && c.Ranking != "hybrid" && c.Ranking != "vector" {
			p.add(key+".ranking", "%q is not one of hybrid, vector", c.Ranking)
		}
	}
}
