// Package plugintest loads a vendor adapter's real wasm build through
// runtime/wasm, for the adapters' own tests (plugins/openai,
// plugins/anthropic, plugins/gemini).
package plugintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/wasm"
)

// LoadProvider builds the plugin package dir (a path from the repository
// root, such as "plugins/openai") for wasip1 with testenv.BuildPlugin (once
// per test binary), loads it pinned as id@version with the build's sha256,
// and binds a provider instance "<id>-test" to endpoint with key as its
// api_key secret; an empty key is a secret the host cannot resolve (as an
// unset environment variable). The module is closed when the test ends.
func LoadProvider(t testing.TB, dir, id, version, endpoint, key string) runtime.Provider {
	t.Helper()
	path := testenv.BuildPlugin(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: id, Version: version, Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(context.Background()) })
	settings, _ := json.Marshal(map[string]string{"endpoint": endpoint})
	p, err := x.Provider(wasm.InstanceConfig{
		ID:       id + "-test",
		Settings: settings,
		Secrets: map[string]func(context.Context) (string, error){
			"api_key": func(context.Context) (string, error) {
				if key == "" {
					return "", errors.New("environment variable TEST_KEY is not set")
				}
				return key, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
