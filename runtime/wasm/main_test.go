package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"go.uber.org/goleak"

	"adhost/abi"
	"adhost/internal/testenv"
)

// Guests are built once per test binary; their compiled code is shared
// through one compilation cache so each module compiles once.
const guestDir = "runtime/wasm/testdata/guests/"

var (
	guests      = map[string]string{} // name -> module path
	sharedCache wazero.CompilationCache
)

var guestBuilds = []struct{ name, dir, manifest string }{
	{"provider", "provider", "manifest.toml"},
	{"tool", "tool", "manifest.toml"},
	{"spinner", "spinner", "manifest.toml"},
	{"echo", "echo", "manifest.toml"},
	{"memhog", "memhog", "manifest.toml"},
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	defer testenv.Cleanup()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, g := range guestBuilds {
		wg.Go(func() {
			p, err := testenv.Build(guestDir+g.dir, testenv.WithManifest(guestDir+g.dir+"/"+g.manifest))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			guests[g.name] = p
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errs)
		return 1
	}
	dir, err := os.MkdirTemp("", "adhost-wasm-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if sharedCache, err = wazero.NewCompilationCacheWithDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	sharedCache.Close(context.Background())
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// pinOf returns the pin of a built guest.
func pinOf(t testing.TB, name, id, version string) Pin {
	t.Helper()
	p := guests[name]
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return Pin{ID: id, Version: version, Path: p, SHA256: sha256Hex(b)}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// logBuf captures an extension's logs so tests can check what never
// reaches them.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	x    *Extension
	logs *logBuf
}

func loadGuest(t testing.TB, name, id, version string, opts Options) *env {
	t.Helper()
	logs := &logBuf{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Cache == nil && opts.CacheDir == "" {
		opts.Cache = sharedCache
	}
	x, err := Load(t.Context(), pinOf(t, name, id, version), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() {
		if err := x.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		// Guest stdout/stderr is kept at debug level; nothing above it may
		// carry guest messages or secrets.
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=DEBUG") {
				continue
			}
			for _, secret := range []string{"private-marker", "sk-secret"} {
				if strings.Contains(line, secret) {
					t.Errorf("log line contains %q: %s", secret, line)
				}
			}
		}
	})
	return &env{x: x, logs: logs}
}

func loadProvider(t testing.TB, opts Options) *env {
	return loadGuest(t, "provider", "hostile", "1.0.0", opts)
}

// sink records what a provider streams.
type sink struct {
	mu         sync.Mutex
	texts      []string
	progress   int
	usage      *abi.Usage
	onProgress func()
}

func (s *sink) Text(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts = append(s.texts, d)
}

func (s *sink) Progress() {
	s.mu.Lock()
	s.progress++
	f := s.onProgress
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *sink) Usage(u abi.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = &u
}

func (s *sink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.texts, "")
}

func input(msg string) *abi.CompleteInput {
	return &abi.CompleteInput{Model: "m", Messages: []abi.Message{{Role: abi.RoleUser, Content: msg}}, MaxOutputTokens: 100, Step: 1}
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
