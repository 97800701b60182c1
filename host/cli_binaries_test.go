package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/host/config"
	"adhost/internal/clisim"
	"adhost/internal/testenv"
	"adhost/runtime/manifest"
	"adhost/runtime/wasm"
)

// TestCheckBinaries: a local CLI adapter's provider must be bound to a
// binary its manifest declares, whose digest matches, with a private
// account directory; an API adapter takes no binary. Each refusal names
// the key and line of host.toml.
func TestCheckBinaries(t *testing.T) {
	text, err := os.ReadFile("../manifests/claude-code.toml")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := manifest.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	text, err = os.ReadFile("../manifests/openai.toml")
	if err != nil {
		t.Fatal(err)
	}
	api, err := manifest.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	manifests := map[string]*manifest.Manifest{"claude-code@1.0.0": cli, "openai@1.0.0": api}

	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := config.FileDigest(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "acct"), 0o700); err != nil {
		t.Fatal(err)
	}
	doc := func(binaryID, sha, provider string) string {
		return `version = 1

[[extensions]]
id = "claude-code"
version = "1.0.0"
module = "x.wasm"
sha256 = "` + strings.Repeat("a", 64) + `"

[[extensions]]
id = "openai"
version = "1.0.0"
module = "y.wasm"
sha256 = "` + strings.Repeat("b", 64) + `"

[[binaries]]
id = "` + binaryID + `"
path = "claude"
sha256 = "` + sha + `"

[[providers]]
id = "p"
models = ["m"]
` + provider
	}
	bound := "binary = \"" + "claude" + "\"\naccount_directory = \"acct\"\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"bound", doc("claude", sum, "extension = \"claude-code@1.0.0\"\n"+bound), ""},
		{"no binary", doc("claude", sum, "extension = \"claude-code@1.0.0\"\n"), `host.toml:20: providers[0]: required: extension claude-code@1.0.0 runs a local CLI`},
		{"undeclared binary", doc("codex", sum, "extension = \"claude-code@1.0.0\"\nbinary = \"codex\"\naccount_directory = \"acct\"\n"),
			`host.toml:24: providers[0].binary: "codex" is not a binary extension claude-code@1.0.0 declares ("claude")`},
		{"digest mismatch", doc("claude", strings.Repeat("c", 64), "extension = \"claude-code@1.0.0\"\n"+bound), "host.toml:18: binaries[0].sha256: sha256 mismatch"},
		{"api adapter with a binary", doc("claude", sum, "extension = \"openai@1.0.0\"\n"+bound), "host.toml:24: providers[0].binary: extension openai@1.0.0 starts no local CLI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "host.toml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			err = cliCheckBinaries(cfg, manifests)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBindCLIProvider: serve's binding of a [[providers]] entry of a local
// CLI adapter runs the pinned binary in the account directory, with the
// secret its manifest names as a variable and nothing else of the host's
// environment.
func TestBindCLIProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm module")
	}
	t.Setenv("ADHOST_CLI_TEST_KEY", "sk-ant-cli-test-0123456789")
	path := testenv.BuildPlugin(t, "plugins/claude-code")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: "claude-code", Version: "1.0.0", Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(context.Background())
	ts, err := clisim.Transcripts("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	var tr *clisim.Transcript
	for _, c := range ts {
		if c.Name == "q_text" {
			tr = c
		}
	}
	dir := t.TempDir()
	fake, err := clisim.WriteFake(dir, tr)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := config.FileDigest(fake.Path)
	if err != nil {
		t.Fatal(err)
	}
	acct := filepath.Join(t.TempDir(), "acct")
	if err := os.Mkdir(acct, 0o700); err != nil {
		t.Fatal(err)
	}
	bin := &config.Binary{ID: "claude", Path: fake.Path, SHA256: digest}
	p := config.Provider{ID: "claude-local", Extension: "claude-code@1.0.0", Models: []string{"claude-sonnet-4-5"},
		Binary: "claude", AccountDirectory: acct, BinaryPin: bin,
		Secrets: map[string]config.SecretRef{"ANTHROPIC_API_KEY": {Env: "ADHOST_CLI_TEST_KEY"}}}
	inst, err := cliBindProvider(t.Context(), x, p)
	if err != nil {
		t.Fatal(err)
	}
	if inst.AuthMode != "cli-session" || inst.UsageSource != "cli-report" || inst.Capabilities["tools"] {
		t.Errorf("instance %+v", inst)
	}
	out, err := inst.Provider.Complete(t.Context(), &abi.CompleteInput{Model: "claude-sonnet-4-5",
		Messages: []abi.Message{{Role: abi.RoleUser, Content: "conformance:text"}}, MaxOutputTokens: 10, Step: 1}, nil)
	if err != nil || out.Text != "Hello fixture" {
		t.Fatalf("turn: %+v, %v", out, err)
	}
	env := fake.Env()
	want := []string{"ANTHROPIC_API_KEY=sk-ant-cli-test-0123456789", "HOME=" + acct, "PATH=" + wasm.DefaultProcessPATH}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("environment %q, want %q", env, want)
	}
}

// TestVerifyAndDoctorCheckBinaries: plugins verify and doctor refuse a
// replaced CLI binary and an open account directory, naming the key and
// line, and accept the binding once both are fixed.
func TestVerifyAndDoctorCheckBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm module")
	}
	mod := testenv.BuildPlugin(t, "plugins/claude-code")
	b, err := os.ReadFile(mod)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	binSum, _ := config.FileDigest(bin)
	acct := filepath.Join(dir, "acct")
	if err := os.Mkdir(acct, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "host.toml")
	doc := `version = 1

[server]
listen = "127.0.0.1:0"

[store]
path = "data"

[[extensions]]
id = "claude-code"
version = "1.0.0"
module = "` + mod + `"
sha256 = "` + hex.EncodeToString(sum[:]) + `"

[[binaries]]
id = "claude"
path = "claude"
sha256 = "` + binSum + `"

[[providers]]
id = "claude-local"
extension = "claude-code@1.0.0"
models = ["claude-sonnet-4-5"]
binary = "claude"
account_directory = "acct"
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"plugins", "verify"}, {"doctor"}} {
		code, out, errOut := cliTestRun(t, append(cmd, "--config", cfg)...)
		if code == cliExitOK || !strings.Contains(out+errOut, "host.toml:25: providers[0].account_directory") {
			t.Errorf("%v with an open account directory: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
	if err := os.Chmod(acct, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"plugins", "verify"}, {"doctor"}} {
		if code, out, errOut := cliTestRun(t, append(cmd, "--config", cfg)...); code != cliExitOK {
			t.Errorf("%v with a good binding: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"plugins", "verify"}, {"doctor"}} {
		code, out, errOut := cliTestRun(t, append(cmd, "--config", cfg)...)
		if code == cliExitOK || !strings.Contains(out+errOut, "host.toml:18: binaries[0].sha256: sha256 mismatch") {
			t.Errorf("%v with a replaced binary: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
}
