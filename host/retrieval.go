package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/attachments"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
	"adhost/runtime/wasm"
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
	opts := retrieval.Options{Log: log, Usage: func(u retrieval.EmbeddingUsage) {
		// Embedding usage is its own meter (§6.5), never generation's.
		log.Debug("embedding usage", "corpus", u.Corpus, "embedder", u.ProviderID, "account", u.AccountID,
			"model", u.Model, "subject", u.Subject, "operation", u.Operation, "inputs", u.Inputs, "input_tokens", u.InputTokens)
	}}
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

// retrievalOption is svc as a ServerOptions.Retrieval: nil stays a nil
// interface, so the routes stay unknown.
func retrievalOption(svc *retrieval.Service) RetrievalService {
	if svc == nil {
		return nil
	}
	return svc
}

// cliContextSources gives the selected-context service what [retrieval]
// serves it: the evidence of the `retrieval` run option. Nothing without
// retrieval (a nil *Service must not become a non-nil interface).
func cliContextSources(opts *attachments.Options, retr *retrieval.Service) {
	if retr == nil {
		return
	}
	opts.Evidence = retr
}
