package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// IndexResult is the index and ingest response (§6.4, §6.5).
type IndexResult struct {
	Corpus         string    `json:"corpus"`
	SourceID       string    `json:"sourceId"`
	Revision       string    `json:"revision"`
	DocumentSHA256 string    `json:"documentSha256"`
	Chunks         int       `json:"chunks"`
	Status         string    `json:"status"`
	Ingestion      *Manifest `json:"ingestion,omitempty"`
}

// DeleteResult is the delete response.
type DeleteResult struct {
	Corpus   string `json:"corpus"`
	SourceID string `json:"sourceId"`
	Revision string `json:"revision"`
	Deleted  bool   `json:"deleted"`
}

// Index serves POST /v1/retrieval/index.
func (s *Service) Index(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	req, err := DecodeIndex(body)
	if err != nil {
		return nil, err
	}
	res, err := s.Put(ctx, p, req, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Put indexes one document for p: §6.4's semantics. progress, when set,
// runs after each embedding batch (the ingest idle clock).
func (s *Service) Put(ctx context.Context, p *runtime.Principal, req *IndexRequest, progress func()) (*IndexResult, error) {
	c, err := s.grant(p, "index", req.Corpus)
	if err != nil {
		return nil, err
	}
	src := req.Source
	sum, err := digest(src, req.Chunks, req.Ingestion)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	res := &IndexResult{Corpus: c.ID, SourceID: src.ID, Revision: src.Revision, DocumentSHA256: sum,
		Chunks: len(req.Chunks), Status: "indexed", Ingestion: req.Ingestion}
	prev, err := c.indexable(p.Subject, src, sum)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.rec.Source.Revision == src.Revision {
		res.Status = "unchanged"
		return res, nil
	}
	if err := c.fits(prev, req); err != nil {
		return nil, err
	}
	texts := make([]string, len(req.Chunks))
	for i, ch := range req.Chunks {
		texts[i] = ch.Text
	}
	recheck := func() error {
		if progress != nil {
			progress()
		}
		_, err := c.indexable(p.Subject, src, sum)
		return err
	}
	vecs, err := s.embed(ctx, c, p, "index", texts, recheck)
	if err != nil {
		return nil, err
	}
	rec := &docRecord{Source: src, Chunks: req.Chunks, Ingestion: req.Ingestion, Digest: sum, Vectors: packVectors(vecs),
		Text: req.Text, MediaType: req.MediaType}
	if c.Scope == ScopeSubject {
		rec.Subjects = []string{p.Subject}
	}
	value, err := json.Marshal(rec)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeInternalError, err)
	}

	c.write.Lock()
	defer c.write.Unlock()
	// Re-authorize before the replace; the document must still be the
	// one the embedding started from (compare-and-swap on its digest).
	cur, err := c.indexable(p.Subject, src, sum)
	if err != nil {
		return nil, err
	}
	if cur != prev {
		if cur != nil && cur.rec.Digest == sum {
			res.Status = "unchanged" // a concurrent identical request won
			return res, nil
		}
		return nil, fail(CodeSourceConflict)
	}
	if err := c.fits(prev, req); err != nil {
		return nil, err
	}
	key := docKey(c.ID, src.ID)
	var rev uint64
	if prev == nil {
		rev, err = s.kv.Create(ctx, key, value)
	} else {
		rev, err = s.kv.Update(ctx, key, value, prev.kvRev)
	}
	switch {
	case errors.Is(err, durable.ErrExists), errors.Is(err, durable.ErrRevision):
		return nil, fail(CodeSourceConflict)
	case errors.Is(err, durable.ErrFull), errors.Is(err, durable.ErrTooLarge):
		return nil, failWrap(CodeIndexFull, err)
	case err != nil:
		return nil, storeError(err)
	}
	c.apply(prev, rec, vecs, rev)
	return res, nil
}

// indexable authorizes src for index by subject and returns the stored
// document (nil: none). A stored document subject may not see is
// CONTEXT_NOT_FOUND; the same revision with another digest is
// SOURCE_CONFLICT.
func (c *corpus) indexable(subject string, src Source, sum string) (*liveDoc, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d := c.docs[src.ID]
	if d == nil {
		return nil, nil
	}
	if !c.visible(d, subject) {
		return nil, fail(CodeContextNotFound)
	}
	if d.rec.Source.Revision == src.Revision && d.rec.Digest != sum {
		return nil, fail(CodeSourceConflict)
	}
	return d, nil
}

// fits checks chunk-id uniqueness within the corpus and its capacity,
// counting prev's chunks as gone.
func (c *corpus) fits(prev *liveDoc, req *IndexRequest) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	add := int64(len(req.Text))
	for _, ch := range req.Chunks {
		if o := c.owner[ch.ID]; o != nil && o != prev {
			return fail(CodeChunkConflict)
		}
		add += int64(len(ch.Text))
	}
	rows, bytes := c.mat.rows()+len(req.Chunks), c.bytes+add
	if prev != nil {
		rows -= len(prev.rows)
		bytes -= prev.bytes + int64(len(prev.rec.Text))
	}
	if rows > c.MaxChunks || bytes > c.MaxPayloadBytes {
		return fail(CodeIndexFull)
	}
	return nil
}

// Delete serves POST /v1/retrieval/delete.
func (s *Service) Delete(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	req, err := DecodeDelete(body)
	if err != nil {
		return nil, err
	}
	res, err := s.Remove(ctx, p, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Remove deletes one document's exact revision for p. A source that is
// not stored — or that p may not see, which looks the same — answers
// deleted: false.
func (s *Service) Remove(ctx context.Context, p *runtime.Principal, req *DeleteRequest) (*DeleteResult, error) {
	c, err := s.grant(p, "delete", req.Corpus)
	if err != nil {
		return nil, err
	}
	res := &DeleteResult{Corpus: c.ID, SourceID: req.SourceID, Revision: req.Revision}
	c.write.Lock()
	defer c.write.Unlock()
	c.mu.RLock()
	d := c.docs[req.SourceID]
	c.mu.RUnlock()
	if d == nil || !c.visible(d, p.Subject) {
		return res, nil
	}
	if d.rec.Source.Revision != req.Revision {
		return nil, fail(CodeSourceConflict)
	}
	if err := s.kv.Delete(ctx, docKey(c.ID, req.SourceID), d.kvRev); err != nil {
		if errors.Is(err, durable.ErrRevision) {
			return nil, fail(CodeSourceConflict)
		}
		return nil, storeError(err)
	}
	c.apply(d, nil, nil, 0)
	res.Deleted = true
	return res, nil
}

func storeError(err error) error {
	return protocol.Wrap(protocol.CodeInternalError, fmt.Errorf("retrieval store: %w", err))
}
