package config

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliDoc binds a provider to a pinned CLI binary (issue 17's example).
func cliDoc(sha string) string {
	return `version = 1

[[extensions]]
id = "claude-code"
version = "1.0.0"
module = "claude-code.wasm"
sha256 = "` + pinA + `"

[[binaries]]
id = "claude"
path = "bin/claude"
sha256 = "` + sha + `"

[[providers]]
id = "claude-local"
extension = "claude-code@1.0.0"
account_id = "team-claude"
models = ["claude-sonnet-4-5"]
binary = "claude"
account_directory = "accounts/claude"
`
}

func writeCLI(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(filepath.Join(dir, "bin/claude"), body, 0o755); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

func TestBinaries(t *testing.T) {
	dir := t.TempDir()
	sha := writeCLI(t, dir)
	path := filepath.Join(dir, "host.toml")
	load := func(doc string) (*File, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	f, err := load(cliDoc(sha))
	if err != nil {
		t.Fatal(err)
	}
	if b := f.BinaryByID("claude"); b == nil || b.Path != filepath.Join(dir, "bin/claude") {
		t.Fatalf("binary path not resolved: %+v", b)
	}
	if got := f.Providers[0].AccountDirectory; got != filepath.Join(dir, "accounts/claude") {
		t.Fatalf("account_directory %q not resolved", got)
	}

	// The filesystem checks: a missing directory, an open one, then a
	// private one; a binary replaced after pinning; a missing binary.
	err = f.CheckBinaries()
	wantProblem(t, err, "host.toml:20: providers[0].account_directory", "does not exist")
	acct := filepath.Join(dir, "accounts/claude")
	if err := os.MkdirAll(acct, 0o755); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, f.CheckBinaries(), "host.toml:20: providers[0].account_directory", "must be private")
	if err := os.Chmod(acct, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckBinaries(); err != nil {
		t.Fatalf("private directory, matching binary: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/claude"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, f.CheckBinaries(), "host.toml:12: binaries[0].sha256", "sha256 mismatch")
	if err := os.Remove(filepath.Join(dir, "bin/claude")); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, f.CheckBinaries(), "host.toml:11: binaries[0].path", "no such file")

	// Static problems, with their key and line.
	for _, tc := range []struct{ edit, key, want string }{
		{`binary = "claude"`, "providers[0].binary", `"claudex" is not a [[binaries]] id`},
		{`sha256 = "` + sha + `"`, "binaries[0].sha256", "not 64 lowercase hex"},
		{`account_directory = "accounts/claude"`, "providers[0].account_directory", "required with binary"},
		{`path = "bin/claude"`, "binaries[0].path", "required"},
	} {
		doc := cliDoc(sha)
		repl := map[string]string{
			`binary = "claude"`: `binary = "claudex"`, `sha256 = "` + sha + `"`: `sha256 = "nope"`,
			`account_directory = "accounts/claude"`: ``, `path = "bin/claude"`: `path = ""`,
		}[tc.edit]
		doc = strings.Replace(doc, tc.edit, repl, 1)
		_, err := load(doc)
		wantProblem(t, err, tc.key, tc.want)
	}
	_, err = load(cliDoc(sha) + "\n[[binaries]]\nid = \"claude\"\npath = \"x\"\nsha256 = \"" + sha + "\"\n")
	wantProblem(t, err, "binaries[1].id", "duplicate binary id")
	_, err = load(strings.Replace(cliDoc(sha), `binary = "claude"`, ``, 1))
	wantProblem(t, err, "providers[0].account_directory", "only for a provider bound to a binary")
	_, err = load(cliDoc(sha) + "\n[[binaries]]\nid = \"x\"\npath = \"x\"\nsha256 = \"" + sha + "\"\nshell = true\n")
	wantProblem(t, err, "binaries", "unknown key")
}

func wantProblem(t *testing.T, err error, key, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want %q and %q", err, key, want)
	}
}
