package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"adhost/host/config"
	"adhost/internal/qualify"
	"adhost/runtime"
	"adhost/store"
)

// cliQualify runs the provider conformance scenarios (wire-core §16)
// against a pinned extension and writes a qualification report as JSON and
// Markdown (default: under <store>/qualify) and into the store, keyed by the
// module's sha256, so `adhost plugins list` can show the latest result of
// each pinned digest. A failed qualification exits non-zero.
//
//	adhost qualify --extension ID@VERSION [--simulate] [--model M]
//	adhost qualify --provider P --model M [--simulate | --live]
//
// Simulation (the default) binds a provider extension with a configurable
// endpoint to the loopback vendor simulator with a generated key: no real
// service, no configured credential is touched, and --extension needs no
// [[providers]] entry at all. An extension without network access (the
// fixture) runs as configured, which needs no network either. --live binds
// a configured instance exactly as serve does — its settings and
// credentials — and talks to the real service; it must be asked for
// explicitly, and it says so (with a note on cost) before it starts.
func cliQualify(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "qualify")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	extRef := fs.String("extension", "", "pinned extension ID@VERSION to qualify against the simulator")
	providerID := fs.String("provider", "", "provider instance id")
	model := fs.String("model", "", "model id (required with --provider)")
	simulate := fs.Bool("simulate", false, "use the loopback vendor simulator (the default)")
	live := fs.Bool("live", false, "talk to the real service with the configured credentials")
	outDir := fs.String("out", "", "directory for the JSON and Markdown reports (default <store>/qualify)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout instead of the scenario lines")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 0:
		return cliUsageError(env, "qualify", "unexpected argument %q", pos[0])
	case *simulate && *live:
		return cliUsageError(env, "qualify", "--simulate and --live exclude each other")
	case (*extRef == "") == (*providerID == ""):
		return cliUsageError(env, "qualify", "want exactly one of --extension ID@VERSION and --provider P")
	case *extRef != "" && *live:
		fmt.Fprintln(env.stderr, "adhost qualify: --live needs a configured provider instance (--provider P): its settings and credentials")
		return cliExitUsage
	case *providerID != "" && *model == "":
		return cliUsageError(env, "qualify", "--provider needs --model")
	}
	cfg, err := cliLoadConfig(*cfgPath, "", "")
	if err != nil {
		return env.fail("qualify", err)
	}
	if *outDir == "" {
		*outDir = filepath.Join(cfg.Store.Path, "qualify")
	}
	var p config.Provider
	if *extRef != "" {
		if cfg.ExtensionByRef(*extRef) == nil {
			return env.failf("qualify", "no pinned [[extensions]] entry %q in %s", *extRef, *cfgPath)
		}
		p = config.Provider{ID: "qualify", Extension: *extRef}
		if *model == "" {
			*model = "fixture-model"
		}
	} else {
		idx := -1
		for i, cp := range cfg.Providers {
			if cp.ID == *providerID {
				idx = i
			}
		}
		if idx < 0 {
			return env.failf("qualify", "no [[providers]] entry with id %q in %s", *providerID, *cfgPath)
		}
		p = cfg.Providers[idx]
	}
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
	case !*live && m.HasProcess():
		// A local CLI adapter: recorded transcripts through a fake binary.
		rep, err = qualify.SimulateCLI(ctx, x, qualify.SimulateOptions{Model: *model, Logger: log})
	case !*live && m.EndpointSetting() != "":
		rep, err = qualify.Simulate(ctx, x, qualify.SimulateOptions{Model: *model, Logger: log})
	case !*live && m.HasNetwork():
		err = fmt.Errorf("%s reaches the network but has no endpoint setting to point at the simulator; use --live", p.Extension)
	default:
		if *live {
			if err = cliPrecheck(cfg); err != nil {
				break
			}
			endpoint, _ := p.Settings[m.EndpointSetting()].(string)
			fmt.Fprintf(env.stderr, "adhost qualify: --live: sending real requests for %s (model %s) to %s with the configured credentials; the vendor may bill them.\n",
				p.ID, *model, cliOrDefault(endpoint, "the extension's declared origins"))
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
	// A model of the vendor simulator is not the operator's: it is not
	// part of the name of an --extension report.
	nameModel := *model
	if *providerID == "" {
		nameModel = ""
	}
	base := filepath.Join(*outDir, cliReportName(m.ID, m.Version, pin.SHA256, nameModel, rep.Mode, time.Now()))
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return env.fail("qualify", err)
	}
	if err := errors.Join(os.WriteFile(base+".json", js, 0o644), os.WriteFile(base+".md", rep.Markdown(), 0o644)); err != nil {
		return env.fail("qualify", err)
	}
	stored := cliStoreReport(ctx, cfg.Store.Path, pin.SHA256, rep, js)
	if *asJSON {
		fmt.Fprintln(env.stdout, string(js))
	} else {
		for _, s := range rep.Scenarios {
			line := fmt.Sprintf("%-8s %s", s.Status, s.Name)
			if s.Reason != "" {
				line += ": " + s.Reason
			}
			fmt.Fprintln(env.stdout, line)
		}
		fmt.Fprintf(env.stdout, "%d passed, %d failed, %d skipped\nreport: %s.json, %s.md\n",
			rep.Summary.Passed, rep.Summary.Failed, rep.Summary.Skipped, base, base)
	}
	if stored != nil {
		// The report files exist, but plugins list would not show the
		// result: that is a failure of the command.
		fmt.Fprintf(env.stderr, "adhost qualify: report not stored: %v\n", stored)
		return cliExitFail
	}
	if !rep.Passed {
		return cliExitFail
	}
	return cliExitOK
}

func cliOrDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var cliUnsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// cliReportName is the report's file name without extension: the
// extension, its version, the first 12 hex digits of the module digest
// the report is about, the model when a configured instance was qualified,
// the mode and the time (UTC, to the second), so reports of different
// builds or runs never overwrite each other.
func cliReportName(id, version, digest, model, mode string, at time.Time) string {
	parts := []string{"qualify", id, version, "sha256_" + digest[:min(12, len(digest))]}
	if model != "" {
		parts = append(parts, model)
	}
	parts = append(parts, mode, at.UTC().Format("20060102T150405Z"))
	return cliUnsafeName.ReplaceAllString(strings.Join(parts, "-"), "_")
}

// cliStoreReport keeps the report in the store under the module digest.
func cliStoreReport(ctx context.Context, dir, digest string, rep *qualify.Report, js []byte) error {
	s, err := store.Open(dir, store.Options{})
	if errors.Is(err, store.ErrInUse) {
		// A running host holds the store: it stores the report.
		oc, oerr := dialOperator(dir)
		if oerr != nil {
			return fmt.Errorf("%w; and %v", err, oerr)
		}
		return oc.do(ctx, http.MethodPut, "/operator/v1/qualifications/"+digest, js, nil)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	return s.PutQualification(ctx, digest, rep.FinishedAt, js)
}
