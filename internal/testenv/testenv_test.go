package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"adhost/runtime/manifest"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("RepoRoot = %s: %v", root, err)
	}
}

func TestBuildPluginCached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasm module")
	}
	defer Cleanup()
	dir := "runtime/wasm/testdata/guests/tool"
	p1 := BuildPlugin(t, dir, WithManifest(dir+"/manifest.toml"))
	p2 := BuildPlugin(t, dir, WithManifest(dir+"/manifest.toml"))
	if p1 != p2 {
		t.Errorf("second build returned %s, want cached %s", p2, p1)
	}
	b, err := os.ReadFile(p1)
	if err != nil {
		t.Fatal(err)
	}
	text, err := manifest.Extract(b)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := manifest.Parse(text); err != nil || m.ID != "tooltest" {
		t.Errorf("embedded manifest: %v %+v", err, m)
	}
	if _, err := Build("runtime/wasm/testdata/guests/nonexistent"); err == nil {
		t.Error("building a missing package succeeded")
	}
}
