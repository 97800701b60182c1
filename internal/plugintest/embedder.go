package plugintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"adhost/internal/testenv"
	"adhost/runtime/wasm"
)

// LoadEmbedder is LoadProvider for an embedder extension: it builds and
// loads dir pinned as id@version and binds an instance with settings (nil:
// none) and, when key is not empty, key as its api_key secret (an empty
// key is a secret the host cannot resolve). The compiled module is cached
// in a private directory under the temp directory, so a test binary that
// loads it several times (and the next run) compiles it once.
func LoadEmbedder(t testing.TB, dir, id, version string, settings json.RawMessage, key string) *wasm.Embedder {
	t.Helper()
	path := testenv.BuildPlugin(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: id, Version: version, Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{CacheDir: filepath.Join(os.TempDir(), "adhost-plugintest-wasm-cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(context.Background()) })
	ic := wasm.InstanceConfig{ID: id + "-test", Settings: settings}
	if key != "" || len(x.Manifest().Credentials) > 0 {
		ic.Secrets = map[string]func(context.Context) (string, error){"api_key": func(context.Context) (string, error) {
			if key == "" {
				return "", errors.New("no api_key")
			}
			return key, nil
		}}
	}
	e, err := x.Embedder(ic)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
