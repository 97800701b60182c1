package retrieval

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"adhost/runtime"
)

// Result is RetrievalResult (§6.2).
type Result struct {
	Corpus    string   `json:"corpus"`
	Index     Identity `json:"index"`
	Hits      []Hit    `json:"hits"`
	Truncated bool     `json:"truncated"`
}

// Hit is one passage of a Result.
type Hit struct {
	ChunkID        string          `json:"chunkId"`
	Source         Source          `json:"source"`
	Text           string          `json:"text"`
	Score          float64         `json:"score"`
	DocumentSHA256 string          `json:"documentSha256"`
	Ingestion      json.RawMessage `json:"ingestion,omitempty"`

	doc *liveDoc
}

// Search serves POST /v1/retrieval/search: body is the request (steps
// 9–11 done), the answer the 200 body.
func (s *Service) Search(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	req, err := DecodeSearch(body)
	if err != nil {
		return nil, err
	}
	res, err := s.Find(ctx, p, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Find runs a search for p: the token grant, the authorized map, the
// query's embedding, exact ranking over the current revisions, and the
// re-check of authorization and revisions after the vector read.
func (s *Service) Find(ctx context.Context, p *runtime.Principal, req *SearchRequest) (*Result, error) {
	c, err := s.grant(p, "search", req.Corpus)
	if err != nil {
		return nil, err
	}
	selected, err := c.authorized(p.Subject, req.SourceIDs)
	if err != nil {
		return nil, err
	}
	res := &Result{Corpus: c.ID, Index: c.Identity, Hits: []Hit{}}
	if len(selected) == 0 {
		return res, nil
	}
	vecs, err := s.embed(ctx, c, p, "search", []string{req.Query}, nil)
	if err != nil {
		return nil, err
	}
	res.Hits, res.Truncated = c.rank(vecs[0], req, selected)
	// After the vector read: the sources must still be authorized and at
	// the revision and digest the hits came from.
	kept := res.Hits[:0]
	c.mu.RLock()
	for _, h := range res.Hits {
		if cur := c.docs[h.doc.rec.Source.ID]; cur == h.doc && c.visible(cur, p.Subject) {
			kept = append(kept, h)
		} else {
			res.Truncated = true
		}
	}
	c.mu.RUnlock()
	res.Hits = kept
	return res, nil
}

// authorized returns the documents subject may search: the visible ones,
// or when ids are given exactly those — each must be visible, and an
// invisible source is the same CONTEXT_NOT_FOUND as a missing one.
//
// §6.1 bounds the map an application authorizer returns to 1,000 sources;
// here the authorizer is the configuration and returns no map, so the
// bound is not applied to a whole-corpus search (a corpus of more sources
// would otherwise be unsearchable without naming them). An explicit
// sourceIds list keeps its 1..1000 schema bound (a choice, not upstream-
// confirmed).
func (c *corpus) authorized(subject string, ids []string) (map[*liveDoc]string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[*liveDoc]string{}
	if ids == nil {
		for _, d := range c.docs {
			if c.visible(d, subject) {
				out[d] = d.rec.Source.Revision
			}
		}
		return out, nil
	}
	for _, id := range ids {
		d, ok := c.docs[id]
		if !ok || !c.visible(d, subject) {
			return nil, fail(CodeContextNotFound)
		}
		out[d] = d.rec.Source.Revision
	}
	return out, nil
}

type candidate struct {
	row   int
	score float32
	fused float64
	id    string
}

// rank scores every row against q and returns the hits within the limit
// and byte budget, and whether matches were left out.
func (c *corpus) rank(q []float32, req *SearchRequest, selected map[*liveDoc]string) ([]Hit, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.mat.rows()
	scores := make([]float32, n)
	c.mat.scores(q, scores)
	allowedDoc := func(d *liveDoc) bool {
		rev, ok := selected[d]
		return ok && rev == d.rec.Source.Revision
	}
	minScore := float32(req.MinScore)
	whole := len(selected) == len(c.docs)
	allowed := func(i int) bool {
		return scores[i] >= minScore && (whole || allowedDoc(c.rows[i].doc))
	}
	pool := req.Limit
	if c.Ranking == RankHybrid {
		pool = max(4*req.Limit, 50)
	}
	matches := 0
	vec := topK(n, pool, func(i int) (candidate, bool) {
		if !allowed(i) {
			return candidate{}, false
		}
		matches++
		r := c.rows[i]
		return candidate{row: i, score: scores[i], id: r.doc.rec.Chunks[r.ord].ID}, true
	})
	final := vec
	if c.Ranking == RankHybrid {
		final = c.fuse(vec, req.Query, scores, allowed, pool)
	}
	truncated := matches > req.Limit
	if len(final) > req.Limit {
		final = final[:req.Limit]
	}
	hits := make([]Hit, 0, len(final))
	budget := req.MaxContextBytes
	for _, cd := range final {
		r := c.rows[cd.row]
		ch := r.doc.rec.Chunks[r.ord]
		if len(ch.Text) > budget {
			truncated = true
			continue
		}
		budget -= len(ch.Text)
		hits = append(hits, Hit{ChunkID: ch.ID, Source: r.doc.merged[r.ord], Text: ch.Text,
			Score: float64(cd.score), DocumentSHA256: r.doc.rec.Digest, Ingestion: r.doc.ingest, doc: r.doc})
	}
	return hits, truncated
}

// topK returns the k best of rows 0..n-1 that pick accepts, by score then
// chunk id.
func topK(n, k int, pick func(int) (candidate, bool)) []candidate {
	best := make([]candidate, 0, k+1)
	for i := 0; i < n; i++ {
		cd, ok := pick(i)
		if !ok {
			continue
		}
		if len(best) == k && !better(cd, best[k-1]) {
			continue
		}
		j, _ := slices.BinarySearchFunc(best, cd, func(a, b candidate) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		best = slices.Insert(best, j, cd)
		if len(best) > k {
			best = best[:k]
		}
	}
	return best
}

func better(a, b candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// fuse merges the vector candidates with the BM25 ranking of the allowed
// rows by reciprocal rank fusion: each list adds 1/(60+rank).
func (c *corpus) fuse(vec []candidate, query string, scores []float32, allowed func(int) bool, pool int) []candidate {
	lex := c.lex.score(query, func(slot uint32) bool {
		d := c.lex.slotDoc[slot]
		return allowed(d.rows[c.lex.slotOrd[slot]])
	})
	// The pool best by BM25, ties by chunk id: a bounded insertion, not
	// a sort of every match (a common term matches most chunks).
	lh := topK(len(lex), pool, func(i int) (candidate, bool) {
		e := lex[i]
		d, ord := c.lex.slotDoc[e.slot], c.lex.slotOrd[e.slot]
		return candidate{row: d.rows[ord], score: e.bm, id: d.rec.Chunks[ord].ID}, true
	})
	fused := map[int]*candidate{}
	for rank, cd := range vec {
		cd.fused = 1.0 / float64(rrfK+rank+1)
		fused[cd.row] = &cd
	}
	for rank, h := range lh {
		f := 1.0 / float64(rrfK+rank+1)
		if cd, ok := fused[h.row]; ok {
			cd.fused += f
		} else {
			fused[h.row] = &candidate{row: h.row, score: scores[h.row], fused: f, id: h.id}
		}
	}
	out := make([]candidate, 0, len(fused))
	for _, cd := range fused {
		out = append(out, *cd)
	}
	slices.SortFunc(out, func(a, b candidate) int {
		if a.fused != b.fused {
			return cmp.Compare(b.fused, a.fused)
		}
		return cmp.Compare(a.id, b.id)
	})
	return out
}
