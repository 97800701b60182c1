package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var (
	idPattern      = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$`)
	modelPattern   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/\[\]-]{0,199}$`)
	toolPattern    = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)
	envPattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256Pattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	slotPattern    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$`)
	semverPattern  = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	sessionGrants  = []string{"create", "read", "continue", "delete"}
	jobGrants      = []string{"submit", "read", "cancel"}
	loopbackHosts  = []string{"localhost", "127.0.0.1", "::1", "[::1]"}
	maxSubjectLen  = 128
	maxNameLen     = 100
	maxAppToolsLen = 32
)

// IsLoopback reports whether host (without port) is one of the loopback
// names of wire-core §1.4. Anything else, including an empty host (all
// interfaces), needs TLS.
func IsLoopback(host string) bool { return slices.Contains(loopbackHosts, host) }

// Validate checks everything that can be checked without touching the
// filesystem, the environment or the extensions, and returns every problem
// joined, each as "host.toml:LINE: key.path: what is wrong". Secrets and
// token files are checked by ResolveTokens; extension digests and settings
// by the extension loader.
func (f *File) Validate() error {
	name := f.Path
	if name == "" {
		name = "host.toml"
	}
	p := &problems{f: f, name: name}
	if f.Version != 1 {
		p.add("version", "unsupported version %d (want 1)", f.Version)
	}
	f.validateServer(p)
	if f.Store.Path == "" {
		p.add("store.path", "must not be empty")
	}
	f.validateStore(p)
	f.validateLimits(p)
	f.validateScheduling(p)
	f.validateResources(p)
	f.validateDiagnostics(p)
	if f.Usage.HostID != "" && !idPattern.MatchString(f.Usage.HostID) {
		p.add("usage.host_id", "%q does not match %s", f.Usage.HostID, idPattern)
	}
	f.validateExtensions(p)
	f.validateProviders(p)
	f.validateBinaries(p)
	f.validateRetrieval(p)
	f.validateContext(p)
	toolNames := f.validateTools(p)
	f.validateToolSettings(p)
	f.validateTokens(p, toolNames)
	f.validateSessions(p)
	f.validateIdempotency(p)
	f.validateJobs(p)
	f.validateReviews(p)
	return p.err()
}

func (f *File) validateServer(p *problems) {
	s := f.Server
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		p.add("server.listen", "%q is not host:port: %v", s.Listen, err)
	} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || (port != "0" && n == 0) {
		p.add("server.listen", "%q has an invalid port", s.Listen)
	} else if !IsLoopback(host) && (s.TLSCert == "" || s.TLSKey == "") {
		p.add("server.listen", "TLS_REQUIRED: non-loopback address %q requires tls_cert and tls_key", s.Listen)
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		p.add("server.tls_cert", "tls_cert and tls_key must be set together")
	}
	seen := map[string]bool{}
	for i, o := range s.AllowedOrigins {
		key := fmt.Sprintf("server.allowed_origins[%d]", i)
		if err := checkOrigin(o); err != nil {
			p.add(key, "%q: %v", o, err)
		} else if seen[o] {
			p.add(key, "duplicate origin %q", o)
		}
		seen[o] = true
	}
}

// checkOrigin accepts exactly scheme://host[:port] as browsers send it.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("must be scheme://host[:port]")
	}
	if canon := u.Scheme + "://" + u.Host; canon != o {
		return fmt.Errorf("must be exactly scheme://host[:port] (no path or trailing slash)")
	}
	if strings.ToLower(o) != o {
		return fmt.Errorf("must be lowercase, as browsers send it")
	}
	return nil
}

func (f *File) validateLimits(p *problems) {
	l := f.Limits
	between := func(key string, v, lo, hi int, why string) {
		if v < lo || v > hi {
			p.add("limits."+key, "%d out of range %d..%d (%s)", v, lo, hi, why)
		}
	}
	const maxima = "host limits may only lower the protocol maxima"
	between("max_steps", l.MaxSteps, 1, MaxSteps, maxima)
	between("max_output_tokens", l.MaxOutputTokens, 1, MaxOutputTokens, maxima)
	between("max_concurrent_runs", l.MaxConcurrentRuns, 1, MaxConcurrentRuns, "the host's bound on concurrent runs")
	between("max_concurrent_runs_per_subject", l.MaxConcurrentRunsPerSubject, 1, max(1, l.MaxConcurrentRuns),
		"at most limits.max_concurrent_runs")
	if l.IdleTimeoutMs < 0 || l.IdleTimeoutMs > MaxIdleTimeoutMs {
		p.add("limits.idle_timeout_ms", "%d out of range 0..%d", l.IdleTimeoutMs, MaxIdleTimeoutMs)
	}
}

func (f *File) validateExtensions(p *problems) {
	ids := map[string]int{}
	for i, e := range f.Extensions {
		key := fmt.Sprintf("extensions[%d]", i)
		if !idPattern.MatchString(e.ID) {
			p.add(key+".id", "%q is missing or does not match %s", e.ID, idPattern)
		} else if j, dup := ids[e.ID]; dup {
			p.add(key+".id", "duplicate extension id %q (also extensions[%d])", e.ID, j)
		} else {
			ids[e.ID] = i
		}
		if !semverPattern.MatchString(e.Version) {
			p.add(key+".version", "%q is missing or not a SemVer version", e.Version)
		}
		if e.Module == "" {
			p.add(key+".module", "required (path of the .wasm module)")
		}
		if !sha256Pattern.MatchString(e.SHA256) {
			p.add(key+".sha256", "%q is not 64 lowercase hex digits (pin it with `adhost plugins pin %s %s --write`)",
				e.SHA256, e.Ref(), e.Module)
		}
		if e.MaxInstances < 0 || e.MaxInstances > MaxInstances {
			p.add(key+".max_instances", "%d out of range 0..%d (0 = no cap)", e.MaxInstances, MaxInstances)
		} else if n := f.toolBindings(e.Ref()); e.MaxInstances > 0 && n > e.MaxInstances {
			// A run may call tools of every entry and is admitted with
			// one unit per entry: it would never fit, and with a queue it
			// would wait for ever.
			p.add(key+".max_instances", "%d is below the %d [[tools]] entries bound to %s: a run using tools of each needs one instance per entry", e.MaxInstances, n, e.Ref())
		}
		if e.InstanceIdleMs < 0 || e.InstanceIdleMs > MaxInstanceIdleMs {
			p.add(key+".instance_idle_ms", "%d out of range 0..%d (0 = 30000)", e.InstanceIdleMs, MaxInstanceIdleMs)
		}
		if e.TurnTimeoutMs < 0 || e.TurnTimeoutMs > MaxIdleTimeoutMs {
			p.add(key+".turn_timeout_ms", "%d out of range 0..%d (0 = none)", e.TurnTimeoutMs, MaxIdleTimeoutMs)
		}
	}
}

func (f *File) validateProviders(p *problems) {
	ids := map[string]int{}
	for i, pr := range f.Providers {
		key := fmt.Sprintf("providers[%d]", i)
		if !idPattern.MatchString(pr.ID) {
			p.add(key+".id", "%q is missing or does not match %s", pr.ID, idPattern)
		} else if j, dup := ids[pr.ID]; dup {
			p.add(key+".id", "duplicate provider id %q (also providers[%d])", pr.ID, j)
		} else {
			ids[pr.ID] = i
		}
		if pr.Extension == "" {
			p.add(key+".extension", "required (\"id@version\" of a pinned [[extensions]] entry)")
		} else if f.ExtensionByRef(pr.Extension) == nil {
			p.add(key+".extension", "%q is not a pinned extension (pinned: %s)", pr.Extension, quoteList(f.refs()))
		}
		if pr.AccountID != "" && !idPattern.MatchString(pr.AccountID) {
			p.add(key+".account_id", "%q does not match %s", pr.AccountID, idPattern)
		}
		if len(pr.Name) > maxNameLen {
			p.add(key+".name", "longer than %d characters", maxNameLen)
		}
		if len(pr.Models) == 0 {
			p.add(key+".models", "required: the explicit, non-empty model allowlist")
		}
		seen := map[string]bool{}
		for j, m := range pr.Models {
			if !modelPattern.MatchString(m) {
				p.add(fmt.Sprintf("%s.models[%d]", key, j), "%q does not match %s", m, modelPattern)
			} else if seen[m] {
				p.add(fmt.Sprintf("%s.models[%d]", key, j), "duplicate model %q", m)
			}
			seen[m] = true
		}
		for _, slot := range sortedKeys(pr.Secrets) {
			sk := key + ".secrets." + slot
			if !slotPattern.MatchString(slot) {
				p.add(sk, "invalid credential slot name")
			}
			pr.Secrets[slot].validate(p, sk)
		}
	}
}

// validateTools checks [[tools]] and returns the set of configured names.
func (f *File) validateTools(p *problems) map[string]bool {
	names := map[string]bool{}
	for i, t := range f.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		if t.Extension == "" {
			p.add(key+".extension", "required (\"id@version\" of a pinned tool extension)")
		} else if f.ExtensionByRef(t.Extension) == nil {
			p.add(key+".extension", "%q is not a pinned extension (pinned: %s)", t.Extension, quoteList(f.refs()))
		}
		if len(t.Names) == 0 {
			p.add(key+".names", "required: the tool names to serve from this extension")
		}
		own := map[string]bool{}
		for j, n := range t.Names {
			nk := fmt.Sprintf("%s.names[%d]", key, j)
			switch {
			case !toolPattern.MatchString(n):
				p.add(nk, "%q does not match %s", n, toolPattern)
			case names[n]:
				p.add(nk, "tool %q is configured more than once", n)
			}
			names[n] = true
			own[n] = true
		}
		for j, n := range t.RequiresApproval {
			if !own[n] {
				p.add(fmt.Sprintf("%s.requires_approval[%d]", key, j), "%q is not in this entry's names", n)
			}
		}
	}
	return names
}

func (f *File) validateTokens(p *problems, toolNames map[string]bool) {
	ids := map[string]int{}
	providers := map[string]bool{}
	for _, pr := range f.Providers {
		providers[pr.ID] = true
	}
	for i, t := range f.Tokens {
		key := fmt.Sprintf("tokens[%d]", i)
		if !idPattern.MatchString(t.ID) {
			p.add(key+".id", "%q is missing or does not match %s", t.ID, idPattern)
		} else if j, dup := ids[t.ID]; dup {
			p.add(key+".id", "duplicate token id %q (also tokens[%d])", t.ID, j)
		} else {
			ids[t.ID] = i
		}
		if n := len([]rune(t.Subject)); n < 1 || n > maxSubjectLen {
			p.add(key+".subject", "must be 1..%d characters", maxSubjectLen)
		}
		t.Secret.validate(p, key+".secret")
		for j, pr := range t.Providers {
			if !providers[pr] {
				p.add(fmt.Sprintf("%s.providers[%d]", key, j), "unknown provider %q", pr)
			}
		}
		for j, tn := range t.Tools {
			if !toolNames[tn] {
				p.add(fmt.Sprintf("%s.tools[%d]", key, j), "unknown tool %q (not in any [[tools]] names)", tn)
			}
		}
		t.Grants.validate(p, key+".grants")
	}
}

func (g Grants) validate(p *problems, key string) {
	subset := func(k string, vals, allowed []string) {
		seen := map[string]bool{}
		for j, v := range vals {
			switch {
			case !slices.Contains(allowed, v):
				p.add(fmt.Sprintf("%s.%s[%d]", key, k, j), "%q is not one of %s", v, quoteList(allowed))
			case seen[v]:
				p.add(fmt.Sprintf("%s.%s[%d]", key, k, j), "duplicate %q", v)
			}
			seen[v] = true
		}
	}
	subset("sessions", g.Sessions, sessionGrants)
	subset("jobs", g.Jobs, jobGrants)
	for j, n := range g.ApproveTools {
		if !toolPattern.MatchString(n) {
			p.add(fmt.Sprintf("%s.approve_tools[%d]", key, j), "%q does not match %s", n, toolPattern)
		}
	}
	if len(g.ApplicationTools) > maxAppToolsLen {
		p.add(key+".application_tools", "more than %d entries", maxAppToolsLen)
	}
	seen := map[string]bool{}
	for j, a := range g.ApplicationTools {
		ak := fmt.Sprintf("%s.application_tools[%d].name", key, j)
		switch {
		case !toolPattern.MatchString(a.Name):
			p.add(ak, "%q does not match %s", a.Name, toolPattern)
		case seen[a.Name]:
			p.add(ak, "duplicate application tool %q", a.Name)
		}
		seen[a.Name] = true
	}
	if r := g.Retrieval; r != nil {
		for _, op := range []struct {
			k   string
			ids []string
		}{{"search", r.Search}, {"index", r.Index}, {"delete", r.Delete}} {
			k := op.k
			for j, id := range op.ids {
				if !idPattern.MatchString(id) {
					p.add(fmt.Sprintf("%s.retrieval.%s[%d]", key, k, j), "%q is not a corpus id", id)
				}
			}
		}
	}
}

func (s SecretRef) validate(p *problems, key string) {
	switch {
	case s.Env == "" && s.File == "":
		p.add(key, "required: { env = \"NAME\" } or { file = \"path\" }")
	case s.Env != "" && s.File != "":
		p.add(key, "set exactly one of env and file")
	case s.Env != "" && !envPattern.MatchString(s.Env):
		p.add(key+".env", "%q is not an environment variable name", s.Env)
	}
}

func (f *File) refs() []string {
	r := make([]string, len(f.Extensions))
	for i, e := range f.Extensions {
		r[i] = e.Ref()
	}
	return r
}

// toolBindings counts the [[tools]] entries bound to extension ref: each
// is a tool set of its own, and a run holds one instance per tool set it
// may call.
func (f *File) toolBindings(ref string) int {
	n := 0
	for _, t := range f.Tools {
		if t.Extension == ref {
			n++
		}
	}
	return n
}
