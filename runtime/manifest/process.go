package manifest

import (
	"fmt"
	"regexp"

	"adhost/abi"
)

// Process is the [process] table of a local CLI adapter. Its absence
// means the extension may not start processes at all (and must not import
// the proc_* host functions). The host, not the guest, decides which file
// runs: the operator binds each provider instance to one pinned binary
// (host.toml [[binaries]]) whose id the manifest must declare here.
type Process struct {
	// Binaries are the binary ids an instance of the extension may be
	// bound to ("claude"): the names the guest starts, never paths.
	Binaries []string `toml:"binaries"`
	// Env are the variable names the operator may fill from host.toml
	// secrets (an API key for a CLI that takes one). HOME and PATH are the
	// host's own; nothing else of the host's environment is passed.
	Env []string `toml:"env"`
}

var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,63}$`)

// reservedEnv are the variables the host sets itself.
var reservedEnv = map[string]bool{"HOME": true, "PATH": true}

func (m *Manifest) validateProcess(bad func(key, format string, args ...any)) {
	p := m.Process
	if p == nil {
		return
	}
	if m.Kind != abi.KindProvider {
		bad("process", "only a provider extension may start processes")
	}
	if len(p.Binaries) == 0 {
		bad("process.binaries", "required: the binary ids an instance may be bound to")
	}
	seen := map[string]bool{}
	for i, b := range p.Binaries {
		key := fmt.Sprintf("process.binaries[%d]", i)
		switch {
		case !idPattern.MatchString(b):
			bad(key, "%q is not a binary id (%s; a path is never allowed)", b, idPattern)
		case seen[b]:
			bad(key, "duplicate binary %q", b)
		}
		seen[b] = true
	}
	seenEnv := map[string]bool{}
	for i, e := range p.Env {
		key := fmt.Sprintf("process.env[%d]", i)
		switch {
		case !envNamePattern.MatchString(e):
			bad(key, "%q is not an environment variable name (%s)", e, envNamePattern)
		case reservedEnv[e]:
			bad(key, "%q is set by the host", e)
		case seenEnv[e]:
			bad(key, "duplicate variable %q", e)
		}
		seenEnv[e] = true
	}
}

// HasProcess reports whether the manifest grants the process capability.
func (m *Manifest) HasProcess() bool { return m.Process != nil }
