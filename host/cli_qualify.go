package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"

	"adhost/internal/qualify"
	"adhost/runtime"
	"adhost/store"
)

// cliQualify is `adhost qualify --provider P --model M [--live]`: it runs
// the provider conformance scenarios (wire-core §16) against a configured
// provider instance and writes a qualification report as JSON and Markdown
// into --out, and into the store keyed by the module's digest when the
// store is not held by a running host.
//
// Without --live a provider extension with a configurable endpoint is bound
// to the loopback vendor simulator with a generated key (no real service,
// no configured credential is touched); an extension without network access
// (the fixture) runs as configured, which needs no network either. --live
// binds the instance exactly as serve does — its settings and credentials —
// and talks to the real service; it must be asked for explicitly.
func cliQualify(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "qualify")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	providerID := fs.String("provider", "", "provider instance id (required)")
	model := fs.String("model", "", "model id (required)")
	live := fs.Bool("live", false, "talk to the real service with the configured credentials")
	outDir := fs.String("out", ".", "directory for the JSON and Markdown reports")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if *providerID == "" || *model == "" || len(pos) != 0 {
		fmt.Fprintln(env.stderr, "usage: adhost qualify --provider P --model M [--live] [--out DIR] [--config host.toml]")
		return cliExitUsage
	}
	cfg, err := cliLoadConfig(*cfgPath, "", "")
	if err != nil {
		return env.fail("qualify", err)
	}
	idx := -1
	for i, p := range cfg.Providers {
		if p.ID == *providerID {
			idx = i
		}
	}
	if idx < 0 {
		return env.failf("qualify", "no [[providers]] entry with id %q in %s", *providerID, *cfgPath)
	}
	p := cfg.Providers[idx]
	pin := cfg.ExtensionByRef(p.Extension)
	log := slog.New(slog.DiscardHandler)
	x, err := cliLoadExtension(ctx, *pin, filepath.Join(cfg.Store.Path, "wasm-cache"), log)
	if err != nil {
		return env.fail("qualify", err)
	}
	defer x.Close(context.WithoutCancel(ctx))
	m := x.Manifest()

	var rep *qualify.Report
	switch {
	case !*live && m.EndpointSetting() != "":
		rep, err = qualify.Simulate(ctx, x, qualify.SimulateOptions{Model: *model, Logger: log})
	case !*live && m.HasNetwork():
		err = fmt.Errorf("%s reaches the network but has no endpoint setting to point at the simulator; use --live", p.Extension)
	default:
		if *live {
			if err = cliPrecheck(cfg); err != nil {
				break
			}
		}
		var inst *runtime.ProviderInstance
		if inst, err = cliBindProvider(ctx, x, p); err != nil {
			break
		}
		endpoint, _ := p.Settings[m.EndpointSetting()].(string)
		rep, err = qualify.Run(ctx, qualify.Options{
			Provider: inst.Provider, Manifest: m, SHA256: pin.SHA256, Endpoint: endpoint,
			Model: *model, Live: *live, Logger: log,
		})
	}
	if err != nil {
		return env.fail("qualify", err)
	}
	js, err := rep.JSON()
	if err != nil {
		return env.fail("qualify", err)
	}
	base := filepath.Join(*outDir, cliReportName(m.ID, m.Version, *model, rep.Mode))
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return env.fail("qualify", err)
	}
	if err := errors.Join(os.WriteFile(base+".json", js, 0o644), os.WriteFile(base+".md", rep.Markdown(), 0o644)); err != nil {
		return env.fail("qualify", err)
	}
	for _, s := range rep.Scenarios {
		line := fmt.Sprintf("%-8s %s", s.Status, s.Name)
		if s.Reason != "" {
			line += ": " + s.Reason
		}
		fmt.Fprintln(env.stdout, line)
	}
	fmt.Fprintf(env.stdout, "%d passed, %d failed, %d skipped\nreport: %s.json, %s.md\n",
		rep.Summary.Passed, rep.Summary.Failed, rep.Summary.Skipped, base, base)
	if err := cliStoreReport(ctx, cfg.Store.Path, pin.SHA256, rep, js); err != nil {
		fmt.Fprintf(env.stderr, "adhost qualify: report not stored: %v\n", err)
	}
	if !rep.Passed {
		return cliExitFail
	}
	return cliExitOK
}

var cliUnsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// cliReportName is the report's file name without extension.
func cliReportName(id, version, model, mode string) string {
	return cliUnsafeName.ReplaceAllString(fmt.Sprintf("qualify-%s-%s-%s-%s", id, version, model, mode), "_")
}

// cliStoreReport keeps the report in the store under the module digest.
func cliStoreReport(ctx context.Context, dir, digest string, rep *qualify.Report, js []byte) error {
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		return err // typically: a running host holds the store
	}
	defer s.Close()
	return s.PutQualification(ctx, digest, rep.FinishedAt, js)
}
