package plugintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/manifest"
	"adhost/runtime/wasm"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

// LoadTools builds the tool plugin package dir (such as "plugins/notes")
// like LoadProvider, loads it pinned as id@version with opts, and binds
// it to ic. The module is closed when the test ends; a binding error (a
// configuration the extension refuses) is returned.
func LoadTools(t testing.TB, dir, id, version string, opts wasm.Options, ic wasm.InstanceConfig) (runtime.ToolSet, error) {
	t.Helper()
	path := testenv.BuildPlugin(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: id, Version: version, Path: path, SHA256: hex.EncodeToString(sum[:])}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(context.Background()) })
	if ic.ID == "" {
		ic.ID = id
	}
	return x.ToolSet(ic)
}

// Manifest parses manifests/<id>.toml of the repository.
func Manifest(t testing.TB, id string) *manifest.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "manifests", id+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// CheckToolManifest parses manifests/<id>.toml and checks it against the
// tool plugin under test: the registered info (id, version, kind) and the
// definitions its List returns (name, description, input schema) equal
// the manifest's, which is what the host offers. It returns the manifest.
func CheckToolManifest(t testing.TB, id string, ts sdk.ToolSet) *manifest.Manifest {
	t.Helper()
	m := Manifest(t, id)
	info := sdktest.Info(t, sdk.Registered())
	if info.ID != m.ID || info.Version != m.Version || info.Kind != m.Kind {
		t.Fatalf("info %+v, manifest %s@%s %s", info, m.ID, m.Version, m.Kind)
	}
	defs, listed := m.ToolDefs(), sdktest.ListTools(t, ts)
	if len(defs) != len(listed) {
		t.Fatalf("manifest declares %d tools, List returns %d", len(defs), len(listed))
	}
	for i, d := range defs {
		l := listed[i]
		if d.Name != l.Name || d.Description != l.Description || string(d.InputSchema) != string(l.InputSchema) {
			t.Errorf("tool %d: manifest %s %q %s, List %s %q %s", i, d.Name, d.Description, d.InputSchema, l.Name, l.Description, l.InputSchema)
		}
	}
	return m
}
