package host

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/manifest"
	"adhost/runtime/protocol"
)

// cliTestRun runs Main with args and returns the exit code and streams.
func cliTestRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

const cliTestManifest = `id = "demo-tools"
name = "Demo tools"
version = "1.2.3"
kind = "tool"
contractVersion = "1.0"
`

// cliTestModule writes a minimal wasm module (header only) with an
// embedded manifest and returns its path and sha256. It is enough for
// everything that does not instantiate the module.
func cliTestModule(t *testing.T, dir, manifestTOML string) (string, string) {
	t.Helper()
	b, err := manifest.Embed([]byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}, []byte(manifestTOML))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "demo.wasm")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:])
}

func TestCLIUsage(t *testing.T) {
	if code, _, stderr := cliTestRun(t); code != cliExitUsage || !strings.Contains(stderr, "adhost --help") {
		t.Errorf("no args: code %d, stderr %q", code, stderr)
	}
	if code, _, stderr := cliTestRun(t, "frobnicate"); code != cliExitUsage || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown: code %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := cliTestRun(t, "help"); code != cliExitOK || !strings.Contains(stdout, "serve") {
		t.Errorf("help: code %d", code)
	}
	if code, _, _ := cliTestRun(t, "serve", "--bogus"); code != cliExitUsage {
		t.Errorf("bad flag: code %d, want %d", code, cliExitUsage)
	}
	if code, _, _ := cliTestRun(t, "plugins"); code != cliExitUsage {
		t.Errorf("plugins without subcommand: code %d", code)
	}
}

func TestCLIQualifyArguments(t *testing.T) {
	if code, _, stderr := cliTestRun(t, "qualify"); code != cliExitUsage || !strings.Contains(stderr, "--extension ID@VERSION") {
		t.Errorf("no flags: code %d, stderr %q", code, stderr)
	}
	cfg, _, _ := cliTestConfig(t)
	code, _, stderr := cliTestRun(t, "qualify", "--config", cfg, "--provider", "nope", "--model", "m")
	if code != cliExitFail || !strings.Contains(stderr, `no [[providers]] entry with id "nope"`) {
		t.Errorf("unknown provider: code %d, stderr %q", code, stderr)
	}
	at := time.Date(2026, 12, 1, 9, 8, 7, 0, time.UTC)
	if got := cliReportName("openai", "1.0.0", strings.Repeat("ab", 32), "gpt-4.1/mini", "live", at); got != "qualify-openai-1.0.0-sha256_abababababab-gpt-4.1_mini-live-20261201T090807Z" {
		t.Errorf("cliReportName = %q", got)
	}
}

func TestCLIInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, stdout, stderr := cliTestRun(t, "init", dir)
	if code != 0 {
		t.Fatalf("init: code %d: %s", code, stderr)
	}
	for _, want := range []string{"created " + filepath.Join(dir, "host.toml"), "created " + filepath.Join(dir, "data", "dev.token")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout %q lacks %q", stdout, want)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "data", "dev.token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(dir, "data")); st.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v, want 0700", st.Mode().Perm())
	}
	tok1, _ := os.ReadFile(filepath.Join(dir, "data", "dev.token"))
	if len(strings.TrimSpace(string(tok1))) < 32 {
		t.Errorf("token %q shorter than 32", tok1)
	}
	// The starter configuration is valid and its token resolves.
	code, stdout, _ = cliTestRun(t, "doctor", "--config", filepath.Join(dir, "host.toml"))
	if !strings.Contains(stdout, "ok    configuration") || !strings.Contains(stdout, "ok    token secrets") {
		t.Errorf("doctor on the starter config (code %d):\n%s", code, stdout)
	}
	// Never overwrites.
	os.WriteFile(filepath.Join(dir, "host.toml"), []byte("# mine\nversion = 1\n"), 0o644)
	code, stdout, _ = cliTestRun(t, "init", dir)
	if code != 0 || !strings.Contains(stdout, "kept") {
		t.Fatalf("second init: code %d, %q", code, stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "host.toml")); string(b) != "# mine\nversion = 1\n" {
		t.Error("init overwrote host.toml")
	}
	if tok2, _ := os.ReadFile(filepath.Join(dir, "data", "dev.token")); !bytes.Equal(tok1, tok2) {
		t.Error("init overwrote the token")
	}
}

func TestCLIPluginsInspectAndPin(t *testing.T) {
	dir := t.TempDir()
	mod, digest := cliTestModule(t, dir, cliTestManifest)

	code, stdout, stderr := cliTestRun(t, "plugins", "inspect", mod)
	if code != 0 || !strings.Contains(stdout, "sha256  "+digest) || !strings.Contains(stdout, `id = "demo-tools"`) {
		t.Fatalf("inspect: code %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, _ = cliTestRun(t, "plugins", "pin", "demo-tools@1.2.3", mod)
	if code != 0 || !strings.Contains(stdout, `sha256 = "`+digest+`"`) {
		t.Fatalf("pin (print): code %d\n%s", code, stdout)
	}
	if code, _, stderr := cliTestRun(t, "plugins", "pin", "other@1.2.3", mod); code != 1 || !strings.Contains(stderr, "embeds the manifest of demo-tools@1.2.3") {
		t.Errorf("pin with a wrong id: code %d, %q", code, stderr)
	}

	cfg := filepath.Join(dir, "host.toml")
	doc := "# my host\nversion = 1\n\n[[extensions]]\nid = \"demo-tools\"   # reviewed\nversion = \"1.2.3\"\nmodule = \"demo.wasm\"\nsha256 = \"\" # to fill\n"
	os.WriteFile(cfg, []byte(doc), 0o640)
	code, _, stderr = cliTestRun(t, "plugins", "pin", "--config", cfg, "demo-tools@1.2.3", mod, "--write")
	if code != 0 {
		t.Fatalf("pin --write: code %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(cfg)
	if want := strings.Replace(doc, `sha256 = ""`, `sha256 = "`+digest+`"`, 1); string(got) != want {
		t.Errorf("host.toml after pin --write:\n%s\nwant\n%s", got, want)
	}
	if st, _ := os.Stat(cfg); st.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", st.Mode().Perm())
	}

	// --existing skips an extension that is not pinned.
	other := filepath.Join(dir, "other.toml")
	os.WriteFile(other, []byte("version = 1\n"), 0o644)
	code, stdout, _ = cliTestRun(t, "plugins", "pin", "--config", other, "--write", "--existing", "demo-tools@1.2.3", mod)
	if b, _ := os.ReadFile(other); code != 0 || string(b) != "version = 1\n" || !strings.Contains(stdout, "skipped") {
		t.Errorf("--existing: code %d, %q, file %q", code, stdout, b)
	}
	// Without --existing a new pin is appended.
	cliTestRun(t, "plugins", "pin", "--config", other, "--write", "demo-tools@1.2.3", mod)
	if b, _ := os.ReadFile(other); !strings.Contains(string(b), `module = "demo.wasm"`) || !strings.Contains(string(b), digest) {
		t.Errorf("appended pin:\n%s", b)
	}
}

// cliTestConfig writes a host.toml pinning the demo module and a valid
// token file, and returns the config path, module path and digest.
func cliTestConfig(t *testing.T) (cfg, mod, digest string) {
	t.Helper()
	dir := t.TempDir()
	mod, digest = cliTestModule(t, dir, cliTestManifest)
	os.WriteFile(filepath.Join(dir, "dev.token"), []byte(strings.Repeat("t", 40)+"\n"), 0o600)
	cfg = filepath.Join(dir, "host.toml")
	doc := "version = 1\n[server]\nlisten = \"127.0.0.1:0\"\n" +
		"[[extensions]]\nid = \"demo-tools\"\nversion = \"1.2.3\"\nmodule = \"demo.wasm\"\nsha256 = \"" + digest + "\"\n" +
		"[[tokens]]\nid = \"dev\"\nsubject = \"dev-user\"\nsecret = { file = \"dev.token\" }\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, mod, digest
}

func cliFlipByte(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 0x01
	os.WriteFile(path, b, 0o644)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestCLIPluginsList(t *testing.T) {
	cfg, mod, digest := cliTestConfig(t)
	code, stdout, stderr := cliTestRun(t, "plugins", "list", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "demo-tools") || !strings.Contains(stdout, "yes") || !strings.Contains(stdout, digest[:16]) {
		t.Fatalf("list: code %d\n%s%s", code, stdout, stderr)
	}
	actual := cliFlipByte(t, mod)
	code, stdout, _ = cliTestRun(t, "plugins", "list", "--config", cfg)
	if code != 1 || !strings.Contains(stdout, "no: sha256 is "+actual[:16]) {
		t.Errorf("list after flip: code %d\n%s", code, stdout)
	}
}

func TestCLIServeRefusesBadPins(t *testing.T) {
	cfg, mod, digest := cliTestConfig(t)
	actual := cliFlipByte(t, mod)
	for _, args := range [][]string{
		{"serve", "--config", cfg},
		{"plugins", "verify", "--config", cfg},
	} {
		code, stdout, stderr := cliTestRun(t, args...)
		if code != 1 {
			t.Errorf("%v: code %d, want 1", args, code)
		}
		for _, want := range []string{"demo-tools@1.2.3", "expected " + digest, "actual " + actual} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, stderr, want)
			}
		}
		if strings.Contains(stdout, "listening on") {
			t.Errorf("%v: listened despite a bad pin", args)
		}
	}
	os.Remove(mod)
	if code, _, stderr := cliTestRun(t, "serve", "--config", cfg); code != 1 || !strings.Contains(stderr, "demo-tools@1.2.3: module") {
		t.Errorf("missing module: code %d, %q", code, stderr)
	}
}

func TestCLIServeRefusesBadConfig(t *testing.T) {
	cfg, _, _ := cliTestConfig(t)
	dir := filepath.Dir(cfg)
	for _, tc := range []struct {
		name  string
		setup func()
		args  []string
		want  []string
	}{
		{"unknown key", func() {
			b, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, append(b, "\n[limits]\nmax_stepz = 3\n"...), 0o644)
		}, nil, []string{"unknown key", "limits.max_stepz", "host.toml:"}},
		{"missing file", func() {}, []string{"--config", filepath.Join(dir, "nope.toml")}, []string{"nope.toml"}},
		{"non-loopback listen", func() {}, []string{"--listen", "0.0.0.0:0"}, []string{"TLS_REQUIRED"}},
		{"world-readable token", func() { os.Chmod(filepath.Join(dir, "dev.token"), 0o644) }, nil, []string{filepath.Join(dir, "dev.token"), "readable by group or others"}},
		{"short token", func() { os.WriteFile(filepath.Join(dir, "dev.token"), []byte("short"), 0o600) }, nil, []string{"need at least 32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgOrig, _ := os.ReadFile(cfg)
			defer os.WriteFile(cfg, cfgOrig, 0o644)
			defer func() {
				os.WriteFile(filepath.Join(dir, "dev.token"), []byte(strings.Repeat("t", 40)), 0o600)
				os.Chmod(filepath.Join(dir, "dev.token"), 0o600)
			}()
			tc.setup()
			args := append([]string{"serve"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--config") {
				args = append(args, "--config", cfg)
			}
			code, stdout, stderr := cliTestRun(t, args...)
			if code != 1 || strings.Contains(stdout, "listening") {
				t.Fatalf("code %d, stdout %q", code, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

func TestCLIRunNeedsToken(t *testing.T) {
	t.Setenv("ADHOST_TOKEN", "")
	code, _, stderr := cliTestRun(t, "run", "--config", filepath.Join(t.TempDir(), "none.toml"), "--provider", "p", "--model", "m", "hi")
	if code != 1 || !strings.Contains(stderr, "no token") {
		t.Errorf("code %d, %q", code, stderr)
	}
	if code, _, _ := cliTestRun(t, "run", "hi"); code != cliExitUsage {
		t.Errorf("run without provider: code %d", code)
	}
}

func TestCLIClientSettings(t *testing.T) {
	cfg, _, _ := cliTestConfig(t)
	t.Setenv("ADHOST_TOKEN", "")
	url, tok, err := cliClientSettings(cfg, "", "")
	if err != nil || url != "http://127.0.0.1:0" || tok != strings.Repeat("t", 40) {
		t.Errorf("from config: %q %q %v", url, tok, err)
	}
	t.Setenv("ADHOST_TOKEN", "env-token-0123456789012345678901234567")
	if _, tok, _ := cliClientSettings(cfg, "https://h.example", ""); tok != "env-token-0123456789012345678901234567" {
		t.Errorf("env token not preferred: %q", tok)
	}
	for in, want := range map[string]string{
		":7433": "127.0.0.1:7433", "0.0.0.0:1": "127.0.0.1:1", "[::]:5": "[::1]:5", "localhost:9": "localhost:9",
	} {
		if got := cliDialAddr(in); got != want {
			t.Errorf("cliDialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCLIRandomUUID(t *testing.T) {
	a, b := cliRandomUUID(), cliRandomUUID()
	if a == b || len(a) != 36 || a[14] != '4' {
		t.Errorf("uuids %q %q", a, b)
	}
}

// TestCLIServeLifecycle runs `serve` in process with a configuration that
// needs no extension: it listens on a free port, prints the listening
// line, answers /health and /v1/protocol, writes nothing secret to its log,
// and exits 0 when its context ends (what SIGINT/SIGTERM do).
func TestCLIServeLifecycle(t *testing.T) {
	dir := t.TempDir()
	token := strings.Repeat("k", 48)
	os.WriteFile(filepath.Join(dir, "t.token"), []byte(token), 0o600)
	cfg := filepath.Join(dir, "host.toml")
	os.WriteFile(cfg, []byte("version = 1\n[server]\nlisten = \"127.0.0.1:0\"\n[usage]\njsonl = \"data/usage.jsonl\"\n"+
		"[[tokens]]\nid = \"t\"\nsubject = \"s\"\nsecret = { file = \"t.token\" }\n"), 0o644)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr cliSyncBuffer
	done := make(chan int, 1)
	go func() {
		code := Main(ctx, []string{"serve", "--config", cfg}, pw, &stderr)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	var url string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			url = u
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatalf("no listening line; stderr:\n%s", stderr.String())
	}
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health = %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/v1/protocol = %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Error("the token appears in the log")
	}
	if st, err := os.Stat(filepath.Join(dir, "data")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("store directory: %v", err)
	}
}

// cliSyncBuffer is a goroutine-safe buffer for a command's stderr.
type cliSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *cliSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *cliSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// cliTestRunArgs are the flags of an `adhost run` against env's host with
// testToken, followed by extra.
func cliTestRunArgs(t *testing.T, env *testEnv, extra ...string) []string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "test.token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return append([]string{"run", "--url", env.ts.URL, "--token-file", tok, "--provider", testProvider, "--model", testModel}, extra...)
}

// TestCLIRunOutput: the text and the result go to different streams, so
// that `adhost run --json ... | jq` reads one JSON document and the
// default output is just the text.
func TestCLIRunOutput(t *testing.T) {
	env := newEnv(t, envOptions{})
	for _, tc := range []struct {
		name             string
		args             []string
		stdout, inStderr string // "" stdout: the RunResult JSON
	}{
		{"text", []string{"hi"}, "Hello world\n", "adhost run: run "},
		{"stream", []string{"--stream", "hi"}, "Hello world\n", "adhost run: run "},
		{"json", []string{"--json", "hi"}, "", ""},
		{"stream json", []string{"--stream", "--json", "hi"}, "", "Hello world\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cliTestRun(t, cliTestRunArgs(t, env, tc.args...)...)
			if code != cliExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, tc.inStderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.inStderr)
			}
			if tc.stdout != "" {
				if stdout != tc.stdout {
					t.Errorf("stdout = %q, want %q", stdout, tc.stdout)
				}
				if !strings.Contains(stderr, "stop, 1 step") {
					t.Errorf("summary %q", stderr)
				}
				return
			}
			var res protocol.RunResult
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&res); err != nil || res.Text != "Hello world" || res.RunID == "" || res.Provider != testProvider {
				t.Fatalf("stdout %q is not the RunResult (%v)", stdout, err)
			}
			if dec.More() {
				t.Errorf("stdout holds more than the result: %q", stdout)
			}
			if strings.Contains(stderr, "runId") {
				t.Errorf("the result went to stderr too: %q", stderr)
			}
		})
	}
	// A failed run: the wire code on stderr, nothing on stdout, exit 1.
	code, stdout, stderr := cliTestRun(t, cliTestRunArgs(t, env, "--json", "fail")...)
	if code != cliExitFail || stdout != "" || !strings.Contains(stderr, "adhost run: PROVIDER_FAILED: ") {
		t.Errorf("failed run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestCLIRunUnreachable: with no host listening, the error names the URL
// and the reason, not the client's generic HTTP_ERROR.
func TestCLIRunUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	tok := filepath.Join(t.TempDir(), "t.token")
	os.WriteFile(tok, []byte(testToken), 0o600)
	for _, stream := range []bool{false, true} {
		args := []string{"run", "--url", url, "--token-file", tok, "--provider", "p", "--model", "m", "hi"}
		if stream {
			args = append(args, "--stream")
		}
		code, stdout, stderr := cliTestRun(t, args...)
		want := "adhost run: cannot reach " + url + ": connection refused\n"
		if code != cliExitFail || stdout != "" || stderr != want {
			t.Errorf("stream %v: exit %d, stdout %q, stderr %q, want %q", stream, code, stdout, stderr, want)
		}
	}
}

func TestCLITransportFailure(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		what, reason string
	}{
		{"refused", &client.Error{Code: protocol.CodeHTTPError, Message: "the request failed", Err: &neturl.Error{Op: "Post", URL: "http://h/v1/runs", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}}, "cannot reach", "connection refused"},
		{"reset", &client.Error{Code: protocol.CodeHTTPError, Message: "the request failed", Err: &neturl.Error{Op: "Post", URL: "http://h/v1/runs", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}}, "lost the connection to", "connection reset by peer"},
		{"dns", &client.Error{Code: protocol.CodeHTTPError, Message: "the request failed", Err: &neturl.Error{Op: "Post", URL: "http://h/v1/runs", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Name: "h", Err: "no such host"}}}}, "cannot reach", "cannot resolve h: no such host"},
		{"closed", &client.Error{Code: protocol.CodeHTTPError, Message: "the request failed", Err: &neturl.Error{Op: "Post", URL: "http://h/v1/runs", Err: io.EOF}}, "lost the connection to", "it closed before answering"},
	} {
		what, reason, ok := cliTransportFailure(tc.err)
		if !ok || what != tc.what || reason != tc.reason {
			t.Errorf("%s: %q %q %v, want %q %q", tc.name, what, reason, ok, tc.what, tc.reason)
		}
	}
	// Answers are not transport failures: they keep their wire code.
	for _, err := range []error{
		&client.Error{Code: protocol.CodeHTTPError, Message: "the host answered HTTP 502 without a protocol error body", Status: 502},
		&client.Error{Code: protocol.CodeProviderFailed, Message: "m"},
		&client.Error{Code: protocol.CodeIncompleteStream, Message: "the stream broke", Err: io.ErrUnexpectedEOF},
		&client.Error{Code: protocol.CodeHTTPError, Message: "the host answered with a redirect, which is never followed", Err: &neturl.Error{Op: "Post", URL: "http://h/v1/runs", Err: errors.New("redirect")}},
	} {
		if what, reason, ok := cliTransportFailure(err); ok {
			t.Errorf("%v: transport failure %q %q", err, what, reason)
		}
	}
}

// TestCLIRunInterrupt runs the built command against a held run (the fake
// provider's "block" waits until cancelled), sends SIGINT once the
// provider holds the run, and checks "interrupted", exit 130, and that the
// host saw the disconnect and cancelled the run.
func TestCLIRunInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the adhost command")
	}
	bin := cliTestBinary(t)
	env := newEnv(t, envOptions{})
	for _, mode := range []string{"json", "stream"} {
		t.Run(mode, func(t *testing.T) {
			args := cliTestRunArgs(t, env, blockingInput)
			if mode == "stream" {
				args = append(args, "--stream")
			}
			cmd := exec.CommandContext(t.Context(), bin, args...)
			var stdout, stderr cliSyncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-env.provider.started:
			case <-time.After(time.Minute): // only turns a hang into a failure
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the run never reached the provider; stderr:\n%s", stderr.String())
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != cliExitInterrupted {
				t.Errorf("exit %d (%v), want %d", code, err, cliExitInterrupted)
			}
			if got := stderr.String(); got != "adhost run: interrupted\n" {
				t.Errorf("stderr = %q", got)
			}
			if got := stdout.String(); got != "" {
				t.Errorf("stdout = %q", got)
			}
			waitFor(t, "the host to cancel the run", func() bool { return env.provider.active.Load() == 0 })
		})
	}
}

// cliTestBinary is $ADHOST_BIN, else the adhost command built into the
// test's temporary directory.
func cliTestBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("ADHOST_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "adhost")
	if out, err := exec.Command("go", "build", "-o", bin, "adhost/host/cmd/adhost").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
