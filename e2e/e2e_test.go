package e2e_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/host/config"
	"adhost/internal/testenv"
	"adhost/runtime/protocol"
)

// adhostBin is the command under test: $ADHOST_BIN when set (make test
// points it at the bin/adhost it just built), else a fresh build. wasmCache
// is a compilation cache shared by every test host, so only the first one
// pays for compiling the plugins.
var (
	adhostBin string
	buildErr  error
	wasmCache string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "adhost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wasmCache = filepath.Join(dir, "wasm-cache")
	if err := os.Mkdir(wasmCache, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if adhostBin = os.Getenv("ADHOST_BIN"); adhostBin == "" {
		adhostBin = filepath.Join(dir, "adhost")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", adhostBin, "./host/cmd/adhost")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build adhost: %v\n%s", err, out)
		}
	}
	code := m.Run()
	testenv.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needBinary(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// plugin is one built extension copied into a test directory.
type plugin struct {
	id, version, path, digest string
}

func digestOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// copyPlugin builds plugins/<id> (once per test binary) and copies the
// module into dir, so a test may damage its copy.
func copyPlugin(t *testing.T, dir, id, version string) plugin {
	t.Helper()
	src := testenv.BuildPlugin(t, "plugins/"+id)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, id+"-"+version+".wasm")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return plugin{id: id, version: version, path: dst, digest: digestOf(t, dst)}
}

// site is a test host: its directory, host.toml, token and plugins.
type site struct {
	dir, config, token string
	plugins            map[string]plugin
}

// newSite writes the dev default of host-config.md §4 with fresh pins into
// a temporary directory.
func newSite(t *testing.T) *site {
	t.Helper()
	dir := t.TempDir()
	s := &site{dir: dir, config: filepath.Join(dir, "host.toml"), plugins: map[string]plugin{}}
	for _, id := range []string{"fixture", "conformance-tools"} {
		s.plugins[id] = copyPlugin(t, dir, id, "1.0.0")
	}
	s.token = strings.Repeat("e2e-token-", 4)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wasmCache, filepath.Join(dir, "data", "wasm-cache")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "dev.token"), []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fx, ct := s.plugins["fixture"], s.plugins["conformance-tools"]
	doc := fmt.Sprintf(`version = 1

[usage]
host_id = "e2e"
jsonl = "data/usage.jsonl"

[[extensions]]
id = "fixture"
version = "1.0.0"
module = %q
sha256 = %q

[[extensions]]
id = "conformance-tools"
version = "1.0.0"
module = %q
sha256 = %q

[[providers]]
id = "fixture"
extension = "fixture@1.0.0"
account_id = "local"
models = ["fixture-model"]

[[tools]]
extension = "conformance-tools@1.0.0"
names = ["conformance_lookup"]

[[tokens]]
id = "dev"
subject = "dev-user"
secret = { file = "data/dev.token" }
providers = ["fixture"]
tools = ["conformance_lookup"]
`, filepath.Base(fx.path), fx.digest, filepath.Base(ct.path), ct.digest)
	if siteBackend != nil {
		doc = siteBackend(doc) // the backend matrix (cluster_test.go)
	}
	if err := os.WriteFile(s.config, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// adhost runs a short command to completion.
func adhost(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	needBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, adhostBin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("adhost %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// server is a running `adhost serve`.
type server struct {
	cmd    *exec.Cmd
	URL    string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer starts `adhost serve --listen 127.0.0.1:0` and waits for its
// "listening on" line. The process is killed at cleanup if still running.
func startServer(t *testing.T, s *site, extra ...string) *server {
	t.Helper()
	needBinary(t)
	args := append([]string{"serve", "--config", s.config, "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(adhostBin, args...)
	srv := &server{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = srv.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- url
			}
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		srv.err = cmd.Wait()
		close(srv.done)
	}()
	t.Cleanup(func() {
		select {
		case <-srv.done:
		default:
			cmd.Process.Kill()
			<-srv.done
		}
	})
	select {
	case url, ok := <-lines:
		if !ok {
			<-srv.done
			t.Fatalf("adhost serve exited before listening (%v):\n%s", srv.err, srv.stderr)
		}
		srv.URL = url
	case <-time.After(3 * time.Minute): // a cold compile of the plugins takes seconds, not minutes
		t.Fatalf("adhost serve did not print a listening line:\n%s", srv.stderr)
	}
	return srv
}

// stop sends sig and returns the exit code.
func (s *server) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("adhost serve did not exit after %v:\n%s", sig, s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

func TestServeHealthAndSIGTERM(t *testing.T) {
	s := newSite(t)
	srv := startServer(t, s)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("listening on %q", srv.URL)
	}
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health = %d %s", resp.StatusCode, body)
	}
	var health map[string]any
	if err := json.Unmarshal(body, &health); err != nil {
		t.Fatalf("/health body %q: %v", body, err)
	}
	if got := resp.Header.Get("AgenticDriver-Version"); got != "1.0" {
		t.Errorf("AgenticDriver-Version = %q", got)
	}

	// The token from the file authenticates; a wrong one does not.
	for _, tc := range []struct {
		token string
		want  int
	}{{s.token, http.StatusOK}, {strings.Repeat("x", 40), http.StatusUnauthorized}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/protocol", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("/v1/protocol with token %.8s…: %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0\n%s", code, srv.stderr)
	}
	if strings.Contains(srv.stderr.String(), s.token) {
		t.Error("the token appears in the host's log")
	}
}

// TestServeTLS serves HTTPS with a certificate from host.toml and checks it
// with a client that trusts only the test CA.
func TestServeTLS(t *testing.T) {
	s := newSite(t)
	certPEM, keyPEM := selfSigned(t)
	os.WriteFile(filepath.Join(s.dir, "cert.pem"), certPEM, 0o644)
	os.WriteFile(filepath.Join(s.dir, "key.pem"), keyPEM, 0o600)
	doc, _ := os.ReadFile(s.config)
	doc = []byte(strings.Replace(string(doc), "version = 1\n", "version = 1\n\n[server]\ntls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n", 1))
	if err := os.WriteFile(s.config, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, s)
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("listening on %q, want https", srv.URL)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("/health over TLS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("TLS state %+v", resp.TLS)
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// selfSigned returns a PEM certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "adhost e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestRunBasics drives a few runs through the built binary with the Go
// client (JSON, SSE, the tool loop), stops the host and checks the usage
// records it flushed.
func TestRunBasics(t *testing.T) {
	s := newSite(t)
	srv := startServer(t, s)
	c, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := c.Run(ctx, &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "conformance:text"})
	if err != nil {
		t.Fatalf("JSON run: %v", err)
	}
	if res.Text != "Hello fixture" {
		t.Errorf("JSON text = %q", res.Text)
	}
	var deltas strings.Builder
	res2, err := c.Stream(ctx, &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "conformance:text"},
		func(ev client.Event) error {
			if ev.Type == "text.delta" {
				deltas.WriteString(ev.Text)
			}
			return nil
		})
	if err != nil {
		t.Fatalf("SSE run: %v", err)
	}
	if res2.Text != "Hello fixture" || deltas.String() != res2.Text {
		t.Errorf("SSE text = %q, deltas %q", res2.Text, deltas.String())
	}
	res3, err := c.Run(ctx, &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "conformance:tools", Tools: []string{"conformance_lookup"}})
	if err != nil {
		t.Fatalf("tools run: %v", err)
	}
	if res3.Text != "tool receipt: 7" || res3.Steps != 2 {
		t.Errorf("tools run = %q in %d steps", res3.Text, res3.Steps)
	}
	_, err = c.Run(ctx, &protocol.RunRequest{Provider: "fixture", Model: "other-model", Input: "x"})
	if got := client.CodeOf(err); got != protocol.CodeUnsupportedModel {
		t.Errorf("disallowed model: code %s, want %s", got, protocol.CodeUnsupportedModel)
	}

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d\n%s", code, srv.stderr)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "usage.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Schema, RunID, HostID, Subject, Status string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("usage line %q: %v", line, err)
		}
		if rec.Schema != "agenticdriver.usage.v2" || rec.HostID != "e2e" || rec.Subject != "dev-user" {
			t.Errorf("usage record %s", line)
		}
		runs[rec.RunID] = true
		if strings.Contains(line, "Hello fixture") || strings.Contains(line, "conformance:") {
			t.Errorf("usage record carries prompt or output: %s", line)
		}
	}
	for _, r := range []*protocol.RunResult{res, res2, res3} {
		if !runs[r.RunID] {
			t.Errorf("no usage record for run %s", r.RunID)
		}
	}
}

func TestPluginsVerify(t *testing.T) {
	s := newSite(t)
	code, stdout, stderr := adhost(t, "plugins", "verify", "--config", s.config)
	if code != 0 {
		t.Fatalf("plugins verify: exit %d\n%s%s", code, stdout, stderr)
	}
	for id, p := range s.plugins {
		if !strings.Contains(stdout, id+"@1.0.0") || !strings.Contains(stdout, p.digest) {
			t.Errorf("verify output lacks %s %s:\n%s", id, p.digest, stdout)
		}
	}
	code, stdout, _ = adhost(t, "plugins", "list", "--config", s.config)
	if code != 0 || !strings.Contains(stdout, "fixture") || !strings.Contains(stdout, "provider") {
		t.Errorf("plugins list: exit %d\n%s", code, stdout)
	}
}

func TestFlippedByteIsRefused(t *testing.T) {
	s := newSite(t)
	p := s.plugins["fixture"]
	b, err := os.ReadFile(p.path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p.path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	actual := digestOf(t, p.path)
	for _, args := range [][]string{
		{"serve", "--config", s.config, "--listen", "127.0.0.1:0"},
		{"plugins", "verify", "--config", s.config},
	} {
		code, stdout, stderr := adhost(t, args...)
		if code == 0 {
			t.Errorf("adhost %s accepted a damaged module", args[0])
		}
		if strings.Contains(stdout, "listening on") {
			t.Errorf("adhost %s listened", args[0])
		}
		for _, want := range []string{"fixture@1.0.0", p.digest, actual} {
			if !strings.Contains(stderr, want) {
				t.Errorf("adhost %s: stderr lacks %q:\n%s", args[0], want, stderr)
			}
		}
	}
}

// TestServeRefusesMissingCredential: a vendor provider whose credential
// slot is not configured, or whose key variable is unset, refuses to start
// naming the slot or the variable (and never prints a key).
func TestServeRefusesMissingCredential(t *testing.T) {
	s := newSite(t)
	oa := copyPlugin(t, s.dir, "openai", "1.0.0")
	base, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	pin := fmt.Sprintf("\n[[extensions]]\nid = \"openai\"\nversion = \"1.0.0\"\nmodule = %q\nsha256 = %q\n", filepath.Base(oa.path), oa.digest)
	prov := "\n[[providers]]\nid = \"openai-main\"\nextension = \"openai@1.0.0\"\nmodels = [\"gpt-4.1-mini\"]\n"
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"slot not configured", "", `credential slot "api_key"`},
		{"variable unset", `secrets = { api_key = { env = "ADHOST_E2E_UNSET_KEY" } }` + "\n", "ADHOST_E2E_UNSET_KEY is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(s.config, []byte(string(base)+pin+prov+tc.extra), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0")
			if code == 0 || strings.Contains(stdout, "listening on") {
				t.Fatalf("serve started: exit %d\n%s", code, stdout)
			}
			if !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "openai-main") {
				t.Errorf("stderr lacks %q and the provider id:\n%s", tc.want, stderr)
			}
		})
	}
}

// TestQualify runs `adhost qualify` for the fixture (no network, as
// configured) and for the openai adapter against the loopback simulator,
// and checks the reports it writes.
func TestQualify(t *testing.T) {
	s := newSite(t)
	oa := copyPlugin(t, s.dir, "openai", "1.0.0")
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	doc = append(doc, fmt.Sprintf("\n[[extensions]]\nid = \"openai\"\nversion = \"1.0.0\"\nmodule = %q\nsha256 = %q\n"+
		"\n[[providers]]\nid = \"openai-main\"\nextension = \"openai@1.0.0\"\nmodels = [\"gpt-4.1-mini\"]\n"+
		"secrets = { api_key = { env = \"ADHOST_E2E_UNSET_KEY\" } }\n", filepath.Base(oa.path), oa.digest)...)
	if err := os.WriteFile(s.config, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(s.dir, "reports")
	for _, tc := range []struct{ provider, id, digest string }{
		{"fixture", "fixture", s.plugins["fixture"].digest},
		{"openai-main", "openai", oa.digest},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			code, stdout, stderr := adhost(t, "qualify", "--config", s.config, "--provider", tc.provider, "--model", "fixture-model", "--out", out)
			if code != 0 {
				t.Fatalf("qualify: exit %d\n%s%s", code, stdout, stderr)
			}
			// Named by extension, version, digest, model, mode and time.
			prefix := filepath.Join(out, "qualify-"+tc.id+"-1.0.0-sha256_"+tc.digest[:12]+"-fixture-model-simulate-")
			m, _ := filepath.Glob(prefix + "*.json")
			if len(m) != 1 {
				t.Fatalf("reports %s*.json: %v", prefix, m)
			}
			b, err := os.ReadFile(m[0])
			if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				Passed    bool
				Extension struct{ ID, SHA256 string }
				Scenarios []struct{ Name, Status string }
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if !rep.Passed || rep.Extension.ID != tc.id || rep.Extension.SHA256 != tc.digest || len(rep.Scenarios) == 0 {
				t.Errorf("report %s", b)
			}
			if _, err := os.Stat(strings.TrimSuffix(m[0], ".json") + ".md"); err != nil {
				t.Error(err)
			}
		})
	}
	// The form: a pinned extension against the simulator with no
	// [[providers]] entry; the report lands under the store directory and
	// in the store, and `plugins list` shows it for that digest.
	code, stdout, stderr := adhost(t, "qualify", "--config", s.config, "--extension", "openai@1.0.0", "--simulate")
	if code != 0 || !strings.Contains(stdout, "0 failed") {
		t.Fatalf("qualify --extension: exit %d\n%s%s", code, stdout, stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(s.dir, "data", "qualify", "qualify-openai-1.0.0-*.json")); len(m) != 1 {
		t.Errorf("reports under the store directory: %v", m)
	}
	code, stdout, stderr = adhost(t, "plugins", "list", "--config", s.config)
	if code != 0 {
		t.Fatalf("plugins list: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "openai" && !strings.Contains(line, "passed") {
			t.Errorf("plugins list does not show openai's qualification: %q", line)
		}
	}
	if code, _, stderr := adhost(t, "qualify", "--config", s.config, "--extension", "openai@1.0.0", "--live"); code != 2 {
		t.Errorf("--extension --live: exit %d, want a usage error\n%s", code, stderr)
	}

	// --live needs the configured credential: refused before any request.
	code, _, stderr = adhost(t, "qualify", "--config", s.config, "--provider", "openai-main", "--model", "gpt-4.1-mini", "--live", "--out", out)
	if code == 0 || !strings.Contains(stderr, "ADHOST_E2E_UNSET_KEY is not set") {
		t.Errorf("--live without the key: exit %d\n%s", code, stderr)
	}
}

// pinToolchain returns the Go release of go.mod ("toolchain goX" or else
// "go X" with a patch version), or "" when go.mod names no exact release.
func pinToolchain(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "toolchain" {
			return f[1]
		}
		if len(f) == 2 && f[0] == "go" && strings.Count(f[1], ".") == 2 {
			goLine = "go" + f[1]
		}
	}
	return goLine
}

// TestReproducibleDigests proves that a fresh build of each pinned plugin
// produces the sha256 committed in the repository's host.toml (and, when
// `make build` has run, the same bytes as build/plugins).
func TestReproducibleDigests(t *testing.T) {
	root := testenv.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(doc, filepath.Join(root, "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Extensions) == 0 {
		t.Fatal("host.toml pins no extension")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("cannot build plugins: go command not found")
	}
	// Same toolchain ⇒ same bytes: the committed pins are made with the Go
	// release go.mod names; another release legitimately builds other bytes.
	if want := pinToolchain(t, root); want != "" && goruntime.Version() != want {
		t.Skipf("the pins in host.toml are built with %s; this toolchain is %s", want, goruntime.Version())
	}
	for _, e := range cfg.Extensions {
		t.Run(e.Ref(), func(t *testing.T) {
			dir := filepath.Join("plugins", e.ID)
			if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
				t.Skipf("no source for %s in %s", e.Ref(), dir)
			}
			fresh := digestOf(t, testenv.BuildPlugin(t, dir))
			if fresh != e.SHA256 {
				t.Errorf("a fresh build of %s has sha256 %s, host.toml pins %s: run `make pin` after reviewing the change", e.Ref(), fresh, e.SHA256)
			}
			built := filepath.Join(root, "build", "plugins", e.ID+"-"+e.Version+".wasm")
			if _, err := os.Stat(built); err == nil {
				if got := digestOf(t, built); got != fresh {
					t.Errorf("%s has sha256 %s, a fresh build %s: `make plugins` and testenv builds differ (or build/ is stale: run make plugins)", built, got, fresh)
				}
			}
		})
	}
}
