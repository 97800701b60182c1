package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"adhost/host/config"
	"adhost/runtime/manifest"
	"adhost/runtime/wasm"
	"adhost/store"
)

// cliPlugins is `adhost plugins list|verify|inspect|pin`.
func cliPlugins(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		return cliUsageError(env, "plugins", "want a subcommand: list, verify, inspect or pin")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(env.stdout, cliHelp["plugins"])
		return cliExitOK
	case "list":
		return cliPluginsList(env, args[1:])
	case "verify":
		return cliPluginsVerify(ctx, env, args[1:])
	case "inspect":
		return cliPluginsInspect(env, args[1:])
	case "pin":
		return cliPluginsPin(env, args[1:])
	}
	return cliUsageError(env, "plugins", "unknown subcommand %q (list, verify, inspect, pin)", args[0])
}

// cliReadModule reads a module and returns its bytes, its sha256 and its
// parsed embedded manifest (with the raw TOML).
func cliReadModule(path string) (b []byte, digest string, m *manifest.Manifest, raw []byte, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", nil, nil, err
	}
	if fi.Size() > wasm.MaxModuleBytes {
		return nil, "", nil, nil, fmt.Errorf("%s: larger than %d bytes", path, wasm.MaxModuleBytes)
	}
	b, err = os.ReadFile(path)
	if err != nil {
		return nil, "", nil, nil, err
	}
	sum := sha256.Sum256(b)
	digest = hex.EncodeToString(sum[:])
	raw, err = manifest.Extract(b)
	if err != nil {
		return b, digest, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err = manifest.Parse(raw)
	if err != nil {
		return b, digest, nil, raw, fmt.Errorf("%s: embedded %w", path, err)
	}
	return b, digest, m, raw, nil
}

// cliPluginsList prints the configured extensions without compiling them:
// the digest check and the embedded manifest are enough to say whether the
// file on disk is the one pinned. `plugins verify` does the full load.
func cliPluginsList(env *cliEnv, args []string) int {
	fs := cliFlags(env, "plugins list")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	asJSON := fs.Bool("json", false, "print a JSON array of the extensions")
	if _, code, ok := cliParse(fs, args); !ok {
		return code
	}
	cfg, err := config.Load(*cfgPath)
	if cfg == nil {
		return env.fail("plugins list", err)
	}
	qualified := cliQualifications(cfg.Store.Path)
	defer qualified.close()
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVERSION\tKIND\tSHA256\tVERIFIED\tQUALIFIED\tCAPABILITIES\tPERMISSIONS\tTOOLS")
	bad := false
	rows := []cliPluginRow{}
	for _, e := range cfg.Extensions {
		kind, caps, perms, tools, verified := "-", "-", "-", "-", "yes"
		_, digest, m, _, rerr := cliReadModule(e.Module)
		switch {
		case rerr != nil && digest == "":
			verified = "no: " + cliOneLine(cliUnwrapPath(rerr)).Error()
		case digest != e.SHA256:
			verified = "no: sha256 is " + cliShort(digest)
		case rerr != nil:
			verified = "no: " + cliOneLine(rerr).Error()
		case m.ID != e.ID || m.Version != e.Version:
			verified = fmt.Sprintf("no: manifest is %s@%s", m.ID, m.Version)
		}
		if verified != "yes" {
			bad = true
		}
		if m != nil {
			kind = string(m.Kind)
			caps = cliCaps(m)
			perms = cliPerms(m)
			tools = cliTools(m)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Version, kind, cliShort(e.SHA256), verified, qualified.latest(e.SHA256), caps, perms, tools)
		rows = append(rows, cliPluginRow{ID: e.ID, Version: e.Version, Kind: kind, SHA256: e.SHA256,
			Verified: verified == "yes", Problem: strings.TrimPrefix(verified, "no: "), Qualified: qualified.latest(e.SHA256),
			Capabilities: caps, Permissions: perms, Tools: tools})
	}
	if *asJSON {
		for i := range rows {
			if rows[i].Verified {
				rows[i].Problem = ""
			}
		}
		cliPrintJSON(env, rows)
	} else {
		tw.Flush()
	}
	if err != nil {
		fmt.Fprintln(env.stderr)
		env.fail("plugins list", err)
	}
	if bad || err != nil {
		return cliExitFail
	}
	return cliExitOK
}

// cliPluginRow is one extension of `plugins list --json`.
type cliPluginRow struct {
	ID           string `json:"id"`
	Version      string `json:"version"`
	Kind         string `json:"kind"`
	SHA256       string `json:"sha256"`
	Verified     bool   `json:"verified"`
	Problem      string `json:"problem,omitempty"`
	Qualified    string `json:"qualified"`
	Capabilities string `json:"capabilities"`
	Permissions  string `json:"permissions"`
	// Tools are the declared tools, "(side effects)" marking those that
	// may change something outside the run.
	Tools string `json:"tools"`
}

func cliShort(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	if d == "" {
		return "(none)"
	}
	return d
}

func cliCaps(m *manifest.Manifest) string {
	var on []string
	for k, v := range m.Capabilities {
		if v {
			on = append(on, k)
		}
	}
	slices.Sort(on)
	if len(on) == 0 {
		return "-"
	}
	return strings.Join(on, ",")
}

// cliTools lists the tools a manifest declares, each marked with
// "(side effects)" when a call may change something outside the run: what
// an operator weighs when choosing requires_approval.
func cliTools(m *manifest.Manifest) string {
	var out []string
	for _, t := range m.Tools {
		s := t.Name
		if t.HasSideEffects() {
			s += "(side effects)"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func cliPerms(m *manifest.Manifest) string {
	var p []string
	if m.Network != nil {
		net := "network:" + strings.Join(m.Network.Origins, ",")
		if m.Network.EndpointSetting != "" {
			net += "+endpoint(" + m.Network.EndpointSetting + ")"
		}
		if m.Network.OriginsSetting != "" {
			net += "+allowlist(" + m.Network.OriginsSetting + ")"
		}
		p = append(p, net)
	}
	if m.KV {
		p = append(p, "kv")
	}
	if m.Process != nil {
		// A local CLI adapter: the binaries an instance may be bound to.
		p = append(p, "process:"+strings.Join(m.Process.Binaries, ","))
	}
	for _, c := range m.Credentials {
		p = append(p, "credential:"+c.Name)
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, " ")
}

// cliPluginsVerify loads every pinned extension as serve does (digest,
// manifest, compile, ABI, imports, instantiate, info) and exits non-zero on
// any problem, printing one line per extension.
func cliPluginsVerify(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "plugins verify")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	data := fs.String("data", "", "store directory holding the compilation cache (overrides store.path)")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	cfg, err := cliLoadConfig(*cfgPath, "", *data)
	if err != nil {
		return env.fail("plugins verify", err)
	}
	// Only the extensions named, "ID" or "ID@VERSION"; a name that matches
	// no pin is an error, never a silent "ok".
	exts := cfg.Extensions
	if len(pos) > 0 {
		exts = nil
		for _, want := range pos {
			n := 0
			for _, e := range cfg.Extensions {
				if e.Ref() == want || e.ID == want {
					exts = append(exts, e)
					n++
				}
			}
			if n == 0 {
				return env.failf("plugins verify", "%q is not a pinned extension of %s", want, *cfgPath)
			}
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	failed := false
	verified := map[string]*manifest.Manifest{}
	for _, e := range exts {
		x, err := cliLoadExtension(ctx, e, filepath.Join(cfg.Store.Path, "wasm-cache"), log)
		if err != nil {
			env.fail("plugins verify", err)
			failed = true
			continue
		}
		fmt.Fprintf(env.stdout, "ok  %s  %s  sha256 %s\n", e.Ref(), x.Manifest().Kind, e.SHA256)
		verified[e.Ref()] = x.Manifest()
		x.Close(ctx)
	}
	// The local CLI binaries bound to providers and their account
	// directories (cli_binaries.go).
	if err := cliCheckBinaries(cfg, verified); err != nil {
		env.fail("plugins verify", err)
		failed = true
	}
	if failed {
		return cliExitFail
	}
	return cliExitOK
}

// cliPluginsInspect prints a module's sha256 and its embedded manifest.
func cliPluginsInspect(env *cliEnv, args []string) int {
	fs := cliFlags(env, "plugins inspect")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.stderr, "usage: adhost plugins inspect FILE.wasm")
		return cliExitUsage
	}
	_, digest, m, raw, err := cliReadModule(pos[0])
	if digest == "" {
		return env.fail("plugins inspect", err)
	}
	fmt.Fprintf(env.stdout, "file    %s\nsha256  %s\n", pos[0], digest)
	if m != nil {
		fmt.Fprintf(env.stdout, "id      %s@%s (%s)\n", m.ID, m.Version, m.Kind)
	}
	if raw != nil {
		fmt.Fprintf(env.stdout, "\n# embedded manifest\n%s", raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			fmt.Fprintln(env.stdout)
		}
	}
	if err != nil {
		return env.fail("plugins inspect", err)
	}
	return cliExitOK
}

// cliPluginsPin prints (or with --write, updates in host.toml) the pin of a
// module the operator has reviewed. The module's embedded manifest must
// carry the id and version being pinned.
func cliPluginsPin(env *cliEnv, args []string) int {
	fs := cliFlags(env, "plugins pin")
	cfgPath := fs.String("config", "host.toml", "configuration file to update with --write")
	write := fs.Bool("write", false, "update the pin in the configuration file in place, keeping comments")
	existing := fs.Bool("existing", false, "with --write: only update a pin that is already configured (make pin)")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintln(env.stderr, "usage: adhost plugins pin ID@VERSION FILE.wasm [--write] [--config host.toml]")
		return cliExitUsage
	}
	id, version, found := strings.Cut(pos[0], "@")
	if !found || id == "" || version == "" {
		return env.failf("plugins pin", "%q is not ID@VERSION", pos[0])
	}
	file := pos[1]
	_, digest, m, _, err := cliReadModule(file)
	if err != nil {
		return env.fail("plugins pin", err)
	}
	if m.ID != id || m.Version != version {
		return env.failf("plugins pin", "%s embeds the manifest of %s@%s, not %s", file, m.ID, m.Version, pos[0])
	}
	if !*write {
		fmt.Fprintf(env.stdout, "[[extensions]]\nid = %q\nversion = %q\nmodule = %q\nsha256 = %q\n", id, version, filepath.ToSlash(file), digest)
		return cliExitOK
	}
	path, err := filepath.Abs(*cfgPath)
	if err != nil {
		return env.fail("plugins pin", err)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return env.fail("plugins pin", err)
	}
	if *existing {
		cfg, err := config.Decode(doc, path)
		if err != nil {
			return env.fail("plugins pin", err)
		}
		if cfg.ExtensionByRef(pos[0]) == nil {
			fmt.Fprintf(env.stdout, "%s is not pinned in %s; skipped\n", pos[0], *cfgPath)
			return cliExitOK
		}
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return env.fail("plugins pin", err)
	}
	out, err := config.SetPin(doc, path, id, version, abs, digest)
	if err != nil {
		return env.fail("plugins pin", err)
	}
	if string(out) == string(doc) {
		fmt.Fprintf(env.stdout, "%s already pinned at sha256 %s\n", pos[0], digest)
		return cliExitOK
	}
	if err := cliWriteFileAtomic(path, out); err != nil {
		return env.fail("plugins pin", err)
	}
	fmt.Fprintf(env.stdout, "pinned %s sha256 %s in %s\n", pos[0], digest, *cfgPath)
	return cliExitOK
}

// cliWriteFileAtomic replaces path with data via a temporary file in the
// same directory, keeping path's permission bits.
func cliWriteFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// cliQualifiedList reads the latest qualification of each pinned digest from
// the store for `plugins list`. While a running host holds the store (Badger
// allows one process), the column says so instead of failing the listing.
type cliQualifiedList struct {
	s   *store.Store
	oc  *operatorClient // the running host that holds the store
	err error
}

func cliQualifications(dir string) *cliQualifiedList {
	if _, err := os.Stat(dir); err != nil {
		return &cliQualifiedList{} // no store yet: nothing qualified
	}
	s, err := store.Open(dir, store.Options{})
	if errors.Is(err, store.ErrInUse) {
		if oc, oerr := dialOperator(dir); oerr == nil {
			return &cliQualifiedList{oc: oc}
		}
	}
	return &cliQualifiedList{s: s, err: err}
}

// latest renders the newest report of digest: "passed 2026-11-30 (simulate)",
// "failed …", "-" when there is none, "?" when the store is unavailable.
func (q *cliQualifiedList) latest(digest string) string {
	var rec *store.Qualification
	switch {
	case q.err != nil:
		return "? (store in use)"
	case q.oc != nil:
		var oq operatorQualification
		err := q.oc.do(context.Background(), http.MethodGet, "/operator/v1/qualifications/"+digest+"/latest", nil, &oq)
		var ref *operatorRefusal
		if errors.As(err, &ref) && ref.status == http.StatusNotFound {
			return "-"
		}
		if err != nil {
			return "?"
		}
		rec = &store.Qualification{Digest: digest, Created: oq.Created, Report: oq.Report}
	case q.s == nil:
		return "-"
	default:
		var err error
		rec, err = q.s.LatestQualification(context.Background(), digest)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return "-"
			}
			return "?"
		}
	}
	var rep struct {
		Passed bool   `json:"passed"`
		Mode   string `json:"mode"`
	}
	if json.Unmarshal(rec.Report, &rep) != nil {
		return "?"
	}
	status := "failed"
	if rep.Passed {
		status = "passed"
	}
	return fmt.Sprintf("%s %s (%s)", status, rec.Created.Format(time.DateOnly), rep.Mode)
}

func (q *cliQualifiedList) close() {
	if q.s != nil {
		q.s.Close()
	}
}
