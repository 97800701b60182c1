package vendorsim

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Options configure a Server. The zero value is a conformance responder
// that accepts any credential.
type Options struct {
	// APIKey, when set, is the key the credential header must carry
	// (Vendor.Credential prefix + APIKey). Requests without it are answered
	// with the vendor's 401 and recorded with CredentialMissing or
	// CredentialWrong.
	APIKey string

	// Fault, when set, applies to every generation request.
	Fault Fault

	// Respond, when set, replaces the default decision function (Respond).
	Respond func(p *Prompt) Answer

	// Models is the models list (default DefaultModels).
	Models []string
	// ModelsPageSize bounds one page of the models list for vendors that
	// paginate (default 100).
	ModelsPageSize int

	// Script switches the server to transcript replay: the n-th request is
	// answered with Script[n-1]; requests past the end get a 500.
	Script []*Turn

	// MaxRequestBytes bounds a recorded request body (default 16 MiB).
	MaxRequestBytes int64

	// EmbeddingDims is the size of the embeddings responder's vectors when
	// a request does not ask for dimensions (default DefaultEmbeddingDims).
	EmbeddingDims int
}

// DefaultModels is the models list of a conformance responder.
var DefaultModels = []string{"sim-large", "sim-small", "fixture-model"}

// Credential states of a recorded request.
const (
	CredentialNotChecked = "not-checked" // Options.APIKey was empty
	CredentialOK         = "ok"
	CredentialMissing    = "missing"
	CredentialWrong      = "wrong"
)

// Request is one recorded request. The credential header's value is
// replaced by "REDACTED" in Header.
type Request struct {
	Method     string
	Path       string
	RawQuery   string
	Header     http.Header
	Body       []byte
	Credential string
}

// Server is a loopback vendor simulator. Close it when done.
type Server struct {
	vendor Vendor
	opts   Options
	srv    *httptest.Server

	mu        sync.Mutex
	requests  []Request
	cancelled int
	next      int           // next Script turn
	changed   chan struct{} // closed and replaced on every recorded change
}

// New starts a simulator for the named vendor on a loopback port.
func New(vendor string, opts Options) (*Server, error) {
	v, err := Lookup(vendor)
	if err != nil {
		return nil, err
	}
	if opts.Models == nil {
		opts.Models = DefaultModels
	}
	if opts.ModelsPageSize <= 0 {
		opts.ModelsPageSize = 100
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 16 << 20
	}
	s := &Server{vendor: v, opts: opts, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s, nil
}

// MustNew is New for tests: it fails tb on error and closes the server at
// cleanup.
func MustNew(tb interface {
	Helper()
	Fatal(...any)
	Cleanup(func())
}, vendor string, opts Options) *Server {
	tb.Helper()
	s, err := New(vendor, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// URL is the server's root URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.srv.URL }

// Endpoint is the base URL an adapter's endpoint setting takes.
func (s *Server) Endpoint() string { return s.srv.URL + s.vendor.BasePath() }

// Vendor returns the simulated vendor.
func (s *Server) Vendor() Vendor { return s.vendor }

// Close shuts the server down, waiting for handlers (held streams end as
// their clients are closed).
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns a copy of the recorded requests, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Cancellations is the number of streamed responses whose client went away
// before the response ended.
func (s *Server) Cancellations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// WaitCancelled blocks until at least n streamed responses were cancelled
// by their clients, or ctx is done.
func (s *Server) WaitCancelled(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.cancelled, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("vendorsim: %d of %d cancellations observed: %w", got, n, ctx.Err())
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) markCancelled() {
	s.mu.Lock()
	s.cancelled++
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxRequestBytes))
	if err != nil {
		return // client gone
	}
	rec := Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Body:     body,
	}
	rec.Credential = s.checkCredential(rec.Header)

	s.mu.Lock()
	s.requests = append(s.requests, rec)
	var turn *Turn
	turnNo := 0
	if s.opts.Script != nil {
		if s.next < len(s.opts.Script) {
			turn = s.opts.Script[s.next]
		}
		s.next++
		turnNo = s.next
	}
	s.notifyLocked()
	s.mu.Unlock()

	if rec.Credential == CredentialMissing || rec.Credential == CredentialWrong {
		s.vendor.WriteError(w, &HTTPError{Status: http.StatusUnauthorized, Message: "Incorrect API key provided"})
		return
	}
	if s.opts.Script != nil {
		if turn == nil {
			http.Error(w, fmt.Sprintf("vendorsim: unexpected request %d (script has %d turns)", turnNo, len(s.opts.Script)), http.StatusInternalServerError)
			return
		}
		s.replay(w, r, turn)
		return
	}

	if ev, ok := s.vendor.(embeddingsVendor); ok && ev.embeddingsRoute(r) {
		s.serveEmbeddings(w, body)
		return
	}
	switch s.vendor.Route(r) {
	case RouteModels:
		s.vendor.WriteModels(w, r, s.opts.Models, s.opts.ModelsPageSize)
	case RouteGenerate:
		p, err := s.vendor.ParsePrompt(r, body)
		if err != nil {
			s.vendor.WriteError(w, &HTTPError{Status: http.StatusBadRequest, Message: "vendorsim: " + err.Error()})
			return
		}
		var a Answer
		if s.opts.Respond != nil {
			a = s.opts.Respond(p)
		} else {
			a = Respond(p, s.opts.Fault)
		}
		if a.Error != nil {
			s.vendor.WriteError(w, a.Error)
			return
		}
		rw := &ReplyWriter{w: w, ctx: r.Context(), s: s}
		s.vendor.WriteReply(rw, p, a.Reply)
		rw.finish()
	default:
		s.vendor.WriteError(w, &HTTPError{Status: http.StatusNotFound, Message: "Unknown request URL: " + r.Method + " " + r.URL.Path})
	}
}

// checkCredential compares the credential header with Options.APIKey and
// redacts it in h.
func (s *Server) checkCredential(h http.Header) string {
	name, prefix := s.vendor.Credential()
	got, present := h.Get(name), h.Values(name) != nil
	if present {
		h.Set(name, "REDACTED")
	}
	if s.opts.APIKey == "" {
		return CredentialNotChecked
	}
	if !present || got == "" {
		return CredentialMissing
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(prefix+s.opts.APIKey)) != 1 {
		return CredentialWrong
	}
	return CredentialOK
}

// ReplyWriter writes one generation response. Vendors use SSE or JSON; the
// writer flushes every event, counts bytes and notices a client that went
// away (its methods then return false and the response counts as
// cancelled).
type ReplyWriter struct {
	w       http.ResponseWriter
	ctx     context.Context
	s       *Server
	started bool
	gone    bool
	n       int64
}

// StartSSE sends the 200 status with SSE headers. SSE and Event call it
// when needed.
func (rw *ReplyWriter) StartSSE() {
	if rw.started {
		return
	}
	rw.started = true
	h := rw.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	rw.w.WriteHeader(http.StatusOK)
}

// Event writes one SSE event ("event: name" line only when name is not
// empty) and flushes. It reports false once the client went away.
func (rw *ReplyWriter) Event(name string, data []byte) bool {
	var b []byte
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for _, line := range strings.Split(string(data), "\n") {
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return rw.Raw(b)
}

// Raw writes bytes of an SSE body as they are and flushes.
func (rw *ReplyWriter) Raw(b []byte) bool {
	rw.StartSSE()
	if rw.gone {
		return false
	}
	if rw.ctx.Err() != nil {
		rw.gone = true
		return false
	}
	n, err := rw.w.Write(b)
	rw.n += int64(n)
	if err == nil {
		err = http.NewResponseController(rw.w).Flush()
	}
	if err != nil {
		rw.gone = true
		return false
	}
	return true
}

// Written is the number of body bytes written so far.
func (rw *ReplyWriter) Written() int64 { return rw.n }

// JSON writes a complete non-streamed response.
func (rw *ReplyWriter) JSON(status int, body []byte) {
	rw.started = true
	rw.w.Header().Set("Content-Type", "application/json")
	rw.w.WriteHeader(status)
	n, _ := rw.w.Write(body)
	rw.n += int64(n)
}

// Hold keeps the response open until the client goes away (or the server
// closes), then records the cancellation.
func (rw *ReplyWriter) Hold() {
	<-rw.ctx.Done()
	rw.gone = true
}

// finish records a cancellation when the client went away mid-response.
func (rw *ReplyWriter) finish() {
	if rw.gone {
		rw.s.markCancelled()
	}
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request, t *Turn) {
	for _, h := range t.Headers {
		w.Header().Add(h[0], h[1])
	}
	if w.Header().Get("Content-Type") == "" && t.ContentType != "" {
		w.Header().Set("Content-Type", t.ContentType)
	}
	w.WriteHeader(t.Status)
	rw := &ReplyWriter{w: w, ctx: r.Context(), s: s, started: true}
	defer rw.finish()
	if !rw.Raw(t.Response) {
		return
	}
	if len(t.Repeat) > 0 {
		for rw.Written() < t.RepeatBytes {
			if !rw.Raw(t.Repeat) {
				return
			}
		}
	}
	if len(t.Tail) > 0 {
		rw.Raw(t.Tail)
	}
	if t.Hold {
		rw.Hold()
	}
}
