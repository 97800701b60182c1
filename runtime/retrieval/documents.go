package retrieval

import (
	"context"
	"slices"
	"strings"

	"adhost/runtime"
	"adhost/runtime/attachments"
)

// References (context-references, wire-context §5) resolve against the
// documents this service stores: adhost runs no application code, so the
// "application resolver" is the retrieval store, and a reference names a
// stored source id and the revision the caller expects.
//
//   - Which documents: those of every corpus the credential may search
//     (retrieval.search), visible to its subject under the corpus's scope —
//     the same two layers as a search. Unknown, deleted and unreadable all
//     answer ErrNoDocument (CONTEXT_NOT_FOUND), so existence never leaks.
//   - Which corpus: source ids are per corpus, a reference names none. The
//     document at the referenced revision wins; otherwise the first readable
//     one in corpus id order answers (and its other revision is
//     CONTEXT_CHANGED).
//   - What text: a text or Markdown document ingested through
//     /v1/retrieval/ingest is served exactly as it was sent (its original
//     text is kept with its chunks, counted in the corpus's payload bound,
//     at most the ingest limit of 1,000,000 characters), with its media
//     type — so result.sources[].sha256 equals the receipt's inputSha256.
//     Any other document (chunks sent to /v1/retrieval/index, an email
//     thread, a PDF) has no original text here: it is served as text/plain,
//     its stored passages in order joined by a blank line. A reference
//     asking for another media type (application/pdf for a PDF) is
//     CONTEXT_CHANGED: the stored form is text.

var _ attachments.DocumentStore = (*Service)(nil)

// Document implements attachments.DocumentStore.
func (s *Service) Document(ctx context.Context, p *runtime.Principal, ref attachments.Reference) (*attachments.Document, error) {
	if p == nil {
		return nil, attachments.ErrNoDocument
	}
	ids := make([]string, 0, len(s.corpora))
	for id := range s.corpora {
		if p.Can("retrieval.search:" + id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var found *docRecord
	for _, id := range ids {
		c := s.corpora[id]
		c.mu.RLock()
		d := c.docs[ref.ID]
		if d != nil && c.visible(d, p.Subject) && (found == nil || d.rec.Source.Revision == ref.Revision) {
			found = d.rec // records are immutable once applied
		}
		c.mu.RUnlock()
		if found != nil && found.Source.Revision == ref.Revision {
			break
		}
	}
	if found == nil {
		return nil, attachments.ErrNoDocument
	}
	return documentOf(found), nil
}

// documentOf is the reference form of a stored document.
func documentOf(rec *docRecord) *attachments.Document {
	d := &attachments.Document{Source: contextSource(rec.Source), MediaType: rec.MediaType, Text: rec.Text}
	if d.Text == "" {
		parts := make([]string, len(rec.Chunks))
		for i, ch := range rec.Chunks {
			parts[i] = ch.Text
		}
		d.Text, d.MediaType = strings.Join(parts, "\n\n"), attachments.TypePlain
	}
	return d
}

// contextSource converts a stored Source to the attachments form (absent
// members stay nil).
func contextSource(s Source) attachments.Source {
	out := attachments.Source{ID: s.ID, Revision: s.Revision}
	str := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	num := func(v int) *int {
		if v == 0 {
			return nil
		}
		return &v
	}
	out.Title, out.URI = str(s.Title), str(s.URI)
	if l := s.Location; l != nil && !l.empty() {
		out.Location = &attachments.Location{
			DocumentID: str(l.DocumentID), ThreadID: str(l.ThreadID), MessageID: str(l.MessageID),
			Page: num(l.Page), PageEnd: num(l.PageEnd), StartLine: num(l.StartLine), EndLine: num(l.EndLine),
			Section: str(l.Section),
		}
	}
	return out
}
