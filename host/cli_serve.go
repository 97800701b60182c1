package host

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/approvals"
	"adhost/runtime/apptools"
	"adhost/runtime/discovery"
	"adhost/runtime/durable"
	"adhost/runtime/retrieval"
	"adhost/runtime/scheduling"
	"adhost/runtime/wasm"
	"adhost/store"
	"adhost/store/jetstream"
)

// cliServe is `adhost serve [--config host.toml] [--listen ADDR] [--data DIR]`.
//
// Order (Caddy's lifecycle): decode and validate the whole configuration,
// resolve token secrets, verify and load every pinned extension, open the
// store, build the engine and the server, listen, print "listening on
// URL", serve until SIGINT/SIGTERM or ctx ends, then shut down gracefully
// and undo in reverse. Any error before listening is one line per problem
// and exit code 1.
func cliServe(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "serve")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	listen := fs.String("listen", "", "listen address host:port (overrides server.listen)")
	data := fs.String("data", "", "store directory (overrides store.path)")
	verbose := fs.Bool("v", false, "log at debug level")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return env.failf("serve", "unexpected arguments %q", pos)
	}
	cfg, err := cliLoadConfig(*cfgPath, *listen, *data)
	if err != nil {
		return env.fail("serve", err)
	}
	// The log's lines, and everything else serve says on stderr, go
	// through one buffered writer (logwriter.go), so they keep their order
	// and a request never waits for a write to stderr. Deferred first, it
	// is flushed last.
	lw := newLogWriter(env.stderr)
	defer lw.Close()
	env = &cliEnv{stdout: env.stdout, stderr: lw}
	log := newLogger(lw, cfg.Log, *verbose)
	tel, err := NewTelemetry(cfg.Diagnostics, log)
	if err != nil {
		return env.failf("serve", "diagnostics.otlp_endpoint: %v", err)
	}
	defer func() {
		// What is queued goes out within a bound; a slow collector does
		// not hold the exit.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tel.Shutdown(sctx)
	}()
	var metrics *Metrics
	if cfg.MetricsOn() {
		// Before the extensions load: their instances are counted too.
		metrics = NewMetrics(cfg.Store.Path)
		wasm.SetObserver(metrics)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	h, err := cliProvision(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			// Whatever failed, it failed because start-up was cut short
			// (an extension's initialisation reports the signal as its
			// error): say that, not the extension's words.
			fmt.Fprintln(env.stderr, "adhost serve: start-up interrupted before the host was ready; nothing was served")
			return cliExitInterrupted
		}
		return env.fail("serve", err)
	}
	defer h.close()
	// Freed heap goes back to the OS when the host falls idle after a
	// burst (memtrim.go).
	go newIdleTrim().run(ctx)

	var tlsCfg *tls.Config
	scheme := "http"
	if cfg.Server.TLSCert != "" {
		if tlsCfg, err = TLSConfig(cfg.Server.TLSCert, cfg.Server.TLSKey); err != nil {
			return env.failf("serve", "server.tls_cert: %v", err)
		}
		scheme = "https"
	}
	sessTurns, sessFeatures, closeSessions, err := cliSessions(ctx, cfg, h, log)
	if err != nil {
		return env.fail("serve", err)
	}
	defer closeSessions()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		key := "server.listen"
		if *listen != "" {
			key = "--listen"
		}
		return env.failf("serve", "%s: %v", key, err)
	}
	idemKeys, idemFeatures, err := cliIdempotency(cfg, h, log)
	if err != nil {
		return env.fail("serve", err)
	}
	// The worker resolves credentials through the server's tokens (as a
	// reload leaves them); it starts only once srv is set.
	var srv *Server
	jobSvc, jobFeatures, err := cliJobs(ctx, cfg, h, log, tel, func(d string) *runtime.Principal { return srv.PrincipalByDigest(d) })
	if err != nil {
		return env.fail("serve", err)
	}
	if jobSvc != nil {
		// Normally the server's Shutdown has stopped it (before the
		// engine); this covers the early returns.
		defer jobSvc.Stop(context.Background())
	}
	retr, retrFeatures := h.retr, h.retrFeatures       // opened by cliProvision: runs search it
	jobFeatures = append(jobFeatures, retrFeatures...) // the server orders features itself
	// Runs re-check their evidence against the grants a reload leaves.
	if retr != nil {
		retr.SetPrincipals(func(d string) *runtime.Principal { return srv.PrincipalByDigest(d) })
	}
	srv = NewServer(ServerOptions{
		Engine:         h.engine,
		Discovery:      h.discovery,
		Tokens:         h.tokens,
		AllowedOrigins: cfg.Server.AllowedOrigins,
		TLS:            tlsCfg != nil,
		Logger:         log,
		Status:         extensionStatus(h.extOrder),
		Sessions:       sessTurns,
		Features:       append(append(append(sessFeatures, idemFeatures...), jobFeatures...), h.reviewFeatures...),
		Idempotency:    idemKeys,
		Jobs:           jobSvc,
		Retrieval:      retrievalOption(retr),
		Metrics:        metrics,
		Telemetry:      tel,
		Approvals:      h.decider(),
		Executions:     h.executions(),
	})
	srv.SetReady()
	if jobSvc != nil {
		jobSvc.Start()
	}
	startedAt := time.Now()
	rl := &cliReloader{path: *cfgPath, listen: *listen, data: *data, log: log, srv: srv, cfg: cfg, h: h, metrics: metrics}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				rl.reload(ctx) // logs its outcome
			case <-ctx.Done():
				return
			}
		}
	}()
	if oln, err := listenOperator(cfg.Store.Path); err != nil {
		log.Warn("no operator endpoint: status, reload, qualify and plugins list beside this host cannot reach it", "err", err)
	} else {
		go serveOperator(ctx, oln, &operatorServer{store: h.store, log: log, reload: rl.reload, info: func() OperatorInfo {
			return OperatorInfo{PID: os.Getpid(), Version: cliVersions(), Config: cfg.Path, StartedAt: startedAt,
				Reloads: int(rl.reloads.Load()), Status: srv.Status()}
		}})
	}
	// Tests and scripts read this line to learn the address (--listen :0).
	fmt.Fprintf(env.stdout, "listening on %s://%s\n", scheme, ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "extensions", len(h.exts), "providers", len(cfg.Providers), "tools", len(h.toolNames))

	if err := srv.Serve(ctx, ln, tlsCfg); err != nil {
		log.Error("shutdown", "err", err)
		h.close()
		return cliExitFail
	}
	if err := h.close(); err != nil {
		log.Error("close", "err", err)
		return cliExitFail
	}
	log.Info("stopped")
	return cliExitOK
}

// cliLoadConfig loads host.toml, applies the command-line overrides and
// validates the result.
func cliLoadConfig(path, listen, data string) (*config.File, error) {
	cfg, err := config.Load(path)
	if cfg == nil {
		return nil, err
	}
	if listen == "" && data == "" {
		return cfg, err
	}
	if listen != "" {
		cfg.Server.Listen = listen
		cfg.Override("server.listen", "--listen")
	}
	if data != "" {
		abs, aerr := filepath.Abs(data)
		if aerr != nil {
			return nil, aerr
		}
		cfg.Store.Path = abs
		cfg.Override("store.path", "--data")
	}
	return cfg, cfg.Validate()
}

// cliHost is everything serve provisions, closed in reverse order.
type cliHost struct {
	exts      map[string]*wasm.Extension // by "id@version"
	extOrder  []*wasm.Extension
	store     *store.Store
	jsonl     *store.JSONL
	engine    *runtime.Engine
	discovery Discovery
	disc      *discovery.Cache
	tokens    []Token
	toolNames []string
	// durable is the durable features' backend: store, or shared when
	// [store] backend = "jetstream" (cli_store.go).
	durable  durable.Store
	shared   *jetstream.Store
	presence *durable.Presence
	// reviews and apps are [approvals] and [application_tools] (nil:
	// off); reviewFeatures their /v1/protocol features.
	reviews        *approvals.Service
	apps           *apptools.Service
	reviewFeatures []string
	// retr is [retrieval] (nil: off), opened before the engine because
	// runs with the retrieval option search it; retrFeatures its
	// /v1/protocol features.
	retr         *retrieval.Service
	retrFeatures []string
	closed       bool
}

func (h *cliHost) close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if h.disc != nil {
		h.disc.Close() // probes call into extensions: stop them first
	}
	for i := len(h.extOrder) - 1; i >= 0; i-- {
		errs = append(errs, h.extOrder[i].Close(ctx))
	}
	if h.jsonl != nil {
		errs = append(errs, h.jsonl.Close())
	}
	errs = append(errs, h.closeShared(ctx))
	if h.store != nil {
		errs = append(errs, h.store.Close())
	}
	return errors.Join(errs...)
}

// cliProvision turns a validated configuration into a running engine: on
// any error it undoes what it did and returns the problems, one per line.
func cliProvision(ctx context.Context, cfg *config.File, log *slog.Logger) (_ *cliHost, err error) {
	h := &cliHost{exts: map[string]*wasm.Extension{}}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	if h.tokens, err = cliTokens(cfg, log); err != nil {
		return nil, err
	}

	if err := cliPrecheck(cfg); err != nil {
		return nil, err
	}
	// Compile every pin and instantiate one guest each before anything
	// else can fail late.
	cacheDir := filepath.Join(cfg.Store.Path, "wasm-cache")
	for _, e := range cfg.Extensions {
		x, err := cliLoadExtensionSaying(ctx, e, cacheDir, log)
		if err != nil {
			return nil, err
		}
		h.exts[e.Ref()] = x
		h.extOrder = append(h.extOrder, x)
	}

	if h.store, err = store.Open(cfg.Store.Path, store.Options{Logger: log}); err != nil {
		return nil, err
	}
	if err := h.openDurable(ctx, cfg, log); err != nil {
		return nil, err
	}
	sinks := cliUsageTee{h.store}
	if cfg.Usage.JSONL != "" {
		if h.jsonl, err = store.OpenJSONL(cfg.Usage.JSONL, store.JSONLOptions{Logger: log}); err != nil {
			return nil, err
		}
		sinks = append(sinks, h.jsonl)
	}

	insts, tools, toolNames, err := cliBindAll(ctx, cfg, h.exts, h.store)
	if err != nil {
		return nil, err
	}
	h.toolNames = toolNames

	hostID := cfg.Usage.HostID
	if hostID == "" {
		hostID = cliRandomUUID()
	}
	h.reviews, h.apps, h.reviewFeatures = cliReviews(cfg, h.store, log)
	opts := cliReloadable(cfg, insts, tools)
	opts.Scheduler = scheduling.New()
	opts.Budgets = cliBudgets(cfg.Resources)
	if h.retr, h.retrFeatures, err = cliRetrieval(ctx, cfg, h, log); err != nil {
		return nil, err
	}
	ctxSvc := cliContext(cfg, h.retr)
	if ctxSvc.References() {
		h.retrFeatures = append(h.retrFeatures, "context-references") // the server orders features
	}
	opts.Context = ctxSvc
	opts.UsageSink = sinks
	opts.HostID = hostID
	opts.Logger = log
	// Keys are claimed and replayed by cliIdempotency's wrapper.
	opts.IdempotencyKeys = cfg.IdempotencyOn()
	opts.Reviewer = h.reviewer()
	opts.ApplicationTools = h.appTools()
	h.engine, err = runtime.New(opts)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	h.disc = discovery.New(discovery.Options{})
	h.discovery = h.disc
	return h, nil
}

// cliLoadExtension checks the pin's digest itself first, so the message
// names the extension and both digests in the same words whatever the
// loader says, then hands the module to runtime/wasm for the full load
// path (manifest, ABI, imports, instantiate, info).
func cliLoadExtension(ctx context.Context, e config.Extension, cacheDir string, log *slog.Logger) (*wasm.Extension, error) {
	if err := cliCheckDigest(e); err != nil {
		return nil, err
	}
	x, err := wasm.Load(ctx, wasm.Pin{ID: e.ID, Version: e.Version, Path: e.Module, SHA256: e.SHA256},
		wasm.Options{
			CacheDir:        cacheDir,
			Logger:          log,
			MaxInstances:    e.MaxInstances,
			IdleInstanceTTL: time.Duration(e.InstanceIdleMs) * time.Millisecond,
			TurnTimeout:     time.Duration(e.TurnTimeoutMs) * time.Millisecond,
		})
	if err != nil {
		return nil, cliOneLine(err)
	}
	return x, nil
}

// cliSlowLoad is how long an extension may take to load before serve says
// it is compiling: a cold compilation cache (first start, a new pin) takes
// seconds per extension, a warm one milliseconds.
const cliSlowLoad = 300 * time.Millisecond

// cliLoadExtensionSaying is cliLoadExtension that tells the operator when
// a load is slow — "compiling openai@1.0.0 …" once it passes cliSlowLoad,
// then how long it took — so a first start is not a silent pause.
func cliLoadExtensionSaying(ctx context.Context, e config.Extension, cacheDir string, log *slog.Logger) (*wasm.Extension, error) {
	start := time.Now()
	var said atomic.Bool
	t := time.AfterFunc(cliSlowLoad, func() {
		said.Store(true)
		log.Info("compiling extension (first start or a new pin; the result is cached)", "extension", e.Ref())
	})
	x, err := cliLoadExtension(ctx, e, cacheDir, log)
	if !t.Stop() && said.Load() && err == nil {
		log.Info("compiled extension", "extension", e.Ref(), "took", time.Since(start).Round(100*time.Millisecond).String())
	}
	return x, err
}

// cliCheckDigest compares the module's sha256 with the pin.
func cliCheckDigest(e config.Extension) error {
	got, err := cliFileDigest(e.Module)
	if err != nil {
		return fmt.Errorf("extension %s: module %s: %w", e.Ref(), e.Module, cliUnwrapPath(err))
	}
	if got != e.SHA256 {
		return fmt.Errorf("extension %s: sha256 mismatch for %s: expected %s, actual %s", e.Ref(), e.Module, e.SHA256, got)
	}
	return nil
}

func cliFileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, wasm.MaxModuleBytes+1)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cliUnwrapPath drops the path of a *PathError already named by the caller.
func cliUnwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// cliOneLine keeps the first line of an error (loader errors are one line;
// this guards the "one-line reason" promise).
func cliOneLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return errors.New(s[:i])
	}
	return err
}

// cliUsageTee delivers each usage record to every sink (the store always,
// the JSONL file when configured); one sink failing does not skip others.
// Both sinks only queue, so the tee does too and the engine calls it on
// the run's goroutine; close writes what they queued (the engine has
// delivered every record by then: Serve shuts it down first).
type cliUsageTee []runtime.UsageSink

var _ runtime.AsyncUsageSink = cliUsageTee(nil)

// QueuesUsage is true if every sink of the tee only queues.
func (t cliUsageTee) QueuesUsage() bool {
	for _, s := range t {
		if a, ok := s.(runtime.AsyncUsageSink); !ok || !a.QueuesUsage() {
			return false
		}
	}
	return true
}

func (t cliUsageTee) RecordUsage(ctx context.Context, rec *runtime.UsageRecord) error {
	var errs []error
	for _, s := range t {
		if err := s.RecordUsage(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cliRandomUUID returns a random (version 4) UUID: the per-process host id
// when usage.host_id is not configured (wire-core §14.3).
func cliRandomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// cliBudgets is the engine's budget policy of [resources]; nil without
// the table.
func cliBudgets(r *config.Resources) runtime.BudgetPolicy {
	if r == nil {
		return nil
	}
	conv := func(b config.Budget) runtime.Budget {
		return runtime.Budget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD, RejectUnknown: b.UnknownUsage == "reject"}
	}
	convAll := func(m map[string]config.Budget) map[string]runtime.Budget {
		out := make(map[string]runtime.Budget, len(m))
		for k, b := range m {
			out[k] = conv(b)
		}
		return out
	}
	b := &scheduling.Budgets{Subjects: convAll(r.Subjects), Accounts: convAll(r.Accounts)}
	if r.Default != nil {
		d := conv(*r.Default)
		b.Default = &d
	}
	return b
}
