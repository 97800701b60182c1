package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/runtime/manifest"
)

const toml = `id = "t"
name = "T"
version = "1.0.0"
kind = "tool"
contractVersion = "1.0"
`

func TestEmbed(t *testing.T) {
	dir := t.TempDir()
	raw := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	must(t, os.WriteFile(filepath.Join(dir, "raw.wasm"), raw, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "m.toml"), []byte(toml), 0o644))
	out := filepath.Join(dir, "out", "t.wasm")
	args := []string{"-manifest", filepath.Join(dir, "m.toml"), "-in", filepath.Join(dir, "raw.wasm"), "-out", out}
	must(t, run(args, io.Discard))
	b1, err := os.ReadFile(out)
	must(t, err)
	got, err := manifest.Extract(b1)
	if err != nil || string(got) != toml {
		t.Fatalf("Extract = %q, %v", got, err)
	}
	must(t, run(args, io.Discard))
	b2, _ := os.ReadFile(out)
	if !bytes.Equal(b1, b2) {
		t.Error("output is not deterministic")
	}
}

func TestEmbedRefusesInvalidManifest(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "raw.wasm"), []byte{0, 'a', 's', 'm', 1, 0, 0, 0}, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "m.toml"), []byte(toml+"extra = 1\n"), 0o644))
	out := filepath.Join(dir, "t.wasm")
	err := run([]string{"-manifest", filepath.Join(dir, "m.toml"), "-in", filepath.Join(dir, "raw.wasm"), "-out", out}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unknown key "extra"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output written for an invalid manifest")
	}
	if err := run(nil, io.Discard); err == nil {
		t.Error("no flags accepted")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
