package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"unicode/utf8"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// The `retrieval` run option (§6.3): Service implements runtime.Evidence.
// The engine's context service decodes the option with Plan during
// validation, searches with Retrieve after admission, and re-authorizes
// what was found with the set's Recheck before every model step and
// before run.completed. Nothing here embeds again after the search: a
// recheck compares the evidence with the documents now stored.

var _ runtime.Evidence = (*Service)(nil)

// Plan decodes a run's `retrieval` option strictly (INVALID_RETRIEVAL).
// Without a query the run input is the query, clipped to the query
// bounds (16,384 UTF-16 units, 16 KiB) at a character boundary: the spec
// makes the input the default and a careful client expects a long input
// to run rather than fail, so its head is what is embedded (a choice, not
// upstream-confirmed).
func (s *Service) Plan(raw json.RawMessage, input string) (runtime.EvidencePlan, error) {
	req, err := DecodeRunOption(raw)
	if err != nil {
		return nil, err
	}
	if req.Query == "" {
		req.Query = clipQuery(input)
	}
	return &runPlan{s: s, req: req}, nil
}

// clipQuery bounds a default query to MaxQueryBytes and MaxQueryUnits.
func clipQuery(s string) string {
	if len(s) > MaxQueryBytes {
		s = s[:MaxQueryBytes]
		for s != "" { // drop the bytes of a character cut at the bound
			if r, n := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || n != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	for units(s) > MaxQueryUnits {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

type runPlan struct {
	s   *Service
	req *SearchRequest
}

func (p *runPlan) Corpus() string { return p.req.Corpus }

// Recheck re-authorizes a recorded RetrievalResult (Service.Recheck).
func (p *runPlan) Recheck(ctx context.Context, pr *runtime.Principal, recorded json.RawMessage) error {
	return p.s.Recheck(ctx, pr, recorded)
}
func (p *runPlan) Limit() int { return p.req.Limit }

// Retrieve runs the search for the run's principal: the token grant and
// the authorized map again, the query's embedding and ranking, the
// re-check after the vector read (Find). No hit is NO_RETRIEVAL_EVIDENCE,
// before any generation.
func (p *runPlan) Retrieve(ctx context.Context, exec runtime.ContextExec) (*runtime.EvidenceSet, error) {
	res, err := p.s.Find(ctx, exec.Principal, p.req)
	if err != nil {
		return nil, err
	}
	if len(res.Hits) == 0 {
		return nil, fail(CodeNoEvidence)
	}
	set := &runtime.EvidenceSet{Passages: make([]runtime.Passage, 0, len(res.Hits))}
	for _, h := range res.Hits {
		src := h.Source
		src.ID = h.ChunkID // location.documentId keeps the application's id
		b, err := marshal(src)
		if err != nil {
			return nil, protocol.Wrap(protocol.CodeInternalError, err)
		}
		set.Passages = append(set.Passages, runtime.Passage{ChunkID: h.ChunkID, Revision: h.Source.Revision, Source: b, Text: h.Text})
	}
	if set.Result, err = marshal(res); err != nil {
		return nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	snap := snapshotOf(res)
	set.Recheck = func(ctx context.Context, pr *runtime.Principal) error {
		// The run's principal is the one it started with; the re-check
		// asks the grants as they are now (SetPrincipals): a credential no
		// longer configured is nil, FORBIDDEN in grant.
		return p.s.recheck(p.s.principalNow(pr), snap)
	}
	return set, nil
}

// marshal is compact JSON without HTML escaping (the result encoder
// escapes when its caller asks).
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// snapshot is what a recheck compares: the corpus, its index identity,
// and each hit's document at the revision and digest it came from.
type snapshot struct {
	corpus   string
	identity Identity
	docs     []snapDoc
}

type snapDoc struct {
	id, revision, digest string
}

func snapshotOf(res *Result) *snapshot {
	sn := &snapshot{corpus: res.Corpus, identity: res.Index}
	seen := map[string]bool{}
	for _, h := range res.Hits {
		id := h.Source.ID
		if h.Source.Location != nil && h.Source.Location.DocumentID != "" {
			id = h.Source.Location.DocumentID
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		sn.docs = append(sn.docs, snapDoc{id: id, revision: h.Source.Revision, digest: h.DocumentSHA256})
	}
	return sn
}

// Recheck re-authorizes a recorded RetrievalResult (result.retrieval of a
// completed run) for p without embedding anything: what an idempotent
// replay or a job's event read does before it shows the evidence again
// (§6.3, §2.4). The corpus grant (FORBIDDEN), the corpus (CONTEXT_NOT_FOUND),
// the same index identity (INDEX_INCOMPATIBLE), and each hit's document
// still visible (CONTEXT_NOT_FOUND) at the recorded revision and digest
// (CONTEXT_CHANGED). A record that does not decode is
// CONTEXT_REPLAY_UNAVAILABLE: there is no complete snapshot to check.
func (s *Service) Recheck(ctx context.Context, p *runtime.Principal, recorded json.RawMessage) error {
	var res Result
	if len(recorded) == 0 || json.Unmarshal(recorded, &res) != nil || res.Corpus == "" {
		return &protocol.Error{Code: protocol.CodeContextReplayUnavailable, Message: "The run's retrieval evidence was not recorded completely.", Uncertain: true}
	}
	return s.recheck(p, snapshotOf(&res))
}

func (s *Service) recheck(p *runtime.Principal, sn *snapshot) error {
	c, err := s.grant(p, "search", sn.corpus)
	if err != nil {
		return err
	}
	if c.Identity != sn.identity {
		return fail(CodeIndexIncompatible)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, d := range sn.docs {
		cur := c.docs[d.id]
		if cur == nil || !c.visible(cur, p.Subject) {
			return fail(CodeContextNotFound)
		}
		if cur.rec.Source.Revision != d.revision || cur.rec.Digest != d.digest {
			return fail(CodeContextChanged)
		}
	}
	return nil
}
