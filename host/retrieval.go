package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"reflect"
	"time"
	"unicode/utf8"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/attachments"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
	"adhost/runtime/wasm"
	"adhost/runtime/wasm/pdfium"
)

// RetrievalService is the retrieval family (wire-extensions §6;
// runtime/retrieval.Service implements it). With ServerOptions.Retrieval
// set, the server routes /v1/retrieval/search|index|delete|ingest;
// otherwise those paths are unknown (404).
//
// Each method takes the raw request body (steps 9–11 done, valid UTF-8
// JSON) and returns the 200 body, or an error whose *protocol.Error code
// and status the server sends.
type RetrievalService interface {
	Search(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Index(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Delete(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Ingest(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
}

// Retrieval features (wire-extensions §1.1 rows 19–22): the first three
// together whenever corpora are configured, pdf-ingestion with an
// extractor.
var retrievalFeatures = []string{"scoped-retrieval", "retrieval-indexing", "document-ingestion"}

const pdfFeature = "pdf-ingestion"

// retrievalRoute returns the endpoint serving op of the retrieval
// service, or nil (no route) when retrieval is off. The request context
// ends when the client disconnects, which cancels an embedding call in
// progress (§6: retrieval endpoints cancel on disconnect).
func (s *Server) retrievalRoute(op func(RetrievalService) func(context.Context, *runtime.Principal, []byte) ([]byte, error)) endpoint {
	if s.retrieval == nil {
		return nil
	}
	call := op(s.retrieval)
	return func(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
		body, ok := s.readPOST(w, r)
		if !ok {
			return
		}
		// §1.2 step 7: not UTF-8 or not JSON is INVALID_REQUEST, before
		// the retrieval schema.
		if !utf8.Valid(body) || !json.Valid(body) {
			s.writeError(w, r, protocol.New(protocol.CodeInvalidRequest))
			return
		}
		// Retrieval calls take a run slot (wire-extensions §1.5), never
		// a queue place: BUSY on a full host or subject.
		release, err := s.engine.AcquireSlot(p.Subject)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		out, err := call(r.Context(), p, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, out)
	}
}

func retrievalSearch(svc RetrievalService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Search
}

func retrievalIndex(svc RetrievalService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Index
}

func retrievalDelete(svc RetrievalService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Delete
}

func retrievalIngest(svc RetrievalService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Ingest
}

// cliRetrieval opens the retrieval service of [retrieval] over the host's
// store, binding each embedding instance to its pinned embedder
// extension. Off (nil, no features) without corpora.
func cliRetrieval(ctx context.Context, cfg *config.File, h *cliHost, log *slog.Logger) (*retrieval.Service, []string, error) {
	if !cfg.RetrievalOn() {
		return nil, nil, nil
	}
	r := cfg.Retrieval
	type bound struct {
		emb *wasm.Embedder
		x   *wasm.Extension
		cfg config.Embedder
	}
	embedders := map[string]bound{}
	var errs []error
	for i, e := range r.Embedders {
		key := fmt.Sprintf("retrieval.embedders[%d]", i)
		x := h.exts[e.Extension]
		if x == nil {
			errs = append(errs, fmt.Errorf("%s.extension: %q is not loaded", key, e.Extension))
			continue
		}
		settings, err := cliSettingsJSON(e.Settings)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%v", key, err))
			continue
		}
		emb, err := x.Embedder(wasm.InstanceConfig{ID: e.ID, Settings: settings, Secrets: cliCtxSecrets(cliSecretFuncs(e.Secrets))})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", key, err))
			continue
		}
		embedders[e.ID] = bound{emb: emb, x: x, cfg: e}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	var corpora []retrieval.Corpus
	for id, c := range r.Corpora {
		b := embedders[c.Embedder]
		m := b.x.Manifest()
		auth := "none"
		if m.AuthMode != "" && m.AuthMode != "none" {
			auth = "api-key"
		}
		corpora = append(corpora, retrieval.Corpus{
			ID: id,
			Identity: retrieval.Identity{ProviderID: c.Embedder, Vendor: m.Vendor, AccountID: b.cfg.AccountID,
				AuthMode: auth, Model: c.Model, Dimensions: c.Dimensions, Metric: "cosine", Version: c.Version},
			Embedder:   b.emb,
			ChunkBytes: c.ChunkBytes, MaxChunks: c.MaxChunks, MaxPayloadBytes: c.MaxPayloadBytes,
			BatchTexts: c.BatchTexts, BatchBytes: c.BatchBytes,
			Scope: retrieval.Scope(c.Scope), Ranking: retrieval.Ranking(c.Ranking),
		})
	}
	// The engine (and so the host id of usage records) is made after
	// retrieval, which it takes as its evidence source: read the id when a
	// record is made, by which time the engine exists.
	hostID := func() string {
		if h.engine == nil {
			return ""
		}
		return h.engine.HostID()
	}
	opts := retrieval.Options{Log: log, Usage: cliEmbeddingUsage(h.store, hostID, log)}
	if r.PDF {
		x, err := cliPDFExtractor(ctx, cfg, log)
		if err != nil {
			return nil, nil, err
		}
		opts.PDF, opts.PDFPages, opts.PDFAllowEmptyPages = x, r.PDFMaxPages, r.PDFAllowEmptyPages
	}
	svc, err := retrieval.Open(ctx, h.store, corpora, opts)
	if err != nil {
		if protocol.CodeOf(err) == retrieval.CodeIndexIncompatible {
			return nil, nil, fmt.Errorf("retrieval.corpora: INDEX_INCOMPATIBLE: %v (the stored vectors were made with another identity; delete the corpus's documents or restore its settings)", errors.Unwrap(err))
		}
		return nil, nil, err
	}
	features := retrievalFeatures
	if svc.PDF() {
		features = append(features[:len(features):len(features)], pdfFeature)
	}
	return svc, features, nil
}

// retrievalReloadCheck refuses a reload that changes or removes the pin
// of an extension a [[retrieval.embedders]] entry uses. [retrieval] is
// opened once (a change to it needs a restart) and its service holds the
// embedders' instances; a reload would retire the old extension under
// it, and every later embedding call would fail.
func retrievalReloadCheck(old, cur *config.File) error {
	if old.Retrieval == nil {
		return nil
	}
	for i, e := range old.Retrieval.Embedders {
		if !reflect.DeepEqual(extensionPin(old, e.Extension), extensionPin(cur, e.Extension)) {
			return fmt.Errorf("extension %s serves retrieval.embedders[%d] (%q): changing or removing its pin needs a restart", e.Extension, i, e.ID)
		}
	}
	return nil
}

// cliEmbeddingUsage meters embedding calls on their own (§6.5): each
// successful call becomes an EmbeddingUsageRecord in the store, under the
// embedding account, apart from the generation usage records (which it
// never touches). A record the store refuses is logged without content;
// the retrieval call it belongs to has already succeeded and stands.
func cliEmbeddingUsage(sink runtime.EmbeddingUsageSink, hostID func() string, log *slog.Logger) func(retrieval.EmbeddingUsage) {
	return func(u retrieval.EmbeddingUsage) {
		rec := &runtime.EmbeddingUsageRecord{
			Schema: runtime.EmbeddingUsageSchema, EventID: runtime.NewID(), HostID: hostID(),
			AccountID: u.AccountID, Subject: u.Subject, Provider: u.ProviderID, Model: u.Model,
			Corpus: u.Corpus, Operation: u.Operation, Inputs: u.Inputs,
			RecordedAt: time.Now().UTC().Format(time.RFC3339Nano),
		}
		if u.InputTokens > 0 {
			n := u.InputTokens
			rec.InputTokens = &n
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := sink.RecordEmbeddingUsage(ctx, rec); err != nil {
			log.Warn("embedding usage record not written", "event_id", rec.EventID, "corpus", u.Corpus, "err", err)
		}
	}
}

// cliPDFExtractor is [retrieval] pdf = true: PDFium in WebAssembly,
// compiled on the first PDF (not at start, so a host that never ingests
// one pays nothing) into the store's compilation cache beside the
// extensions' (~5 s cold, ~0.15 s warm). It is released when serve ends.
func cliPDFExtractor(ctx context.Context, cfg *config.File, log *slog.Logger) (*pdfium.Extractor, error) {
	r := cfg.Retrieval
	x, err := pdfium.New(pdfium.Options{
		Workers: r.PDFWorkers, MemoryMiB: r.PDFMemoryMiB, Timeout: time.Duration(r.PDFTimeoutMs) * time.Millisecond,
		CacheDir: filepath.Join(cfg.Store.Path, "wasm-cache"), Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("retrieval.pdf: %v", err)
	}
	context.AfterFunc(ctx, func() { _ = x.Close() })
	return x, nil
}

// retrievalOption is svc as a ServerOptions.Retrieval: nil stays a nil
// interface, so the routes stay unknown.
func retrievalOption(svc *retrieval.Service) RetrievalService {
	if svc == nil {
		return nil
	}
	return svc
}

// cliContextSources gives the selected-context service what [retrieval]
// serves it: the evidence of the `retrieval` run option and the stored
// documents references name. Nothing without
// retrieval (a nil *Service must not become a non-nil interface).
func cliContextSources(opts *attachments.Options, retr *retrieval.Service) {
	if retr == nil {
		return
	}
	opts.Evidence = retr
	// References resolve against the documents retrieval stores
	// (runtime/retrieval/documents.go): context-references.
	opts.Resolver = attachments.StoreResolver{Docs: retr}
}
