package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// MaxBodyBytes bounds a request body (wire-core §1.6).
const MaxBodyBytes = 1_000_000

// pathHealth is answered at step 4 of §1.2, before authentication; every
// other endpoint is in the route table (routes).
const pathHealth = "/health"

// Header values shared by every response. Assigned as fresh one-element
// slices' backing arrays are never appended to in place (cap == len).
var (
	valVersion      = []string{protocol.Version}
	valNoStore      = []string{"no-store"}
	valNosniff      = []string{"nosniff"}
	valHSTS         = []string{"max-age=31536000"}
	valJSON         = []string{"application/json; charset=utf-8"}
	valEventStream  = []string{"text/event-stream; charset=utf-8"}
	valNo           = []string{"no"}
	valExpose       = []string{"AgenticDriver-Version"}
	valAllowMethods = []string{"GET, POST, OPTIONS"}
	valAllowHeaders = []string{"Authorization, Content-Type, Accept, AgenticDriver-Version, AgenticDriver-Accept-Optional-Events"}
)

var healthBody = []byte(`{"status":"ok","protocol":"` + protocol.HealthProto + `"}`)

// ServeHTTP is the request pipeline of wire-core §1.2, step by step; the
// first failing step answers and stops.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The access line and host record of every request (metrics.go).
	ow := s.observe(w)
	defer s.observed(ow, r, time.Now())
	w = ow

	// 1. Headers present on every response.
	h := w.Header()
	h["Agenticdriver-Version"] = valVersion
	h["Cache-Control"] = valNoStore
	h["X-Content-Type-Options"] = valNosniff
	if s.tls.Load() {
		h["Strict-Transport-Security"] = valHSTS
	}

	// 2. Host state.
	switch s.state.Load() {
	case stateStarting:
		s.writeError(w, r, protocol.New(protocol.CodeHostStarting))
		return
	case stateShuttingDown:
		s.writeError(w, r, protocol.New(protocol.CodeHostShuttingDown))
		return
	}

	// 3. Origin and CORS, on every path.
	if origins, ok := r.Header["Origin"]; ok {
		if len(origins) != 1 || !s.origins[origins[0]] {
			s.writeError(w, r, protocol.New(protocol.CodeOriginDenied))
			return
		}
		h["Access-Control-Allow-Origin"] = []string{origins[0]}
		h.Add("Vary", "Origin")
		h["Access-Control-Expose-Headers"] = valExpose
		if r.Method == http.MethodOptions {
			h["Access-Control-Allow-Methods"] = valAllowMethods
			h["Access-Control-Allow-Headers"] = valAllowHeaders
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}

	// 4. Liveness, without authentication.
	if r.Method == http.MethodGet && r.RequestURI == pathHealth {
		s.writeJSON(w, http.StatusOK, healthBody)
		return
	}

	// 5. Bearer authentication.
	p := s.authenticate(r)
	if p == nil {
		s.writeError(w, r, protocol.New(protocol.CodeUnauthorized))
		return
	}

	// 6. Version negotiation: absent, or exactly one line "1.0".
	if v, ok := r.Header["Agenticdriver-Version"]; ok && (len(v) != 1 || v[0] != protocol.Version) {
		s.writeError(w, r, protocol.New(protocol.CodeUnsupportedProtocolVersion))
		return
	}

	// 7–8. Route and method, on the exact raw target (routes). Only
	// here, after authentication and version negotiation, does a request
	// learn whether its path exists.
	s.dispatch(w, r, p)
}

// routes is the endpoint table of wire-core §1.1, steps 7–8 of §1.2: one
// line per endpoint, its method and its raw request target exactly as a
// client must send it, query included. An extension feature adds its lines
// when it is implemented and advertised; until then its paths are unknown
// (404 NOT_FOUND), as is every method or target not listed.
func (s *Server) routes() []route {
	return []route{
		{http.MethodGet, "/v1/protocol", s.serveProtocol},
		{http.MethodGet, "/v1/providers", s.serveProvidersCached},
		{http.MethodGet, "/v1/providers?refresh=true", s.serveProvidersRefresh},
		{http.MethodPost, "/v1/runs", s.serveRun},
		{http.MethodGet, StatusPath, s.serveStatus},
		{http.MethodPost, "/v1/sessions/create", s.sessionRoute(sessionCreate)},
		{http.MethodPost, "/v1/sessions/read", s.sessionRoute(sessionRead)},
		{http.MethodPost, "/v1/sessions/delete", s.sessionRoute(sessionDelete)},
		{http.MethodPost, "/v1/jobs/submit", s.jobRoute(s.jobSubmit)},
		{http.MethodPost, "/v1/jobs/read", s.jobRoute(s.jobRead)},
		{http.MethodPost, "/v1/jobs/cancel", s.jobRoute(s.jobCancel)},
		{http.MethodPost, "/v1/jobs/events", s.jobRoute(s.jobEvents)},
		{http.MethodPost, "/v1/retrieval/search", s.retrievalRoute(retrievalSearch)},
		{http.MethodPost, "/v1/retrieval/index", s.retrievalRoute(retrievalIndex)},
		{http.MethodPost, "/v1/retrieval/delete", s.retrievalRoute(retrievalDelete)},
		{http.MethodPost, "/v1/retrieval/ingest", s.retrievalRoute(retrievalIngest)},
		{http.MethodGet, MetricsPath, s.metricsRoute()},
		{http.MethodPost, "/v1/approvals/decisions", s.approvalRoute()},
		{http.MethodPost, "/v1/tool-executions/progress", s.toolExecutionRoute(true)},
		{http.MethodPost, "/v1/tool-executions/results", s.toolExecutionRoute(false)},
	}
}

// route is one line of the table.
type route struct {
	method string
	target string // the raw request target: origin-form path, then "?query" if any
	serve  endpoint
}

// endpoint serves a routed request from step 9 of §1.2 on, for the
// principal that steps 5–6 authenticated.
type endpoint func(w http.ResponseWriter, r *http.Request, p *runtime.Principal)

// ServeHTTP only lets mux hold an endpoint: the way in is dispatch, which
// has the principal. A router reached any other way would have skipped
// steps 1–6 (authentication among them), so it fails closed.
func (endpoint) ServeHTTP(http.ResponseWriter, *http.Request) {
	panic("host: an endpoint was served outside the request pipeline")
}

// newRouter builds the gorilla/mux router of a route table. A route
// matches when the raw request target is byte for byte its target
// (exactTarget: §1.1's rule, query included, which mux's parsed view of the
// URL cannot express — it would accept "?refresh=true&x=1", a bare "?", or
// an absolute-form target whose path looks right) and the method is its
// method. There is no Path matcher: on literal paths it would only re-check
// what exactTarget decided, with two regexp runs per request. SkipClean and
// UseEncodedPath keep mux itself from ever cleaning (a 301 for "//" or
// "..") or decoding a path, should a Path route or ServeHTTP be added.
// Unmatched requests, wrong method included, get notFound: §1.1 answers
// both with 404 NOT_FOUND (so no 405 and no Allow header).
func newRouter(routes []route, notFound http.Handler) *mux.Router {
	rt := mux.NewRouter().SkipClean(true).UseEncodedPath()
	rt.NotFoundHandler = notFound
	rt.MethodNotAllowedHandler = notFound
	for _, e := range routes {
		if e.serve == nil {
			continue // a feature that is off: its path stays unknown
		}
		if !strings.HasPrefix(e.target, "/") {
			panic(fmt.Sprintf("host: route %s %q: not an origin-form target", e.method, e.target))
		}
		rt.NewRoute().MatcherFunc(exactTarget(e.target)).Methods(e.method).Handler(e.serve)
	}
	return rt
}

// exactTarget matches the raw request target of wire-core §1.1 exactly.
func exactTarget(target string) mux.MatcherFunc {
	return func(r *http.Request, _ *mux.RouteMatch) bool { return r.RequestURI == target }
}

// dispatch is steps 7–8: it asks the router for the handler and calls it.
// It calls Router.Match rather than Router.ServeHTTP: ServeHTTP copies the
// request twice to put the (always empty) path variables and the matched
// route into its context, and the principal would need a third copy; that
// is most of mux's cost per request (host/RATIONALE.md).
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
	switch h := lookup(s.router, r).(type) {
	case endpoint:
		h(w, r, p)
	default:
		h.ServeHTTP(w, r)
	}
}

// lookup returns the handler of r's route, or the router's NotFoundHandler
// (both fallbacks are set, so Match always answers).
func lookup(rt *mux.Router, r *http.Request) http.Handler {
	var m mux.RouteMatch
	rt.Match(r, &m)
	return m.Handler
}

// notFound is the router's answer for an unknown target or method.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, protocol.New(protocol.CodeNotFound))
}

func (s *Server) serveProvidersCached(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
	s.serveProviders(w, r, p, false)
}

func (s *Server) serveProvidersRefresh(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
	s.serveProviders(w, r, p, true)
}

type protocolDoc struct {
	Protocol          string   `json:"protocol"`
	Version           string   `json:"version"`
	SupportedVersions []string `json:"supportedVersions"`
	Features          []string `json:"features"`
}

// featureOrder is the upstream order of /v1/protocol features
// (wire-extensions §1.1); clients give order no meaning, but the host keeps
// it.
var featureOrder = []string{
	"json-results", "client-pairing", "provider-management", "provider-setup", "provider-runtimes",
	"durable-jobs", "conversation-sessions", "application-tools", "interactive-approvals",
	"event-stream", "cancel-on-disconnect", "optional-idle-timeout", "required-capabilities",
	"optional-events", "provider-discovery", "context-inputs", "draft-artifacts", "context-references",
	"scoped-retrieval", "retrieval-indexing", "document-ingestion", "pdf-ingestion", "idempotency",
}

// features are the engine's features plus the configured extension
// features (ServerOptions.Features), in featureOrder.
func (s *Server) features() []string {
	have := map[string]bool{}
	for _, f := range s.engine.Features() {
		have[f] = true
	}
	for _, f := range s.extraFeatures {
		have[f] = true
	}
	out := make([]string, 0, len(have))
	for _, f := range featureOrder {
		if have[f] {
			out = append(out, f)
		}
	}
	return out
}

func (s *Server) serveProtocol(w http.ResponseWriter, _ *http.Request, _ *runtime.Principal) {
	features := s.features()
	b, _ := json.Marshal(protocolDoc{
		Protocol:          protocol.Name,
		Version:           protocol.Version,
		SupportedVersions: []string{protocol.Version},
		Features:          features,
	})
	s.writeJSON(w, http.StatusOK, b)
}

// readPOST is steps 9–11 of every POST endpoint: the JSON content type,
// identity encoding and the body bound, then the body itself. On failure
// it has answered and returns ok false. UTF-8 and the schema are the
// endpoint's own decoder's business (steps 12–13).
func (s *Server) readPOST(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	// 9. Content-Type.
	if ct := r.Header["Content-Type"]; len(ct) != 1 || !isJSONContentType(ct[0]) {
		s.writeError(w, r, protocol.New(protocol.CodeInvalidRequest))
		return nil, false
	}
	// 10. Content-Encoding: absent or exactly identity.
	if ce, ok := r.Header["Content-Encoding"]; ok && (len(ce) != 1 || ce[0] != "identity") {
		s.writeError(w, r, protocol.New(protocol.CodeInvalidRequest))
		return nil, false
	}
	// 11. Body bound, before reading when the length is declared.
	if r.ContentLength > MaxBodyBytes {
		s.writeError(w, r, protocol.New(protocol.CodeBodyTooLarge))
		return nil, false
	}
	body, tooLarge, err := readBody(r)
	if tooLarge {
		s.writeError(w, r, protocol.New(protocol.CodeBodyTooLarge))
		return nil, false
	}
	if err != nil {
		s.writeError(w, r, protocol.Wrap(protocol.CodeInvalidRequest, err))
		return nil, false
	}
	return body, true
}

// s.runDecoding accepts the extension members this host implements. With
// sessions off, `session` still decodes and the engine answers
// SESSIONS_UNAVAILABLE, as wire-core §3.3 check 1 says; `approvals` and
// `applicationTools` decode only when their feature is on, so a host
// without them rejects the fields as unknown (wire-extensions §4.1).

// serveRun is POST /v1/runs from step 9 on.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
	body, ok := s.readPOST(w, r)
	if !ok {
		return
	}
	// The request is in: lift the 30 s read bound so it cannot cut off a
	// run that outlives it (the server's background read watches for the
	// client going away).
	_ = http.NewResponseController(w).SetReadDeadline(noDeadline)

	// 12–13. UTF-8 (the decoder checks it before anything else) and strict
	// decoding; the engine does the semantic checks.
	req, err := s.runDecoding.Decode(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mode := runtime.ModeJSON
	if acceptsEventStream(r.Header["Accept"]) {
		mode = runtime.ModeStream
	}
	if req.IdempotencyKey != nil && s.idem != nil {
		s.serveKeyedRun(w, r, p, req, mode)
		return
	}
	s.startRun(w, r, p, req, mode, runtime.StartOptions{})
}

// waitJSON answers a JSON-mode run. A client that disconnects before the
// answer cancels the run (wire-core §1.7, §13).
func (s *Server) waitJSON(w http.ResponseWriter, r *http.Request, run *runtime.Run) {
	res, err := run.Wait(r.Context())
	if r.Context().Err() != nil {
		run.Cancel(errClientGone)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Encoded by hand: the same bytes as a json.Encoder without HTML
	// escaping, without its reflection on every run.
	bp := resultBufs.Get().(*[]byte)
	buf := slices.Grow((*bp)[:0], 160+len(res.Text)+len(res.Output))
	body, err := protocol.AppendRunResult(buf, res, false)
	if err != nil {
		resultBufs.Put(bp)
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, body)
	// Write has copied the body into the connection's buffer (or written
	// it out): the buffer is free again.
	if cap(body) <= maxPooledResult {
		*bp = body
		resultBufs.Put(bp)
	}
}

// resultBufs recycles the buffers of JSON-mode result bodies: one
// allocation fewer per run. Buffers that grew past maxPooledResult are
// dropped so that one huge answer does not stay pinned in the pool.
var resultBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

const maxPooledResult = 64 << 10

// readBody reads at most MaxBodyBytes; tooLarge reports more. A declared
// Content-Length sizes the buffer exactly (one byte more, to read the end
// of the body without growing it): one allocation and no copy, where
// bytes.Buffer.ReadFrom would grow any buffer with less than 512 bytes free.
func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	const limit = MaxBodyBytes + 1 // reading one byte more tells "too large"
	size := 512
	if r.ContentLength > 0 {
		size = int(min(r.ContentLength+1, limit))
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit-len(buf)))
		}
		n, err := r.Body.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > MaxBodyBytes:
			return nil, true, nil
		case err == io.EOF:
			return buf, false, nil
		case err != nil:
			return buf, false, err
		}
	}
}

// isJSONContentType matches application/json case-insensitively, optionally
// followed by whitespace and ";" parameters (wire-core §1.2 step 9).
func isJSONContentType(v string) bool {
	const mt = "application/json"
	if len(v) < len(mt) || !strings.EqualFold(v[:len(mt)], mt) {
		return false
	}
	rest := strings.TrimLeft(v[len(mt):], " \t")
	return rest == "" || rest[0] == ';'
}

// acceptsEventStream: SSE when any Accept value contains text/event-stream
// (wire-core §1.7).
func acceptsEventStream(vals []string) bool {
	for _, v := range vals {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = valJSON
	w.WriteHeader(status)
	if _, err := w.Write(body); err == nil {
		noteFinished(w)
	}
}

// writeError sends the error body of wire-core §7.1 with the status of the
// code. Anything that is not a *protocol.Error is INTERNAL_ERROR with the
// fixed message; its cause goes to the log, never to the client. The cause
// of a *protocol.Error is not logged here: it may come from a provider (an
// upstream body) and the engine has already logged the failure safely.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		pe = protocol.New(protocol.CodeInternalError)
	}
	s.writeJSON(w, protocol.HTTPStatus(pe.Code), protocol.ErrorBody(pe))
}
