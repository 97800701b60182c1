package config

// File is a decoded host.toml (host-config.md §2) with defaults applied and
// relative paths resolved against the file's directory.
type File struct {
	Version    int         `toml:"version"`
	Server     Server      `toml:"server"`
	Store      Store       `toml:"store"`
	Limits     Limits      `toml:"limits"`
	Usage      Usage       `toml:"usage"`
	Extensions []Extension `toml:"extensions"`
	Providers  []Provider  `toml:"providers"`
	Tools      []Tools     `toml:"tools"`
	Tokens     []Token     `toml:"tokens"`
	// Binaries are the pinned local CLI binaries (binaries.go).
	Binaries []Binary `toml:"binaries"`
	// Retrieval is [retrieval] (retrieval.go); nil when absent.
	Retrieval *Retrieval `toml:"retrieval"`
	// Context is [context] (context.go); nil when absent.
	Context *Context `toml:"context"`
	// Sessions is [sessions]; nil when the table is absent.
	Sessions *Sessions `toml:"sessions"`
	// Idempotency is [idempotency]; nil when the table is absent.
	Idempotency *Idempotency `toml:"idempotency"`
	// Jobs is [jobs]; nil when the table is absent.
	Jobs *Jobs `toml:"jobs"`
	// Resources is [resources] (budgets); nil when absent.
	Resources *Resources `toml:"resources"`
	// Approvals and AppTools are [approvals] and [application_tools]
	// (approvals.go); nil when absent.
	Approvals *Approvals `toml:"approvals"`
	AppTools  *AppTools  `toml:"application_tools"`
	// Metrics, Log and Diagnostics are [metrics], [log] and
	// [diagnostics] (diagnostics.go); nil when absent.
	Metrics     *Metrics     `toml:"metrics"`
	Log         *Log         `toml:"log"`
	Diagnostics *Diagnostics `toml:"diagnostics"`

	// Path is the file the configuration was loaded from (absolute), and
	// Dir its directory; both empty for Parse without a path.
	Path string `toml:"-"`
	Dir  string `toml:"-"`

	pos positions
	// overrides name the command-line flag that set a key (Override), so
	// that its problems blame the flag, not a line of host.toml.
	overrides map[string]string
}

// Override records that the value at key (a key path, "server.listen")
// came from the command-line flag flag ("--listen"): Validate then reports
// its problems as "--listen: …".
func (f *File) Override(key, flag string) {
	if f.overrides == nil {
		f.overrides = map[string]string{}
	}
	f.overrides[key] = flag
}

// Server is [server].
type Server struct {
	// Listen is host:port. Default 127.0.0.1:7433. A non-loopback address
	// requires TLSCert and TLSKey (wire-core §1.4, TLS_REQUIRED).
	Listen  string `toml:"listen"`
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// AllowedOrigins are exact browser origins (scheme://host[:port]);
	// empty denies every request carrying an Origin header.
	AllowedOrigins []string `toml:"allowed_origins"`
}

// Store is [store].
type Store struct {
	// Path is the Badger directory. Default "data" beside host.toml.
	Path string `toml:"path"`
	// Backend of the durable features (store.go): "badger" (default,
	// in Path) or "jetstream" (shared by several hosts, [store.jetstream]).
	Backend   string     `toml:"backend"`
	JetStream *JetStream `toml:"jetstream"`
}

// Limits is [limits]. max_steps and max_output_tokens are protocol maxima
// that may only be lowered (wire-core §8.1); the two concurrency limits are
// admission defaults an operator may raise or lower (wire-extensions
// §11.1), honoured exactly as written.
type Limits struct {
	MaxSteps                    int   `toml:"max_steps"`                       // 1..64, default 64
	MaxOutputTokens             int   `toml:"max_output_tokens"`               // 1..65536, default 65536
	MaxConcurrentRuns           int   `toml:"max_concurrent_runs"`             // 1..10000, default 32
	MaxConcurrentRunsPerSubject int   `toml:"max_concurrent_runs_per_subject"` // 1..max_concurrent_runs, default 4
	IdleTimeoutMs               int64 `toml:"idle_timeout_ms"`                 // 0..2147483647, 0 = none
	// The fair-scheduling keys (scheduling.go).
	MaxConcurrentRunsPerAccount int            `toml:"max_concurrent_runs_per_account"`
	QueueTotal                  int            `toml:"queue_total"`
	QueuePerSubject             int            `toml:"queue_per_subject"`
	Subjects                    map[string]int `toml:"subjects"`
	Accounts                    map[string]int `toml:"accounts"`
}

// Usage is [usage].
type Usage struct {
	// HostID identifies this host in usage records. Empty: the host uses a
	// random UUID per process (wire-core §14.3).
	HostID string `toml:"host_id"`
	// JSONL is the append-only usage record file. Empty: no JSONL sink.
	JSONL string `toml:"jsonl"`
}

// Extension is one [[extensions]] pin.
type Extension struct {
	ID      string `toml:"id"`
	Version string `toml:"version"`
	// Module is the .wasm path (resolved against host.toml's directory).
	Module string `toml:"module"`
	// SHA256 is the lowercase hex digest of the whole module file, which
	// includes the embedded manifest.
	SHA256 string `toml:"sha256"`

	// MaxInstances caps the extension's live instances; 0 (the default)
	// is no cap: the pool grows to what admission allows. A cap is taken
	// at admission, one instance per run that may call the extension, so
	// a run over it is BUSY before run.started (DESIGN.md §3).
	MaxInstances int `toml:"max_instances"`
	// InstanceIdleMs is how long an idle instance above the manifest's
	// poolSize (the warm count) is kept before it is closed; 0: 30000.
	InstanceIdleMs int64 `toml:"instance_idle_ms"`
	// TurnTimeoutMs bounds the wall-clock time of one call into the
	// extension (one model turn or tool call); 0 (the default): none, as
	// the protocol has no default run deadline.
	TurnTimeoutMs int64 `toml:"turn_timeout_ms"`
}

// Ref is the "id@version" reference providers and tools use.
func (e Extension) Ref() string { return e.ID + "@" + e.Version }

// Provider is one [[providers]] instance.
type Provider struct {
	ID        string `toml:"id"`        // the wire `provider` value
	Extension string `toml:"extension"` // "id@version" of a pinned extension
	AccountID string `toml:"account_id"`
	Name      string `toml:"name"`
	// Models is the explicit model allowlist (required, may not be empty).
	Models []string `toml:"models"`
	// Settings are validated against the manifest's settings schema when
	// the extension is loaded.
	Settings map[string]any `toml:"settings"`
	// Secrets fill the manifest's credential slots by name.
	Secrets map[string]SecretRef `toml:"secrets"`
	// Binary and AccountDirectory bind a local CLI adapter's instance to
	// a [[binaries]] id and its private account directory (binaries.go).
	Binary           string `toml:"binary"`
	AccountDirectory string `toml:"account_directory"`
	// BinaryPin is the [[binaries]] entry Binary names, set by Validate.
	BinaryPin *Binary `toml:"-"`
	// InputMediaTypes are the non-text media types each model accepts
	// (context.go); absent: every model is text-only.
	InputMediaTypes map[string][]string `toml:"input_media_types"`
}

// Tools is one [[tools]] entry: host tools served by a tool extension.
type Tools struct {
	Extension string   `toml:"extension"`
	Names     []string `toml:"names"`
	// RequiresApproval ⊆ Names: these fail closed with APPROVAL_REQUIRED
	// unless an approval decision exists.
	RequiresApproval []string `toml:"requires_approval"`
	// Settings configure the tool extension (its manifest's settings
	// schema checks them at startup), e.g. http_fetch's allowlist:
	// settings = { allow_origins = ["https://example.com"] }.
	Settings map[string]any `toml:"settings"`
}

// Token is one [[tokens]] entry.
type Token struct {
	ID        string    `toml:"id"`
	Subject   string    `toml:"subject"`
	Secret    SecretRef `toml:"secret"`
	Providers []string  `toml:"providers"`
	Tools     []string  `toml:"tools"`
	Grants    Grants    `toml:"grants"`
}

// Grants is [tokens.grants]: the extension grants of wire-core §11.2.
//
// They are decoded and checked for shape so a host.toml written for a later
// release is not silently misread. sessions and jobs are operation grants
// (Ops); approve_tools and application_tools fill the principal's
// ApproveTools and ApplicationTools; retrieval grants become one op per
// corpus and operation ("retrieval.search:docs", see Ops).
type Grants struct {
	Sessions         []string          `toml:"sessions"`
	Jobs             []string          `toml:"jobs"`
	ApproveTools     []string          `toml:"approve_tools"`
	ApplicationTools []ApplicationTool `toml:"application_tools"`
	Retrieval        *RetrievalGrant   `toml:"retrieval"`
	// Metrics lets the token read GET /metrics ("metrics.read").
	Metrics bool `toml:"metrics"`
}

// Ops returns the operation grants of the implemented features as
// "feature.op" names (runtime.Principal.Ops): "sessions.create",
// "jobs.submit".
func (g Grants) Ops() []string {
	ops := make([]string, 0, len(g.Sessions)+len(g.Jobs))
	for _, op := range g.Sessions {
		ops = append(ops, "sessions."+op)
	}
	for _, op := range g.Jobs {
		ops = append(ops, "jobs."+op)
	}
	if g.Metrics {
		ops = append(ops, "metrics.read")
	}
	if r := g.Retrieval; r != nil {
		// One op per corpus: "retrieval.search:docs" (a corpus id may
		// hold ':' but the prefix is fixed, so the name is unambiguous).
		for _, id := range r.Search {
			ops = append(ops, "retrieval.search:"+id)
		}
		for _, id := range r.Index {
			ops = append(ops, "retrieval.index:"+id)
		}
		for _, id := range r.Delete {
			ops = append(ops, "retrieval.delete:"+id)
		}
	}
	return ops
}

// Unimplemented reports whether a grant of a feature this build does not
// implement yet is set. Every grant is implemented now; serve still asks,
// so the next feature's grant has somewhere to warn.
func (g Grants) Unimplemented() bool {
	return false
}

// Empty reports whether no grant is set.
func (g Grants) Empty() bool {
	return len(g.Sessions) == 0 && len(g.Jobs) == 0 && len(g.ApproveTools) == 0 &&
		len(g.ApplicationTools) == 0 && g.Retrieval == nil && !g.Metrics
}

// ApplicationTool is one application_tools grant.
type ApplicationTool struct {
	Name             string `toml:"name"`
	RequiresApproval *bool  `toml:"requires_approval"`
}

// RetrievalGrant maps retrieval operations to corpus ids.
type RetrievalGrant struct {
	Search []string `toml:"search"`
	Index  []string `toml:"index"`
	Delete []string `toml:"delete"`
}

// SecretRef points at a secret: exactly one of Env or File.
type SecretRef struct {
	Env  string `toml:"env"`
	File string `toml:"file"` // resolved against host.toml's directory
}

// Defaults (host-config.md §2, wire-core §8.1).
const (
	DefaultListen               = "127.0.0.1:7433"
	DefaultStorePath            = "data"
	MaxSteps                    = 64
	MaxOutputTokens             = 65536
	DefaultConcurrentRuns       = 32
	MaxConcurrentRuns           = 10000 // runtime.MaxConcurrentLimit
	DefaultPerSubject           = 4
	MaxInstances                = 10000
	MaxInstanceIdleMs     int64 = 86_400_000
	MaxIdleTimeoutMs      int64 = 2147483647
)

func defaults() File {
	return File{
		Server: Server{Listen: DefaultListen},
		Store:  Store{Path: DefaultStorePath},
		Limits: Limits{
			MaxSteps:                    MaxSteps,
			MaxOutputTokens:             MaxOutputTokens,
			MaxConcurrentRuns:           DefaultConcurrentRuns,
			MaxConcurrentRunsPerSubject: DefaultPerSubject,
		},
	}
}

// ExtensionByRef returns the pin named "id@version", or nil.
func (f *File) ExtensionByRef(ref string) *Extension {
	for i := range f.Extensions {
		if f.Extensions[i].Ref() == ref {
			return &f.Extensions[i]
		}
	}
	return nil
}

// ExtensionByID returns the pin with that id, or nil.
func (f *File) ExtensionByID(id string) *Extension {
	for i := range f.Extensions {
		if f.Extensions[i].ID == id {
			return &f.Extensions[i]
		}
	}
	return nil
}

// Line returns the line of host.toml where path ("providers[0].models") is
// defined, or 0 when unknown.
func (f *File) Line(path string) int { return f.pos.line(path) }
