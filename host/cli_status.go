package host

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime/protocol"
	"adhost/store"
)

// cliStatusReport is what `adhost status` found, printed as text or, with
// --json, as one JSON object.
type cliStatusReport struct {
	URL      string          `json:"url"`
	Health   int             `json:"health"` // HTTP status of GET /health
	Features []string        `json:"features,omitempty"`
	Provider []cliStatusProv `json:"providers,omitempty"`
	Host     *HostStatus     `json:"status,omitempty"`
	// Operator is what the host's operator socket says (pid, versions,
	// reloads) when this command runs beside it.
	Operator *OperatorInfo      `json:"operator,omitempty"`
	Error    *cliStatusErrorRef `json:"error,omitempty"`
}

type cliStatusProv struct {
	ID     string   `json:"id"`
	Vendor string   `json:"vendor"`
	Health string   `json:"health"`
	Models []string `json:"models"`
}

// cliStatusErrorRef is why the report stops short: "NO_TOKEN" (none
// configured), a wire code (UNAUTHORIZED: the token was refused), or
// "UNREACHABLE".
type cliStatusErrorRef struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// cliStatus is `adhost status`: the health of a running host and, with a
// token, its protocol features, providers, runs and extension instances.
// Without a token, or with one the host refuses, it says so and exits 1:
// a status that could not be read is not a healthy host.
func cliStatus(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "status")
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return cliUsageError(env, "status", "unexpected argument %q", pos[0])
	}
	url, token, tokErr := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep := &cliStatusReport{URL: url}
	done := func(code int) int {
		if *asJSON {
			cliPrintJSON(env, rep)
		}
		if rep.Error != nil {
			fmt.Fprintf(env.stderr, "adhost status: %s: %s\n", rep.Error.Code, rep.Error.Message)
		}
		return code
	}
	text := env.stdout
	if *asJSON {
		text = io.Discard
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		return env.fail("status", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		rep.Error = &cliStatusErrorRef{Code: "UNREACHABLE", Message: fmt.Sprintf("%s is not reachable: %v", url, err)}
		return done(cliExitFail)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	rep.Health = resp.StatusCode
	fmt.Fprintf(text, "host     %s\nhealth   %d %s\n", url, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return done(cliExitFail)
	}
	if cfg, _ := config.Load(*cfgPath); cfg != nil {
		if oc, err := dialOperator(cfg.Store.Path); err == nil {
			var info OperatorInfo
			if oc.do(ctx, http.MethodGet, "/operator/v1/status", nil, &info) == nil {
				rep.Operator = &info
				fmt.Fprintf(text, "process  pid=%d adhost=%s wazero=%s abi=%d started=%s reloads=%d config=%s\n",
					info.PID, info.Version.Version, info.Version.Wazero, info.Version.ABI,
					info.StartedAt.UTC().Format(time.RFC3339), info.Reloads, info.Config)
			}
		}
	}
	if tokErr != nil {
		rep.Error = &cliStatusErrorRef{Code: "NO_TOKEN", Message: fmt.Sprintf("%v; features, providers and runs need a token (--token-file or ADHOST_TOKEN)", tokErr)}
		return done(cliExitFail)
	}
	fail := func(err error) int {
		var ce *client.Error
		switch {
		case errors.As(err, &ce) && ce.Code == protocol.CodeUnauthorized:
			rep.Error = &cliStatusErrorRef{Code: string(ce.Code), Message: "the host refused the token (check --token-file or ADHOST_TOKEN)"}
		case errors.As(err, &ce):
			rep.Error = &cliStatusErrorRef{Code: string(ce.Code), Message: ce.Message}
		default:
			rep.Error = &cliStatusErrorRef{Code: "UNREACHABLE", Message: err.Error()}
		}
		return done(cliExitFail)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return fail(err)
	}
	p, err := c.Protocol(ctx)
	if err != nil {
		return fail(err)
	}
	rep.Features = p.Features
	fmt.Fprintf(text, "features %s\n", strings.Join(p.Features, " "))
	provs, err := c.Providers(ctx, false)
	if err != nil {
		return fail(err)
	}
	for _, pr := range provs {
		health := "-"
		if pr.Health != nil {
			health = pr.Health.Status
		}
		rep.Provider = append(rep.Provider, cliStatusProv{ID: pr.ID, Vendor: pr.Vendor, Health: health, Models: pr.Models})
		fmt.Fprintf(text, "provider %s (%s) health=%s models=%v\n", pr.ID, pr.Vendor, health, pr.Models)
	}
	st, err := cliFetchStatus(ctx, hc, url, token)
	if err != nil {
		return fail(err)
	}
	rep.Host = st
	fmt.Fprintf(text, "runs     running=%d subjects=%d max=%d per-subject=%d\n",
		st.Runs.Running, st.Runs.Subjects, st.Runs.MaxConcurrent, st.Runs.MaxPerSubject)
	for _, x := range st.Extensions {
		capText := "none"
		if x.Cap > 0 {
			capText = fmt.Sprintf("%d (reserved %d)", x.Cap, x.Reserved)
		}
		fmt.Fprintf(text, "extension %s@%s (%s) live=%d idle=%d in-use=%d warm=%d idle-ms=%d cap=%s\n",
			x.ID, x.Version, x.Kind, x.Live, x.Idle, x.InUse, x.Warm, x.IdleMs, capText)
	}
	return done(cliExitOK)
}

// cliFetchStatus reads the host's status endpoint.
func cliFetchStatus(ctx context.Context, hc *http.Client, url, token string) (*HostStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+StatusPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error struct {
				Code    protocol.Code `json:"code"`
				Message string        `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
			return nil, &client.Error{Code: eb.Error.Code, Message: eb.Error.Message, Status: resp.StatusCode}
		}
		return nil, fmt.Errorf("%s: HTTP %d", StatusPath, resp.StatusCode)
	}
	var st HostStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("status body: %w", err)
	}
	return &st, nil
}

// cliDoctorCheck is one line of `adhost doctor`.
type cliDoctorCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Detail is the problem (OK false) or a note (a running host found,
	// a store held by it).
	Detail string `json:"detail,omitempty"`
}

// cliDoctor is `adhost doctor`: checks of a configuration without serving
// — validity, listen address, TLS files, secrets, extensions, store. Each
// check prints "ok" or "FAIL"; any FAIL exits 1. Beside a running host it
// does not try to take what the host holds: an address answered by an
// adhost /health is that host (checked over HTTP, not bound), and a store
// held by another process is reported as held, with its pid.
func cliDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "doctor")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	asJSON := fs.Bool("json", false, "print a JSON array of the checks")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return cliUsageError(env, "doctor", "unexpected argument %q", pos[0])
	}
	var checks []cliDoctorCheck
	failed := false
	note := func(name, detail string) {
		checks = append(checks, cliDoctorCheck{Name: name, OK: true, Detail: detail})
	}
	check := func(name string, err error) {
		if err != nil {
			failed = true
			checks = append(checks, cliDoctorCheck{Name: name, Detail: err.Error()})
			return
		}
		note(name, "")
	}
	defer func() {
		if *asJSON {
			cliPrintJSON(env, checks)
			return
		}
		for _, c := range checks {
			lines := strings.Split(c.Detail, "\n")
			switch {
			case !c.OK:
				fmt.Fprintf(env.stdout, "FAIL  %-22s %s\n", c.Name, lines[0])
				for _, l := range lines[1:] {
					fmt.Fprintf(env.stdout, "      %-22s %s\n", "", l)
				}
			case c.Detail != "":
				fmt.Fprintf(env.stdout, "ok    %-22s %s\n", c.Name, c.Detail)
			default:
				fmt.Fprintf(env.stdout, "ok    %s\n", c.Name)
			}
		}
	}()
	cfg, err := config.Load(*cfgPath)
	check("configuration", err)
	if cfg == nil {
		return cliExitFail
	}

	running := false
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	switch {
	case err == nil:
		ln.Close()
		check("listen "+cfg.Server.Listen, nil)
	case cliIsAdhost(ctx, cfg):
		running = true
		note("listen "+cfg.Server.Listen, "in use by a running adhost (GET /health answers); `adhost status` shows it")
	default:
		check("listen "+cfg.Server.Listen, fmt.Errorf("%v (something other than an adhost holds it)", err))
	}
	if cfg.Server.TLSCert != "" {
		_, err := TLSConfig(cfg.Server.TLSCert, cfg.Server.TLSKey)
		check("tls certificate", err)
	}
	_, err = cfg.ResolveTokens()
	check("token secrets", err)
	var serrs []error
	for i, p := range cfg.Providers {
		for _, slot := range cliSortedKeys(p.Secrets) {
			if _, err := p.Secrets[slot].Resolve(); err != nil {
				serrs = append(serrs, fmt.Errorf("providers[%d].secrets.%s: %w", i, slot, err))
			}
		}
	}
	check("provider secrets", errors.Join(serrs...))
	check("pins and bindings", cliPrecheck(cfg))

	log := slog.New(slog.DiscardHandler)
	for _, e := range cfg.Extensions {
		x, err := cliLoadExtension(ctx, e, filepath.Join(cfg.Store.Path, "wasm-cache"), log)
		check("extension "+e.Ref(), err)
		if x != nil {
			x.Close(ctx)
		}
	}
	if held, err := cliCheckStore(cfg.Store.Path); held != "" {
		if !running {
			held += " (no adhost answers on " + cfg.Server.Listen + ": another command, or a host on another address)"
		}
		note("store "+cfg.Store.Path, held)
	} else {
		check("store "+cfg.Store.Path, err)
	}
	if cfg.Usage.JSONL != "" {
		check("usage sink "+cfg.Usage.JSONL, cliCheckWritableDir(filepath.Dir(cfg.Usage.JSONL)))
	}
	if failed {
		return cliExitFail
	}
	return cliExitOK
}

// cliIsAdhost reports whether an adhost answers /health on cfg's listen
// address (the protocol's health body, over TLS when cfg has TLS).
func cliIsAdhost(ctx context.Context, cfg *config.File) bool {
	scheme := "http"
	if cfg.Server.TLSCert != "" {
		scheme = "https"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+cfg.Server.Listen+"/health", nil)
	if err != nil {
		return false
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // identity is not what doctor checks here
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), protocol.HealthProto)
}

// cliCheckStore opens and closes the store. A store another process
// holds is not a failure of the configuration: held says so (with the
// holder's pid when known) and err is nil.
func cliCheckStore(dir string) (held string, err error) {
	s, err := store.Open(dir, store.Options{})
	if err == nil {
		return "", s.Close()
	}
	if errors.Is(err, store.ErrInUse) {
		return "held by another process: " + err.Error(), nil
	}
	return "", err
}

func cliCheckWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".adhost-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func cliSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
