package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/discovery"
	"adhost/runtime/durable"
	"adhost/runtime/wasm"
)

// cliReloader applies a changed host.toml to a running host (SIGHUP,
// `adhost reload`). What a reload changes, atomically for runs that start
// after it: bearer tokens and their grants, provider instances (settings,
// models, secrets, the extension they bind), host tools, [limits], and the
// pinned extensions — a new or re-pinned module is verified and compiled
// first, an unchanged one is kept as it is. Runs in flight finish on the
// extension instances, provider settings and limits they started with;
// extensions nothing uses any more are closed when the last such run ends.
//
// What needs a restart, and is refused with the old configuration still
// serving: [server] (listener, TLS files, origins), [store], [usage] and
// the durable-state tables ([jobs], [sessions], [idempotency]) — anything
// outside the tables above (restartOnly).
type cliReloader struct {
	mu sync.Mutex // one reload at a time

	path, listen, data string // how serve was started
	log                *slog.Logger
	srv                *Server
	metrics            *Metrics // nil: metrics off

	cfg *config.File // the configuration in use
	h   *cliHost

	reloads atomic.Int32
}

// reloadable are the host.toml tables a reload applies; every other field
// of config.File needs a restart.
var reloadable = map[string]bool{"Extensions": true, "Providers": true, "Tools": true, "Tokens": true, "Limits": true}

// restartOnly names the first table whose change a reload cannot apply,
// or "".
func restartOnly(old, cur *config.File) string {
	a, b := reflect.ValueOf(*old), reflect.ValueOf(*cur)
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || reloadable[f.Name] || tag == "" || tag == "-" {
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			return tag
		}
	}
	return ""
}

// reload re-reads the configuration and applies it, or returns why not;
// on any error nothing changed.
func (rl *cliReloader) reload(ctx context.Context) (err error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	start := time.Now()
	defer func() {
		rl.metrics.Reloaded(err)
		if err != nil {
			rl.log.Error("reload refused; the running configuration is unchanged", "err", err)
		}
	}()
	cfg, err := cliLoadConfig(rl.path, rl.listen, rl.data)
	if err != nil {
		return err
	}
	if key := restartOnly(rl.cfg, cfg); key != "" {
		return fmt.Errorf("[%s] changed: that needs a restart (the listener, TLS files, store and durable-state settings are opened once)", key)
	}
	if err := retrievalReloadCheck(rl.cfg, cfg); err != nil {
		return err
	}
	tokens, err := cliTokens(cfg, rl.log)
	if err != nil {
		return err
	}
	if err := cliPrecheck(cfg); err != nil {
		return err
	}

	// Extensions: keep an unchanged pin, load a new or changed one.
	old := rl.h
	exts := map[string]*wasm.Extension{}
	var order, loaded []*wasm.Extension
	var kept []config.Extension
	defer func() {
		if err != nil {
			closeExtensions(loaded)
		}
	}()
	cacheDir := filepath.Join(cfg.Store.Path, "wasm-cache")
	for _, e := range cfg.Extensions {
		x := old.exts[e.Ref()]
		if x == nil || !reflect.DeepEqual(extensionPin(rl.cfg, e.Ref()), e) {
			if x, err = cliLoadExtensionSaying(ctx, e, cacheDir, rl.log); err != nil {
				return err
			}
			loaded = append(loaded, x)
		} else {
			kept = append(kept, e)
		}
		exts[e.Ref()] = x
		order = append(order, x)
	}
	insts, tools, toolNames, err := cliBindAll(ctx, cfg, exts, old.store)
	if err != nil {
		return err
	}
	drained, err := old.engine.Reconfigure(cliReloadable(cfg, insts, tools))
	if err != nil {
		return err
	}
	disc := discovery.New(discovery.Options{})
	rl.srv.Reconfigure(tokens, disc, extensionStatus(order))

	// The old extensions nothing uses any more, and the old discovery
	// cache (its probes call into them), go once the old runs are done.
	var retire []*wasm.Extension
	for ref, x := range old.exts {
		if exts[ref] != x {
			retire = append(retire, x)
		}
	}
	oldDisc := old.disc
	go func() {
		<-drained
		if oldDisc != nil {
			oldDisc.Close()
		}
		closeExtensions(retire)
	}()
	old.exts, old.extOrder, old.disc, old.discovery, old.tokens, old.toolNames = exts, order, disc, disc, tokens, toolNames
	rl.cfg = cfg
	n := rl.reloads.Add(1)
	var versions []string
	for _, e := range cfg.Extensions {
		versions = append(versions, e.Ref()+" "+e.SHA256[:12])
	}
	rl.log.Info("reloaded configuration", "reload", n, "config", cfg.Path, "took", time.Since(start).Round(time.Millisecond).String(),
		"extensions", strings.Join(versions, ", "), "new", len(loaded), "kept", len(kept), "retired", len(retire),
		"providers", len(insts), "tokens", len(tokens))
	return nil
}

// extensionPin returns the [[extensions]] entry ref of cfg (zero if none).
func extensionPin(cfg *config.File, ref string) config.Extension {
	for _, e := range cfg.Extensions {
		if e.Ref() == ref {
			return e
		}
	}
	return config.Extension{}
}

func closeExtensions(xs []*wasm.Extension) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, x := range xs {
		x.Close(ctx)
	}
}

// cliTokens resolves the token secrets of cfg into the server's registry.
func cliTokens(cfg *config.File, log *slog.Logger) ([]Token, error) {
	secrets, err := cfg.ResolveTokens()
	if err != nil {
		return nil, err
	}
	var tokens []Token
	for _, s := range secrets {
		tokens = append(tokens, Token{
			ID: s.Token.ID, Subject: s.Token.Subject, Secret: s.Value,
			Providers: s.Token.Providers, Tools: s.Token.Tools,
			Ops:          s.Token.Grants.Ops(),
			ApproveTools: s.Token.Grants.ApproveTools,
			AppTools:     s.Token.Grants.AppToolReview(),
		})
		if s.Token.Grants.Unimplemented() {
			log.Warn("token grants for retrieval are not implemented yet; ignored", "token", s.Token.ID)
		}
	}
	return tokens, nil
}

// cliBindAll binds every provider instance and tool of cfg to its loaded
// extension; every problem is reported, one per line. kv is the store of
// tool extensions' kv namespaces (the notes tool).
func cliBindAll(ctx context.Context, cfg *config.File, exts map[string]*wasm.Extension, kv durable.KV) (insts []*runtime.ProviderInstance, tools []*runtime.Tool, toolNames []string, err error) {
	var errs []error
	for i, p := range cfg.Providers {
		inst, err := cliBindProvider(ctx, exts[p.Extension], p)
		if err != nil {
			errs = append(errs, fmt.Errorf("providers[%d] (%s): %w", i, p.ID, err))
			continue
		}
		insts = append(insts, inst)
	}
	for i, t := range cfg.Tools {
		ts, err := cliBindTools(ctx, exts[t.Extension], t, kv)
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d] (%s): %w", i, t.Extension, err))
			continue
		}
		tools = append(tools, ts...)
		toolNames = append(toolNames, t.Names...)
	}
	return insts, tools, toolNames, errors.Join(errs...)
}

// cliReloadable is the part of the engine's options a reload may change
// (runtime.Engine.Reconfigure): the bound providers and tools, the run
// limits and the admission limits and queue of cfg. serve starts the
// engine with the same, plus what is the engine's for life.
func cliReloadable(cfg *config.File, insts []*runtime.ProviderInstance, tools []*runtime.Tool) runtime.Options {
	return runtime.Options{
		Providers:     insts,
		Tools:         tools,
		Limits:        cliLimits(cfg),
		MaxConcurrent: cfg.Limits.MaxConcurrentRuns,
		MaxPerSubject: cfg.Limits.MaxConcurrentRunsPerSubject,
		MaxPerAccount: cfg.Limits.MaxConcurrentRunsPerAccount,
		SubjectLimits: cfg.Limits.Subjects,
		AccountLimits: cfg.Limits.Accounts,
		QueueTotal:    cfg.Limits.QueueTotal,
		QueueSubject:  cfg.Limits.QueuePerSubject,
	}
}

// cliLimits are the engine's run limits of cfg.
func cliLimits(cfg *config.File) runtime.Limits {
	return runtime.Limits{
		MaxSteps:        cfg.Limits.MaxSteps,
		MaxOutputTokens: cfg.Limits.MaxOutputTokens,
		IdleTimeout:     time.Duration(cfg.Limits.IdleTimeoutMs) * time.Millisecond,
	}
}

// cliReload is `adhost reload [--config FILE]`: asks the host that holds
// the configuration's store, through its operator socket, to re-read its
// host.toml (as SIGHUP does), and reports the outcome: exit 0 once the new
// configuration serves, 1 with the reason when it was refused (the old one
// keeps serving).
func cliReload(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "reload")
	cfgPath := fs.String("config", "host.toml", "configuration file (finds the running host through its store.path)")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return cliUsageError(env, "reload", "unexpected argument %q", pos[0])
	}
	// The host re-reads the file itself and is the judge of it: a file
	// that does not even decode is still sent its way (found through the
	// one key that locates the host), so that it logs and counts the
	// refusal like any other.
	dir, err := config.StorePath(*cfgPath)
	if err != nil {
		return env.fail("reload", err)
	}
	oc, err := dialOperator(dir)
	if err != nil {
		return env.fail("reload", err)
	}
	if err := oc.do(ctx, "POST", "/operator/v1/reload", []byte("{}"), nil); err != nil {
		return env.failf("reload", "refused: %v", err)
	}
	fmt.Fprintln(env.stdout, "reloaded", *cfgPath)
	return cliExitOK
}

func init() {
	cliHelp["reload"] = `usage: adhost reload [--config FILE]

Asks the running host (found through store.path's operator socket) to
re-read host.toml, as SIGHUP does. Tokens, providers, tools, limits and
pinned extensions change for runs that start afterwards; runs in flight
finish on what they started with. [server], [store], [usage] and the
durable-state tables need a restart; a reload that changes them, or any
invalid configuration, is refused and the old configuration keeps serving.`
}
