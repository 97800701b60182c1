package host

import (
	"context"
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
	"adhost/store"
)

// cliStatus is `adhost status`: the health of a running host and, with a
// token, its protocol features and providers.
func cliStatus(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "status")
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	if _, code, ok := cliParse(fs, args); !ok {
		return code
	}
	url, token, tokErr := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		return env.fail("status", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return env.failf("status", "%s is not reachable: %v", url, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	fmt.Fprintf(env.stdout, "host     %s\nhealth   %d %s\n", url, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return cliExitFail
	}
	if tokErr != nil {
		fmt.Fprintf(env.stdout, "(no token: %v; protocol and providers not shown)\n", tokErr)
		return cliExitOK
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliClientFailed(env, "status", url, err)
	}
	p, err := c.Protocol(ctx)
	if err != nil {
		return cliClientFailed(env, "status", url, err)
	}
	fmt.Fprintf(env.stdout, "features %s\n", strings.Join(p.Features, " "))
	provs, err := c.Providers(ctx, false)
	if err != nil {
		return cliClientFailed(env, "status", url, err)
	}
	for _, pr := range provs {
		health := "-"
		if pr.Health != nil {
			health = pr.Health.Status
		}
		fmt.Fprintf(env.stdout, "provider %s (%s) health=%s models=%v\n", pr.ID, pr.Vendor, health, pr.Models)
	}
	st, err := cliFetchStatus(ctx, hc, url, token)
	if err != nil {
		return env.failf("status", "%s%s: %v", strings.TrimSuffix(url, "/"), StatusPath, err)
	}
	fmt.Fprintf(env.stdout, "runs     running=%d subjects=%d max=%d per-subject=%d\n",
		st.Runs.Running, st.Runs.Subjects, st.Runs.MaxConcurrent, st.Runs.MaxPerSubject)
	for _, x := range st.Extensions {
		capText := "none"
		if x.Cap > 0 {
			capText = fmt.Sprintf("%d (reserved %d)", x.Cap, x.Reserved)
		}
		fmt.Fprintf(env.stdout, "extension %s@%s (%s) live=%d idle=%d in-use=%d warm=%d idle-ms=%d cap=%s\n",
			x.ID, x.Version, x.Kind, x.Live, x.Idle, x.InUse, x.Warm, x.IdleMs, capText)
	}
	return cliExitOK
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
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var st HostStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("status body: %w", err)
	}
	return &st, nil
}

// cliDoctor is `adhost doctor`: checks of a configuration without serving
// — validity, listen port, TLS files, secrets, extensions, store. Each
// check prints "ok" or "FAIL"; any FAIL exits 1.
func cliDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "doctor")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	if _, code, ok := cliParse(fs, args); !ok {
		return code
	}
	failed := false
	check := func(name string, err error) {
		if err != nil {
			failed = true
			for i, line := range strings.Split(err.Error(), "\n") {
				if i == 0 {
					fmt.Fprintf(env.stdout, "FAIL  %-22s %s\n", name, line)
				} else {
					fmt.Fprintf(env.stdout, "      %-22s %s\n", "", line)
				}
			}
			return
		}
		fmt.Fprintf(env.stdout, "ok    %s\n", name)
	}
	cfg, err := config.Load(*cfgPath)
	check("configuration", err)
	if cfg == nil {
		return cliExitFail
	}

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err == nil {
		ln.Close()
		check("listen "+cfg.Server.Listen, nil)
	} else {
		check("listen "+cfg.Server.Listen, fmt.Errorf("%v (is a host already running? see `adhost status`)", err))
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
	check("store "+cfg.Store.Path, cliCheckStore(cfg.Store.Path))
	if cfg.Usage.JSONL != "" {
		check("usage sink "+cfg.Usage.JSONL, cliCheckWritableDir(filepath.Dir(cfg.Usage.JSONL)))
	}
	if failed {
		return cliExitFail
	}
	return cliExitOK
}

// cliCheckStore opens and closes the store. A store locked by a running
// host is fine.
func cliCheckStore(dir string) error {
	s, err := store.Open(dir, store.Options{})
	if err == nil {
		return s.Close()
	}
	if errors.Is(err, store.ErrInUse) {
		return nil // held by a running host
	}
	return err
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
