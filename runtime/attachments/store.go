package attachments

import (
	"context"
	"errors"
	"time"

	"adhost/runtime"
)

// References resolve against documents the host already stores
// (context-references): adhost runs no application code in process, so
// the "application resolver" of wire-context §5 is the host's own
// document store — what retrieval ingestion keeps. A reference names a
// stored source id and the exact revision the caller expects; the store
// answers only for subjects allowed to read the document.

// ErrNoDocument is a DocumentStore's answer for a document that does not
// exist or that the subject may not read (the same answer, so existence
// never leaks across subjects).
var ErrNoDocument = errors.New("attachments: no such document")

// Document is one stored document's current revision.
type Document struct {
	Source    Source
	MediaType string // text/plain or text/markdown: stored documents are text
	Text      string
	// ExpiresAt, when set, is when the content stops being usable.
	ExpiresAt *time.Time
}

// DocumentStore is the small interface references need from whatever
// stores documents (runtime/retrieval's ingestion, through the host).
type DocumentStore interface {
	// Document returns the current revision of the document ref names
	// that p may read, or ErrNoDocument. Where several stored documents
	// could answer (one per corpus), the one at ref.Revision wins. p is
	// the run's credential: its grants and subject decide, never the
	// request.
	Document(ctx context.Context, p *runtime.Principal, ref Reference) (*Document, error)
}

// StoreResolver resolves references against a DocumentStore: unknown or
// unreadable → CONTEXT_NOT_FOUND; a stored revision or media type other
// than the reference's → CONTEXT_CHANGED (a revision is immutable, so a
// newer one means the referenced content is gone); a store failure →
// CONTEXT_UNAVAILABLE.
type StoreResolver struct {
	Docs DocumentStore
}

var _ Resolver = StoreResolver{}

// Resolve implements Resolver.
func (r StoreResolver) Resolve(ctx context.Context, ref Reference, exec runtime.ContextExec) (*Lease, error) {
	if exec.Principal == nil {
		return nil, fail(CodeContextNotFound)
	}
	d, err := r.Docs.Document(ctx, exec.Principal, ref)
	switch {
	case errors.Is(err, ErrNoDocument):
		return nil, fail(CodeContextNotFound)
	case err != nil:
		return nil, err // CONTEXT_UNAVAILABLE, cause kept private
	}
	if d.Source.Revision != ref.Revision || d.MediaType != ref.MediaType {
		return nil, fail(CodeContextChanged)
	}
	return &Lease{
		Item:      Item{Type: "text", MediaType: d.MediaType, Text: d.Text, Source: d.Source},
		ExpiresAt: d.ExpiresAt,
	}, nil
}
