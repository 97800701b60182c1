package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"adhost/abi"
)

// Defaults and bounds of [Limits].
const (
	DefaultMemoryMiB = 64
	MaxMemoryMiB     = 1024
	DefaultComputeMs = 1000
	MaxComputeMs     = 600_000
	DefaultPoolSize  = 4
	MaxPoolSize      = 64

	// MaxManifestBytes bounds the TOML text of a manifest.
	MaxManifestBytes = 256 << 10
	// MaxSettingsSchemaBytes bounds the settings JSON Schema text.
	MaxSettingsSchemaBytes = 128_000
)

// Enumerations of the manifest (wire-extensions §10.1).
var (
	AuthModes    = []string{"api-key", "cli-session", "none"}
	UsageSources = []string{"provider-response", "cli-report", "adapter-report", "synthetic"}
	Kinds        = []abi.Kind{abi.KindProvider, abi.KindTool, abi.KindEmbedder}
)

// Manifest is one extension's manifest. Obtain it with [Parse]; a Manifest
// returned by Parse has been validated, has its defaults applied and its
// settings schema compiled.
type Manifest struct {
	ID              string          `toml:"id"`
	Name            string          `toml:"name"`
	Version         string          `toml:"version"`
	Kind            abi.Kind        `toml:"kind"`
	ContractVersion string          `toml:"contractVersion"`
	Vendor          string          `toml:"vendor"`
	AuthMode        string          `toml:"authMode"`
	UsageSource     string          `toml:"usageSource"`
	Inspect         bool            `toml:"inspect"`
	Capabilities    map[string]bool `toml:"capabilities"`
	Network         *Network        `toml:"network"`
	Credentials     []Credential    `toml:"credentials"`
	Settings        Settings        `toml:"settings"`
	Limits          Limits          `toml:"limits"`
	// Tools are the tools a tool extension declares (tools.go).
	Tools []Tool `toml:"tools"`
	// KV grants a tool extension the kv_* host functions: a small
	// per-extension, per-subject key/value namespace in the host's store.
	KV bool `toml:"kv"`
	// Process grants the proc_* host functions (process.go).
	Process *Process `toml:"process"`

	settingsSchema *jsonschema.Schema
	origins        []string // canonical form of Network.Origins
}

// Network is the [network] table. Its absence means the extension has no
// network access at all (and must not import the http_* host functions).
type Network struct {
	// Origins are exact scheme://host[:port] origins the extension may call.
	Origins []string `toml:"origins"`
	// EndpointSetting names the settings key holding an operator-configured
	// endpoint URL whose origin is allowed too.
	EndpointSetting string `toml:"endpointSetting"`
	// OriginsSetting names the settings key holding the operator's
	// allowlist of origins (a list of scheme://host[:port]) the extension
	// may call, for a tool like http_fetch whose reach only the operator
	// can decide.
	OriginsSetting string `toml:"originsSetting"`
	// Headers are static, non-secret headers the host adds to every request.
	Headers map[string]string `toml:"headers"`
}

// Credential is one [[credentials]] slot: the host injects
// Header: Prefix+secret into requests to the allowed origins.
type Credential struct {
	Name   string `toml:"name"`
	Header string `toml:"header"`
	Prefix string `toml:"prefix"`
}

// Settings is the [settings] table.
type Settings struct {
	// Schema is the JSON Schema (text) of the instance settings object.
	// Empty: the extension takes no settings (only {} is valid).
	Schema string `toml:"schema"`
}

// Limits is the [limits] table. Zero values mean the defaults.
type Limits struct {
	MemoryMiB int `toml:"memoryMiB"`
	ComputeMs int `toml:"computeMs"`
	PoolSize  int `toml:"poolSize"`
	// TimeoutMs bounds the wall-clock time of one call into the extension
	// (0: no bound of the manifest's own; the operator's turn_timeout_ms
	// still applies, the smaller wins).
	TimeoutMs int `toml:"timeoutMs"`
}

var (
	idPattern     = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$`)
	slotPattern   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)
	capPattern    = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]{0,63}$`)
	semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

// Parse decodes and validates a manifest strictly. Errors name the offending
// key; decoding errors carry the TOML line.
func Parse(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest: larger than %d bytes", MaxManifestBytes)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("manifest: not valid UTF-8")
	}
	var m Manifest
	md, err := toml.Decode(string(data), &m)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("manifest: line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		k := extra[0]
		if line := keyLine(data, k); line > 0 {
			return nil, fmt.Errorf("manifest: line %d: unknown key %q", line, k.String())
		}
		return nil, fmt.Errorf("manifest: unknown key %q", k.String())
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// keyLine finds the line where the last component of k is defined. The
// TOML decoder does not report positions of undecoded keys, so this is a
// best-effort scan used only for error messages.
func keyLine(data []byte, k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	last := k[len(k)-1]
	for i, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		s = strings.TrimLeft(s, "[")
		for _, q := range []string{last, strconv.Quote(last), "'" + last + "'"} {
			if rest, ok := strings.CutPrefix(s, q); ok {
				rest = strings.TrimSpace(rest)
				if strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "]") || strings.HasPrefix(rest, ".") {
					return i + 1
				}
			}
		}
	}
	return 0
}

// Validate checks every field, applies defaults to Limits and compiles the
// settings schema. It reports all problems at once (errors.Join), each
// prefixed with "manifest: <key>:".
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("manifest: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !idPattern.MatchString(m.ID) {
		bad("id", "%q does not match %s", m.ID, idPattern)
	}
	if n := utf8.RuneCountInString(m.Name); n < 1 || n > 100 {
		bad("name", "must be 1..100 characters")
	}
	if len(m.Version) > 100 || !semverPattern.MatchString(m.Version) {
		bad("version", "%q is not a SemVer 2.0 version", m.Version)
	}
	if !slices.Contains(Kinds, m.Kind) {
		bad("kind", "%q is not one of provider, tool, embedder", m.Kind)
	}
	if m.ContractVersion != abi.ContractVersion {
		bad("contractVersion", "%q is not supported (want %q)", m.ContractVersion, abi.ContractVersion)
	}
	provider := m.Kind == abi.KindProvider
	if provider || m.Vendor != "" {
		if !idPattern.MatchString(m.Vendor) {
			bad("vendor", "%q does not match %s", m.Vendor, idPattern)
		}
	}
	if provider || m.AuthMode != "" {
		if !slices.Contains(AuthModes, m.AuthMode) {
			bad("authMode", "%q is not one of %s", m.AuthMode, strings.Join(AuthModes, ", "))
		}
	}
	if provider || m.UsageSource != "" {
		if !slices.Contains(UsageSources, m.UsageSource) {
			bad("usageSource", "%q is not one of %s", m.UsageSource, strings.Join(UsageSources, ", "))
		}
	}
	if m.Inspect && !provider {
		bad("inspect", "only a provider can implement inspect")
	}
	for name := range m.Capabilities {
		if !capPattern.MatchString(name) {
			bad("capabilities", "invalid capability name %q", name)
		}
	}
	if provider {
		for _, req := range []string{"tools", "textStreaming"} {
			if _, ok := m.Capabilities[req]; !ok {
				bad("capabilities."+req, "required for a provider")
			}
		}
	}
	m.origins = nil
	if m.Network != nil {
		n := m.Network
		seen := map[string]bool{}
		for i, o := range n.Origins {
			c, err := CanonicalOrigin(o)
			if err == nil && c != o && c != withDefaultPort(o) {
				err = fmt.Errorf("must be written exactly as scheme://host[:port]")
			}
			if err != nil {
				bad(fmt.Sprintf("network.origins[%d]", i), "%q: %v", o, err)
				continue
			}
			if seen[c] {
				bad(fmt.Sprintf("network.origins[%d]", i), "duplicate origin %q", o)
			}
			seen[c] = true
			m.origins = append(m.origins, c)
		}
		if n.EndpointSetting != "" && !slotPattern.MatchString(n.EndpointSetting) {
			bad("network.endpointSetting", "%q is not a valid settings key", n.EndpointSetting)
		}
		if n.OriginsSetting != "" && !slotPattern.MatchString(n.OriginsSetting) {
			bad("network.originsSetting", "%q is not a valid settings key", n.OriginsSetting)
		}
		if n.OriginsSetting != "" && n.OriginsSetting == n.EndpointSetting {
			bad("network.originsSetting", "must differ from endpointSetting")
		}
		if len(n.Origins) == 0 && n.EndpointSetting == "" && n.OriginsSetting == "" {
			bad("network", "declares neither origins, endpointSetting nor originsSetting")
		}
		for name, v := range n.Headers {
			if !ValidHeaderName(name) {
				bad("network.headers", "invalid header name %q", name)
			} else if ReservedHeader(name) {
				bad("network.headers", "header %q is managed by the host", name)
			}
			if !validHeaderValue(v) {
				bad("network.headers."+name, "invalid header value")
			}
		}
	}
	if len(m.Credentials) > 0 && m.Network == nil {
		bad("credentials", "credentials need a [network] table")
	}
	names, headers := map[string]bool{}, map[string]bool{}
	for i, c := range m.Credentials {
		key := fmt.Sprintf("credentials[%d]", i)
		if !slotPattern.MatchString(c.Name) {
			bad(key+".name", "%q does not match %s", c.Name, slotPattern)
		} else if names[c.Name] {
			bad(key+".name", "duplicate slot %q", c.Name)
		}
		names[c.Name] = true
		if !ValidHeaderName(c.Header) {
			bad(key+".header", "invalid header name %q", c.Header)
		} else if h := strings.ToLower(c.Header); headers[h] {
			bad(key+".header", "duplicate header %q", c.Header)
		} else {
			headers[h] = true
		}
		if !validHeaderValue(c.Prefix) {
			bad(key+".prefix", "invalid header value")
		}
	}
	if err := m.compileSettings(); err != nil {
		bad("settings.schema", "%v", err)
	}
	m.validateTools(bad)
	m.validateProcess(bad)
	if m.KV && m.Kind != abi.KindTool {
		bad("kv", "only a tool extension may use kv")
	}
	l := &m.Limits
	if l.MemoryMiB == 0 {
		l.MemoryMiB = DefaultMemoryMiB
	}
	if l.ComputeMs == 0 {
		l.ComputeMs = DefaultComputeMs
	}
	if l.PoolSize == 0 {
		l.PoolSize = DefaultPoolSize
	}
	if l.MemoryMiB < 1 || l.MemoryMiB > MaxMemoryMiB {
		bad("limits.memoryMiB", "%d is outside 1..%d", l.MemoryMiB, MaxMemoryMiB)
	}
	if l.ComputeMs < 1 || l.ComputeMs > MaxComputeMs {
		bad("limits.computeMs", "%d is outside 1..%d", l.ComputeMs, MaxComputeMs)
	}
	if l.PoolSize < 1 || l.PoolSize > MaxPoolSize {
		bad("limits.poolSize", "%d is outside 1..%d", l.PoolSize, MaxPoolSize)
	}
	if l.TimeoutMs < 0 || l.TimeoutMs > MaxComputeMs {
		bad("limits.timeoutMs", "%d is outside 0..%d", l.TimeoutMs, MaxComputeMs)
	}
	return errors.Join(errs...)
}

// Origins returns the canonical form (scheme://host:port, port always
// present) of the declared origins.
func (m *Manifest) Origins() []string { return slices.Clone(m.origins) }

// HasNetwork reports whether the manifest grants network access.
func (m *Manifest) HasNetwork() bool { return m.Network != nil }

// EndpointSetting is the settings key of the operator-configured endpoint,
// or "".
func (m *Manifest) EndpointSetting() string {
	if m.Network == nil {
		return ""
	}
	return m.Network.EndpointSetting
}

// OriginsSetting is the settings key of the operator's origin allowlist,
// or "".
func (m *Manifest) OriginsSetting() string {
	if m.Network == nil {
		return ""
	}
	return m.Network.OriginsSetting
}

// Capability reports a boolean capability (false when absent).
func (m *Manifest) Capability(name string) bool { return m.Capabilities[name] }

// withDefaultPort appends the scheme's default port to an origin written
// without one, so "https://x" is accepted as exact while its canonical form
// is "https://x:443".
func withDefaultPort(o string) string {
	switch {
	case strings.HasPrefix(o, "https://"):
		return o + ":443"
	case strings.HasPrefix(o, "http://"):
		return o + ":80"
	}
	return o
}

// ExactOrigin is CanonicalOrigin for an origin that must be written
// exactly as scheme://host[:port] (the canonical form, the default port
// optional): what an operator or a manifest lists.
func ExactOrigin(raw string) (string, error) {
	c, err := CanonicalOrigin(raw)
	if err == nil && c != raw && c != withDefaultPort(raw) {
		err = fmt.Errorf("must be written exactly as scheme://host[:port]")
	}
	return c, err
}

// CanonicalOrigin parses an origin written as scheme://host[:port] (no path,
// query, fragment or user info) and returns scheme://host:port with the
// default port filled in and the host lower-cased. http is allowed only for
// loopback hosts.
func CanonicalOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL")
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#") {
		return "", errors.New("must be scheme://host[:port] without path, query, fragment or user info")
	}
	return originOf(u)
}

// OriginOf returns the canonical origin of an absolute http(s) URL, with
// the same rules as [CanonicalOrigin] but ignoring path and query.
func OriginOf(u *url.URL) (string, error) {
	if u.User != nil {
		return "", errors.New("user info is not allowed")
	}
	return originOf(u)
}

func originOf(u *url.URL) (string, error) {
	scheme := u.Scheme
	if scheme != "https" && scheme != "http" {
		return "", errors.New("scheme must be https (or http for a loopback host)")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("missing host")
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return "", errors.New("empty port")
		}
		port = "443"
		if scheme == "http" {
			port = "80"
		}
	} else {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || port[0] == '0' {
			return "", fmt.Errorf("invalid port %q", port)
		}
	}
	if scheme == "http" && !IsLoopbackHost(host) {
		return "", errors.New("http is allowed only for loopback hosts")
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// IsLoopbackHost reports whether host (a name or IP literal, without
// brackets) names the loopback interface.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReservedHeader reports whether a header name is managed by the host:
// credentials, cookies, proxy and hop-by-hop headers a guest may not set and
// a manifest may not declare statically.
func ReservedHeader(name string) bool {
	h := strings.ToLower(name)
	if strings.HasPrefix(h, "proxy-") {
		return true
	}
	switch h {
	case "authorization", "x-api-key", "x-goog-api-key", "cookie", "cookie2", "host",
		"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
		"content-length", "expect":
		return true
	}
	return false
}

// ValidHeaderName reports whether name is an RFC 9110 token.
func ValidHeaderName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func validHeaderValue(v string) bool {
	if len(v) > 8192 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ErrExternalRef is returned (wrapped) when a settings schema refers to an
// external resource. Schemas must be self-contained.
var ErrExternalRef = errors.New("external $ref refused")

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%w: %s", ErrExternalRef, url)
}

const schemaURL = "adhost:settings.json"

const noSettingsSchema = `{"type":"object","additionalProperties":false}`

func (m *Manifest) compileSettings() error {
	text := m.Settings.Schema
	if strings.TrimSpace(text) == "" {
		text = noSettingsSchema
	}
	if len(text) > MaxSettingsSchemaBytes {
		return fmt.Errorf("larger than %d bytes", MaxSettingsSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return errors.New("not valid JSON")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return errors.New("must be a JSON object")
	}
	if s, ok := obj["$schema"]; ok {
		switch s {
		case "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
			"https://json-schema.org/draft/2020-12/schema":
		default:
			return fmt.Errorf("$schema %v is not draft-07 or 2020-12", s)
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.Is(err, ErrExternalRef) || (errors.As(err, &le) && errors.Is(le.Err, ErrExternalRef)) {
			return ErrExternalRef
		}
		return errors.New("not a valid JSON Schema")
	}
	m.settingsSchema = sch
	return nil
}

// ValidateSettings checks an instance's settings JSON (nil or empty means
// {}) against the settings schema. The error never echoes setting values.
func (m *Manifest) ValidateSettings(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("settings of %s: not valid JSON", m.ID)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("settings of %s: must be a JSON object", m.ID)
	}
	if m.settingsSchema == nil {
		if err := m.compileSettings(); err != nil {
			return fmt.Errorf("settings schema of %s: %v", m.ID, err)
		}
	}
	if err := m.settingsSchema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("settings of %s do not match the extension's settings schema (at %q)", m.ID, "/"+strings.Join(ve.InstanceLocation, "/"))
		}
		return fmt.Errorf("settings of %s do not match the extension's settings schema", m.ID)
	}
	return nil
}
