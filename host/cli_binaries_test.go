package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/host/config"
	"adhost/runtime/manifest"
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
