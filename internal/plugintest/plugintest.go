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
	"strings"
	"sync"
	"testing"

	"adhost/abi"
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

// Sink is a runtime.TurnSink recording what a provider streamed, for the
// adapters' wasm tests. OnText and OnProgress, when set, run after each
// delta or progress signal, outside the lock (a test cancels from them).
type Sink struct {
	OnText, OnProgress func()

	mu       sync.Mutex
	text     strings.Builder
	progress int
}

var _ runtime.TurnSink = (*Sink)(nil)

func (s *Sink) Text(d string) {
	s.mu.Lock()
	s.text.WriteString(d)
	f := s.OnText
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *Sink) Progress() {
	s.mu.Lock()
	s.progress++
	f := s.OnProgress
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *Sink) Usage(abi.Usage) {}

// Streamed is the text streamed so far.
func (s *Sink) Streamed() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text.String()
}

// Progressed is the number of progress signals so far.
func (s *Sink) Progressed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}
