package adhost_test

// This test enforces the import rules of DESIGN.md §1 and STYLE.md "who may
// import whom", in the spirit of Go's go/build/deps_test.go: the rules are
// data, each with the reason an offender reads when it fails.

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// goList lists every package of the module (with env, e.g. GOOS=wasip1).
func goList(t *testing.T, env []string, patterns ...string) map[string]*pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not found")
	}
	args := append([]string{"list", "-e", "-json=ImportPath,Standard,Imports,TestImports,XTestImports,Deps"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = &p
	}
	return pkgs
}

func under(path string, roots ...string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

// isStd reports whether an import path is in the standard library (no dot
// in its first element and not this module).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "adhost" && path != "C"
}

// directRules: only the packages under `only` may import `dep` directly
// (tests included).
var directRules = []struct {
	dep    string
	only   []string
	reason string
}{
	{"github.com/tetratelabs/wazero", []string{"adhost/runtime/wasm"}, "only runtime/wasm runs WebAssembly (DESIGN §1)"},
	{"github.com/dgraph-io/badger/v4", []string{"adhost/store"}, "only store/ persists (DESIGN §1)"},
}

func TestDirectImports(t *testing.T) {
	pkgs := goList(t, nil, "./...")
	for _, p := range pkgs {
		all := append(append(append([]string{}, p.Imports...), p.TestImports...), p.XTestImports...)
		for _, imp := range all {
			for _, r := range directRules {
				if under(imp, r.dep) && !under(p.ImportPath, r.only...) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.reason)
				}
			}
		}
	}
}

// layerRules constrain the transitive dependencies of non-test builds.
var layerRules = []struct {
	pkgs   string   // packages under this root
	allow  []string // adhost roots they may depend on (stdlib always allowed)
	deny   []string // adhost roots they must never depend on (when allow is nil)
	ext    bool     // third-party modules allowed
	exts   []string // these third-party modules allowed (when ext is false)
	reason string
}{
	{pkgs: "adhost/runtime", deny: []string{"adhost/host", "adhost/store", "adhost/client"}, ext: true,
		reason: "runtime declares the interfaces it needs; host wires store in"},
	{pkgs: "adhost/abi", allow: []string{"adhost/abi"},
		reason: "abi is the host/guest contract: standard library only, builds for both sides"},
	{pkgs: "adhost/sdk-plugin", allow: []string{"adhost/abi", "adhost/sdk-plugin"},
		reason: "plugin authors import sdk-plugin, which imports abi only"},
	{pkgs: "adhost/plugins", allow: []string{"adhost/abi", "adhost/sdk-plugin"},
		// The built-in tools use maintained libraries for what they must
		// get exactly right (decimal arithmetic, jq), each checked to
		// build for wasip1.
		exts:   []string{"github.com/cockroachdb/apd/v3", "github.com/itchyny/gojq", "github.com/itchyny/timefmt-go"},
		reason: "plugins build for wasip1 from sdk-plugin, abi and the listed libraries only"},
}

func checkLayers(t *testing.T, pkgs map[string]*pkg, env string) {
	for _, p := range pkgs {
		for _, r := range layerRules {
			if !under(p.ImportPath, r.pkgs) {
				continue
			}
			for _, d := range append(append([]string{}, p.Imports...), p.Deps...) {
				if isStd(d) {
					continue
				}
				inModule := under(d, "adhost")
				bad := false
				switch {
				case r.allow != nil && inModule:
					bad = !under(d, r.allow...)
				case r.allow != nil && !inModule:
					bad = !r.ext && !under(d, r.exts...)
				default:
					bad = under(d, r.deny...) || (!inModule && !r.ext)
				}
				if bad {
					t.Errorf("%s%s depends on %s: %s", p.ImportPath, env, d, r.reason)
				}
			}
		}
	}
}

func TestLayers(t *testing.T) {
	checkLayers(t, goList(t, nil, "./..."), "")
}

func TestLayersWasip1(t *testing.T) {
	checkLayers(t, goList(t, []string{"GOOS=wasip1", "GOARCH=wasm"}, "./abi/...", "./sdk-plugin/...", "./plugins/..."), " (wasip1)")
}

// TestRulesMatchSomething keeps the rules honest: a renamed package would
// otherwise make a rule vacuous.
func TestRulesMatchSomething(t *testing.T) {
	pkgs := goList(t, nil, "./...")
	for _, root := range []string{"adhost/abi", "adhost/runtime", "adhost/store", "adhost/host"} {
		found := false
		for path := range pkgs {
			found = found || under(path, root)
		}
		if !found {
			t.Errorf("no package under %s: update deps_test.go", root)
		}
	}
}
