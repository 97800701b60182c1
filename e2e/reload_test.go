package e2e_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestReload: with a streaming run in flight, a reload that re-pins the
// fixture (new digest, poolSize 1), allows another model and adds a token
// switches new runs to all of it while the held run goes on on the old
// module until it is cancelled; a broken configuration and a change that
// needs a restart are refused with the old configuration serving; SIGHUP
// reloads the same way.
func TestReload(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	appendSiteConfig(t, s, "[tokens.grants]\nmetrics = true\n\n[metrics]\nenabled = true\n")
	srv := startServer(t, s)
	dev := newRunClient(t, srv, s.token)
	oldDigest := s.plugins["fixture"].digest
	held := holdRun(t, dev)

	setFixturePoolSize(t, s, 1)
	newDigest := digestOf(t, s.plugins["fixture"].path)
	editSiteConfig(t, s, `models = ["fixture-model"]`, `models = ["fixture-model", "fixture-model-b"]`)
	carol := addSiteToken(t, s, "carol", "carol", []string{fixtureProvider}, nil)

	if code, out, errOut := adhost(t, "reload", "--config", s.config); code != 0 || !strings.Contains(out, "reloaded") {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	if !srv.stderr.waitFor("reloaded configuration") {
		t.Errorf("no reload line in the log:\n%s", srv.stderr)
	}
	// New runs: the new model, the new token, the new pin.
	req := runRequest("conformance:text")
	req.Model = "fixture-model-b"
	if res, err := newRunClient(t, srv, carol).Run(t.Context(), req); err != nil || res.Text != "Hello fixture" {
		t.Fatalf("run with the new model and token: %v %+v", err, res)
	}
	st := fetchStatusRaw(t, srv, s.token)
	if !strings.Contains(st, `"sha256":"`+newDigest+`"`) || strings.Contains(st, oldDigest) || !strings.Contains(st, `"warm":1`) {
		t.Fatalf("status after reload: %s", st)
	}
	if code, out, _ := adhost(t, "status", "--config", s.config, "--url", srv.URL); code != 0 || !strings.Contains(out, "reloads=1") {
		t.Fatalf("adhost status after reload: %d\n%s", code, out)
	}
	// The metrics name the reload and the pin new runs use.
	metrics := scrapeMetrics(t, srv, s.token)
	if !strings.Contains(metrics, `adhost_config_reloads_total{outcome="applied"} 1`) ||
		!strings.Contains(metrics, `adhost_extension_info{extension="fixture",sha256="`+newDigest+`",version="1.0.0"} 1`) ||
		strings.Contains(metrics, oldDigest) {
		t.Fatalf("metrics after the reload:\n%s", metrics)
	}
	// The held run still runs on the old module.
	select {
	case err := <-held.done:
		t.Fatalf("the held run ended at the reload: %v", err)
	default:
	}
	if !strings.Contains(st, `"running":1`) {
		t.Fatalf("the held run is not running after the reload: %s", st)
	}
	held.stop(t)

	// A broken configuration is refused; the old one keeps serving.
	good, _ := os.ReadFile(s.config)
	os.WriteFile(s.config, append(append([]byte(nil), good...), "\n[limits]\nmax_stepz = 1\n"...), 0o644)
	if code, _, errOut := adhost(t, "reload", "--config", s.config); code != 1 || !strings.Contains(errOut, "max_stepz") {
		t.Fatalf("broken reload: exit %d %s", code, errOut)
	}
	// A change that needs a restart is refused too.
	os.WriteFile(s.config, []byte(strings.Replace(string(good), "[usage]\nhost_id = \"e2e\"", "[usage]\nhost_id = \"other\"", 1)), 0o644)
	if code, _, errOut := adhost(t, "reload", "--config", s.config); code != 1 || !strings.Contains(errOut, "[usage] changed: that needs a restart") {
		t.Fatalf("restart-only reload: exit %d %s", code, errOut)
	}
	if _, err := newRunClient(t, srv, carol).Run(t.Context(), req); err != nil {
		t.Fatalf("the old configuration stopped serving after refused reloads: %v", err)
	}
	if m := scrapeMetrics(t, srv, s.token); !strings.Contains(m, `adhost_config_reloads_total{outcome="refused"} 2`) {
		t.Fatalf("refused reloads not counted:\n%s", m)
	}

	// SIGHUP: carol's token goes.
	os.WriteFile(s.config, good[:len(good)-len(carolTokenBlock(t, good))], 0o644)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := newRunClient(t, srv, carol).Run(t.Context(), runRequest("conformance:text"))
		var ce *client.Error
		if errors.As(err, &ce) && ce.Code == protocol.CodeUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's token still works after SIGHUP: %v\n%s", err, srv.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if srv.stop(t, os.Interrupt) != 0 {
		t.Fatalf("serve exit after reloads:\n%s", srv.stderr)
	}
}

// scrapeMetrics is GET /metrics with token.
func scrapeMetrics(t *testing.T, srv *server, token string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, body := doRaw(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// fetchStatusRaw is the status endpoint's body.
func fetchStatusRaw(t *testing.T, srv *server, token string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/adhost/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, body := doRaw(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status endpoint: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// carolTokenBlock is the [[tokens]] entry addSiteToken appended last.
func carolTokenBlock(t *testing.T, doc []byte) string {
	t.Helper()
	i := strings.LastIndex(string(doc), "\n[[tokens]]\nid = \"carol\"")
	if i < 0 {
		t.Fatal("no carol token in host.toml")
	}
	return string(doc[i:])
}
