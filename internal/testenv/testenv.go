package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"adhost/runtime/manifest"
)

// Option configures BuildPlugin.
type Option func(*buildOptions)

type buildOptions struct{ manifest string }

// WithManifest uses the manifest at path (relative to the repository root)
// instead of manifests/<base(dir)>.toml — for test guests that keep their
// manifest next to their source.
func WithManifest(path string) Option {
	return func(o *buildOptions) { o.manifest = path }
}

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	mu      sync.Mutex
	builds  = map[string]*result{}
	tmpOnce sync.Once
	tmpDir  string
	tmpErr  error
)

// BuildPlugin builds the package dir (relative to the repository root) with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath
// -buildvcs=false, embeds its manifest and returns the module's path. The
// build runs once per test binary and key (dir, manifest); later calls
// return the cached path. It fails the test on any error.
func BuildPlugin(t testing.TB, dir string, opts ...Option) string {
	t.Helper()
	p, err := Build(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build is BuildPlugin for callers without a testing.TB (TestMain).
func Build(dir string, opts ...Option) (string, error) {
	var o buildOptions
	for _, opt := range opts {
		opt(&o)
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	if o.manifest == "" {
		o.manifest = filepath.ToSlash(filepath.Join("manifests", filepath.Base(dir)+".toml"))
	}
	key := dir + "\x00" + o.manifest
	mu.Lock()
	r, ok := builds[key]
	if !ok {
		r = &result{}
		builds[key] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.path, r.err = build(dir, o.manifest) })
	return r.path, r.err
}

func build(dir, manifestPath string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	tmpOnce.Do(func() { tmpDir, tmpErr = os.MkdirTemp("", "adhost-testenv-") })
	if tmpErr != nil {
		return "", tmpErr
	}
	toml, err := os.ReadFile(filepath.Join(root, manifestPath))
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	m, err := manifest.Parse(toml)
	if err != nil {
		return "", fmt.Errorf("testenv: %s: %w", manifestPath, err)
	}
	// One file name per (dir, manifest): the same package may be built with
	// several manifests.
	name := strings.NewReplacer("/", "_", ".", "_").Replace(dir + "__" + strings.TrimSuffix(manifestPath, ".toml"))
	raw := filepath.Join(tmpDir, name+".raw.wasm")
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testenv: go not found: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", raw, "./"+dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: build %s: %v\n%s", dir, err, out)
	}
	wasm, err := os.ReadFile(raw)
	if err != nil {
		return "", err
	}
	emb, err := manifest.Embed(wasm, toml)
	if err != nil {
		return "", fmt.Errorf("testenv: embed %s: %w", manifestPath, err)
	}
	out := filepath.Join(tmpDir, fmt.Sprintf("%s-%s-%s.wasm", name, m.ID, m.Version))
	if err := os.WriteFile(out, emb, 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// Cleanup removes the build directory and forgets the builds, so that a
// later BuildPlugin (the next -count round) builds again. Call it from
// TestMain after m.Run, never while builds run; without it the OS temp
// directory keeps the modules.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
	builds = map[string]*result{}
	tmpDir, tmpErr = "", nil
	tmpOnce = sync.Once{}
}

// RepoRoot returns the repository root (the directory of the adhost go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module adhost\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: repository root (go.mod of module adhost) not found")
		}
		dir = parent
	}
}
