package host

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"adhost/runtime"
	"adhost/runtime/idempotency"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
)

// Ingress timers (wire-core §1.4). They bound receiving a request, never
// the response.
const (
	readHeaderTimeout = 10 * time.Second
	requestTimeout    = 30 * time.Second
	idleTimeout       = 5 * time.Second

	// DefaultHeartbeat is the SSE keep-alive interval (wire-core §5.6).
	DefaultHeartbeat = 15 * time.Second
	// DefaultShutdownTimeout bounds the graceful shutdown Serve performs
	// when its context ends.
	DefaultShutdownTimeout = 30 * time.Second
	// stuckWriteGrace is how long a stream may stay blocked writing to a
	// client that stopped reading once its run has ended.
	stuckWriteGrace = 30 * time.Second
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Engine runs the runs and reports the protocol features. Required.
	Engine *runtime.Engine
	// Discovery supplies provider health and model catalogs for
	// GET /v1/providers. Nil: every entry reports the fallback of
	// wire-core §6.1 (health "unsupported"/DISCOVERY_UNSUPPORTED, the
	// allowlist as a "configured" catalog or an "unavailable" one).
	Discovery Discovery
	// Tokens is the static bearer token registry.
	Tokens []Token
	// AllowedOrigins are the exact browser origins allowed (no wildcards,
	// no normalisation). Empty: every request with an Origin is denied.
	AllowedOrigins []string
	// TLS adds Strict-Transport-Security to every response. Serve sets it
	// by itself when given a TLS configuration.
	TLS bool
	// Logger; nil discards.
	Logger *slog.Logger
	// HeartbeatInterval overrides DefaultHeartbeat (tests).
	HeartbeatInterval time.Duration
	// Status reports the extensions for the status endpoint
	// (StatusPath); nil: an empty list.
	Status StatusFunc
	// Features are the extension features served beside the engine's
	// (durable-jobs …), advertised by /v1/protocol in upstream order.
	Features []string
	// Sessions serves runs carrying `session`; nil: sessions are off.
	Sessions SessionTurns
	// Idempotency claims and replays runs carrying idempotencyKey; nil:
	// keys are IDEMPOTENCY_UNAVAILABLE. Set it exactly when the engine
	// has Options.IdempotencyKeys.
	Idempotency *idempotency.Keys
	// Jobs serves /v1/jobs/* (durable-jobs); nil: those paths are
	// unknown. Shutdown stops it before the engine, so its running jobs
	// end interrupted rather than cancelled (wire-extensions §2.3).
	Jobs *jobs.Service
	// Retrieval serves /v1/retrieval/* (retrieval.go); nil: those paths
	// are unknown.
	Retrieval RetrievalService
	// Metrics serves GET /metrics ([metrics] enabled) and counts every
	// request; nil: the path is unknown.
	Metrics *Metrics
	// Telemetry exports spans and metrics over OTLP ([diagnostics]);
	// nil: off.
	Telemetry *Telemetry
	// Approvals serves POST /v1/approvals/decisions; nil: unknown path.
	// Runs carrying `approvals` are decoded only with it set.
	Approvals Decider
	// Executions serves POST /v1/tool-executions/*; nil: unknown paths.
	// Runs carrying `applicationTools` are decoded only with it set.
	Executions ExecutionResults
}

// Host states (wire-core §1.2 step 2).
const (
	stateStarting int32 = iota + 1
	stateReady
	stateShuttingDown
)

// Server is the HTTP transport. Create it with NewServer; it answers
// HOST_STARTING until SetReady.
type Server struct {
	engine *runtime.Engine
	// live is what a reload replaces (Reconfigure): the token registry,
	// the discovery cache and the extensions' status. A request reads it
	// once.
	live      atomic.Pointer[serverLive]
	origins   map[string]bool
	log       *slog.Logger
	heartbeat time.Duration
	router    *mux.Router // steps 7–8 of the pipeline: routes, after auth
	// extraFeatures are ServerOptions.Features.
	extraFeatures []string
	sessions      SessionTurns
	idem          *idempotency.Keys
	metrics       *Metrics
	tel           *Telemetry
	jobs          *jobs.Service
	retrieval     RetrievalService
	decider       Decider
	executions    ExecutionResults
	// runDecoding: the extension members of POST /v1/runs this server
	// accepts.
	runDecoding protocol.DecodeOptions

	state atomic.Int32
	tls   atomic.Bool

	// streams counts run handlers still writing, so Shutdown lets them
	// deliver their terminal event before the listener closes.
	streams activity

	mu  sync.Mutex
	srv *http.Server
}

// NewServer returns a server in the starting state.
func NewServer(opts ServerOptions) *Server {
	s := &Server{
		engine:    opts.Engine,
		origins:   make(map[string]bool, len(opts.AllowedOrigins)),
		log:       opts.Logger,
		heartbeat: opts.HeartbeatInterval,

		extraFeatures: opts.Features,
		sessions:      opts.Sessions,
		idem:          opts.Idempotency,
		jobs:          opts.Jobs,
		retrieval:     opts.Retrieval,
		metrics:       opts.Metrics,
		tel:           opts.Telemetry,
		decider:       opts.Approvals,
		executions:    opts.Executions,
		runDecoding:   protocol.DecodeOptions{Session: true, Approvals: opts.Approvals != nil, ApplicationTools: opts.Executions != nil, Attachments: true, OutputArtifact: true, Retrieval: true},
	}
	if s.metrics != nil {
		s.metrics.src.Store(s)
	}
	s.live.Store(&serverLive{tokens: newTokenEntries(opts.Tokens), discovery: opts.Discovery, status: opts.Status})
	for _, o := range opts.AllowedOrigins {
		s.origins[o] = true
	}
	s.router = newRouter(s.routes(), http.HandlerFunc(s.notFound))
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultHeartbeat
	}
	s.tls.Store(opts.TLS)
	s.state.Store(stateStarting)
	return s
}

// serverLive is the part of a Server a reload replaces.
type serverLive struct {
	tokens    []tokenEntry
	discovery Discovery
	status    StatusFunc
}

// Reconfigure replaces the bearer tokens, the discovery source and the
// status source at once, for requests that start after it returns (a
// reload of host.toml). Requests in flight keep what they authenticated
// with.
func (s *Server) Reconfigure(tokens []Token, d Discovery, st StatusFunc) {
	s.live.Store(&serverLive{tokens: newTokenEntries(tokens), discovery: d, status: st})
}

// PrincipalByDigest returns the principal of the currently configured
// token whose bearer has the SHA-256 hex digest d, or nil: durable work
// re-resolves the grants of the credential that submitted it.
func (s *Server) PrincipalByDigest(d string) *runtime.Principal {
	for _, te := range s.live.Load().tokens {
		if te.principal.CredentialDigest == d {
			return te.principal
		}
	}
	return nil
}

// Handler returns the request pipeline.
func (s *Server) Handler() http.Handler { return s }

// SetReady ends the starting state: requests are served.
func (s *Server) SetReady() { s.state.CompareAndSwap(stateStarting, stateReady) }

// BeginShutdown makes every new request fail with HOST_SHUTTING_DOWN.
// Running runs are not touched; Shutdown ends them.
func (s *Server) BeginShutdown() { s.state.Store(stateShuttingDown) }

// Serve serves HTTP (tlsConfig nil) or HTTPS on ln until Shutdown is called
// or ctx ends; in the latter case it shuts down gracefully within
// DefaultShutdownTimeout. It returns nil after a graceful shutdown.
//
// The http.Server bounds request headers to 10 s, the whole request to
// 30 s and keep-alive idleness to 5 s; run handlers lift the read deadline
// once the body is read so that neither a long JSON run nor a stream is cut
// off, and no write timeout is set.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := s.newHTTPServer()
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig.Clone()
		if srv.TLSConfig.MinVersion < tls.VersionTLS12 {
			srv.TLSConfig.MinVersion = tls.VersionTLS12
		}
		s.tls.Store(true)
	}
	s.mu.Lock()
	if s.srv != nil {
		s.mu.Unlock()
		return errors.New("host: Serve called twice")
	}
	s.srv = srv
	s.mu.Unlock()

	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultShutdownTimeout)
		defer cancel()
		err := s.Shutdown(sctx)
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		return err
	}
}

// newHTTPServer is the http.Server configuration Serve uses.
func (s *Server) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:                      s,
		ReadHeaderTimeout:            readHeaderTimeout,
		ReadTimeout:                  requestTimeout,
		IdleTimeout:                  idleTimeout,
		DisableGeneralOptionsHandler: true, // "OPTIONS *" goes through the pipeline too
		ErrorLog:                     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Shutdown stops the host in the order the spec needs: new requests get
// HOST_SHUTTING_DOWN; the engine cancels every running run, each of which
// still commits its terminal event; the stream handlers write those events
// and return; only then are the listeners closed and idle connections
// dropped. ctx bounds the whole sequence.
func (s *Server) Shutdown(ctx context.Context) error {
	s.BeginShutdown()
	var errs []error
	if s.jobs != nil {
		if err := s.jobs.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.engine != nil {
		if err := s.engine.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.streams.wait(ctx); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// activity counts in-flight operations and lets a caller wait for zero.
// Unlike sync.WaitGroup it allows new operations to start while someone
// waits (a request that passed the state check just before shutdown).
type activity struct {
	mu sync.Mutex
	n  int
	// idle is closed when n drops to zero. Only a waiter creates it, so an
	// operation that starts on an idle host (every run at one client)
	// allocates nothing.
	idle chan struct{}
}

func (a *activity) add() {
	a.mu.Lock()
	a.n++
	a.mu.Unlock()
}

func (a *activity) done() {
	a.mu.Lock()
	a.n--
	if a.n == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
	a.mu.Unlock()
}

func (a *activity) wait(ctx context.Context) error {
	a.mu.Lock()
	if a.n == 0 {
		a.mu.Unlock()
		return nil
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
