package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

// Defaults of wire-extensions §7 (cacheTtlMs, minRefreshMs, timeoutMs).
const (
	DefaultCacheTTL   = 30 * time.Second
	DefaultMinRefresh = time.Second
	DefaultTimeout    = 5 * time.Second
)

// MaxCatalogModels bounds modelCatalog.models (wire-core §6.1).
const MaxCatalogModels = 1000

// Health status values (wire-core §6.1).
const (
	StatusReady           = "ready"
	StatusUnauthenticated = "unauthenticated"
	StatusUnavailable     = "unavailable"
	StatusUnsupported     = "unsupported"
	StatusUnknown         = "unknown"
)

// Inspection codes (wire-extensions §7). A probe reports one of these; any
// other code is treated as INVALID_DISCOVERY_RESPONSE.
const (
	CodeCatalogAvailable         = "CATALOG_AVAILABLE"
	CodeAuthRequired             = "AUTH_REQUIRED"
	CodeAuthRejected             = "AUTH_REJECTED"
	CodeCLIAuthRequired          = "CLI_AUTH_REQUIRED"
	CodeRateLimited              = "RATE_LIMITED"
	CodeProviderUnreachable      = "PROVIDER_UNREACHABLE"
	CodeInvalidDiscoveryResponse = "INVALID_DISCOVERY_RESPONSE"
	CodeCLIUnavailable           = "CLI_UNAVAILABLE"
	CodeDiscoveryTimeout         = "DISCOVERY_TIMEOUT"
	CodeDiscoveryFailed          = "DISCOVERY_FAILED"
	CodeAccessDenied             = "ACCESS_DENIED"
	CodeDiscoveryUnsupported     = "DISCOVERY_UNSUPPORTED"
	CodeCLIUpgradeRequired       = "CLI_UPGRADE_REQUIRED"
	CodeCLISessionPresent        = "CLI_SESSION_PRESENT"
	CodeCLICatalogAvailable      = "CLI_CATALOG_AVAILABLE"
	CodeCLIStatusUnknown         = "CLI_STATUS_UNKNOWN"
)

// Catalog sources (wire-core §6.1).
const (
	SourceProvider    = "provider"
	SourceConfigured  = "configured"
	SourceUnavailable = "unavailable"
)

type codeInfo struct {
	status  string
	message string
}

// codes is the table of wire-extensions §7 with the fixed public message of
// each code.
var codes = map[string]codeInfo{
	CodeCatalogAvailable:         {StatusReady, "The catalog is reachable. Model execution and quota have not been tested."},
	CodeAuthRequired:             {StatusUnauthenticated, "The host has no credentials for this provider."},
	CodeAuthRejected:             {StatusUnauthenticated, "The provider rejected the host's credentials."},
	CodeCLIAuthRequired:          {StatusUnauthenticated, "The provider CLI is not signed in."},
	CodeRateLimited:              {StatusUnavailable, "The provider is rate limiting catalog requests."},
	CodeProviderUnreachable:      {StatusUnavailable, "The provider could not be reached."},
	CodeInvalidDiscoveryResponse: {StatusUnavailable, "The provider's catalog response could not be validated."},
	CodeCLIUnavailable:           {StatusUnavailable, "The provider CLI is not available on this host."},
	CodeDiscoveryTimeout:         {StatusUnavailable, "The discovery probe timed out."},
	CodeDiscoveryFailed:          {StatusUnavailable, "The discovery probe failed."},
	CodeAccessDenied:             {StatusUnsupported, "The credentials may not read the provider's catalog."},
	CodeDiscoveryUnsupported:     {StatusUnsupported, "The provider does not support discovery."},
	CodeCLIUpgradeRequired:       {StatusUnsupported, "The provider CLI must be upgraded."},
	CodeCLISessionPresent:        {StatusUnknown, "A CLI session is present; its catalog was not read."},
	CodeCLICatalogAvailable:      {StatusUnknown, "The CLI reported its catalog. Model execution and quota have not been tested."},
	CodeCLIStatusUnknown:         {StatusUnknown, "The provider CLI status could not be determined."},
}

// HealthFor returns the status and fixed message of an inspection code, and
// whether the code is known.
func HealthFor(code string) (status, message string, ok bool) {
	ci, ok := codes[code]
	return ci.status, ci.message, ok
}

// Health is a provider's discovery health (wire-core §6.1). CheckedAt is
// when the probe finished; it encodes as RFC 3339 UTC with milliseconds.
type Health struct {
	Status    string    `json:"status"`
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	CheckedAt time.Time `json:"checkedAt"`
}

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// MarshalJSON encodes h with checkedAt in TimeFormat.
func (h Health) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Status    string `json:"status"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		CheckedAt string `json:"checkedAt"`
	}{h.Status, h.Code, h.Message, h.CheckedAt.UTC().Format(TimeFormat)})
}

// Catalog is a provider's model catalog (wire-core §6.1). Models is never
// nil (it encodes as an array, possibly empty) and holds at most
// MaxCatalogModels unique ids.
type Catalog struct {
	Source   string   `json:"source"`
	Models   []string `json:"models"`
	Complete bool     `json:"complete"`
}

// Provider is one entry of GET /v1/providers (wire-core §6.1), ready to
// encode. Models is the execution allowlist: nil is omitted (any explicit
// model id), an empty slice encodes as [] (no model allowed).
type Provider struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Vendor       string          `json:"vendor"`
	AuthMode     string          `json:"authMode"`
	Capabilities map[string]bool `json:"capabilities"`
	Models       []string        `json:"models,omitzero"`
	Health       Health          `json:"health"`
	ModelCatalog Catalog         `json:"modelCatalog"`
	// InputMediaTypes are the configured per-model media types
	// (wire-context §1.2); omitted when the operator configured none.
	InputMediaTypes map[string][]string `json:"inputMediaTypes,omitempty"`
}

// Options configures a Cache. Zero values take the defaults.
type Options struct {
	// CacheTTL is how long a probe outcome, success or failure, is reused
	// (default 30 s).
	CacheTTL time.Duration
	// MinRefresh is the minimum time since the last probe finished before
	// a refresh probes again (default 1 s).
	MinRefresh time.Duration
	// Timeout bounds one probe (default 5 s); it never applies to runs.
	Timeout time.Duration
	// Now is the clock for TTL, floor and checkedAt (default time.Now).
	// The probe timeout always uses real time.
	Now func() time.Time
}

// Cache holds the last probe outcome of each provider instance, keyed by
// instance id (see Forget when an id is rebound). It is safe for
// concurrent use.
type Cache struct {
	opts   Options
	base   context.Context
	cancel context.CancelFunc
	probes sync.WaitGroup

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	last     *outcome // nil until the first probe finished
	inflight *probe
}

type probe struct {
	done chan struct{} // closed when out is set
	out  *outcome
}

// outcome is what one probe established. The catalog is derived at read
// time, so the instance's current allowlist is always the one shown.
type outcome struct {
	code     string
	models   []string // only for catalog codes; validated, ≤ MaxCatalogModels
	complete bool
	at       time.Time
}

// New returns an empty cache. Close it to stop probes in flight.
func New(opts Options) *Cache {
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	base, cancel := context.WithCancel(context.Background())
	return &Cache{opts: opts, base: base, cancel: cancel, entries: map[string]*entry{}}
}

// Close cancels probes in flight and waits for them to finish (each is
// bounded by Timeout even if its provider ignores cancellation). Readers
// waiting on a cancelled probe get DISCOVERY_FAILED. Get after Close
// still works but every new probe fails at once.
func (c *Cache) Close() {
	c.cancel()
	c.probes.Wait()
}

// Forget drops the cached outcome of instance id, e.g. after the host
// rebinds that id to another extension or account. A probe in flight still
// completes for its readers but is then discarded.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}

// Get returns the health and catalog of inst, probing when the cached
// outcome is missing or older than CacheTTL, or when refresh is set and the
// last probe finished at least MinRefresh ago. A probe already in flight is
// joined instead of starting another. If ctx ends first, Get returns at
// once with a DISCOVERY_TIMEOUT health that is not cached, and the probe
// continues for the other readers and the cache.
func (c *Cache) Get(ctx context.Context, inst *runtime.ProviderInstance, refresh bool) (Health, Catalog) {
	out := c.outcome(ctx, inst, refresh)
	return out.health(), out.catalog(inst)
}

// Entry returns the complete /v1/providers entry of inst.
func (c *Cache) Entry(ctx context.Context, inst *runtime.ProviderInstance, refresh bool) Provider {
	h, cat := c.Get(ctx, inst, refresh)
	return NewProvider(inst, h, cat)
}

// Entries returns the entries of insts in order, probing the instances
// that need it concurrently.
func (c *Cache) Entries(ctx context.Context, insts []*runtime.ProviderInstance, refresh bool) []Provider {
	out := make([]Provider, len(insts))
	var wg sync.WaitGroup
	for i, inst := range insts {
		wg.Go(func() { out[i] = c.Entry(ctx, inst, refresh) })
	}
	wg.Wait()
	return out
}

// NewProvider builds the wire entry of inst from its discovery fields.
// Capabilities always contain tools and textStreaming (false unless the
// instance says otherwise); Models copies the allowlist, keeping nil
// (omitted) distinct from empty ([]).
func NewProvider(inst *runtime.ProviderInstance, h Health, cat Catalog) Provider {
	caps := make(map[string]bool, len(inst.Capabilities)+2)
	caps["tools"], caps["textStreaming"] = false, false
	for k, v := range inst.Capabilities {
		caps[k] = v
	}
	var models []string
	if inst.Models != nil {
		models = append([]string{}, inst.Models...)
	}
	if cat.Models == nil {
		cat.Models = []string{}
	}
	return Provider{
		ID: inst.ID, Name: inst.Name, Vendor: inst.Vendor, AuthMode: inst.AuthMode,
		Capabilities: caps, Models: models, Health: h, ModelCatalog: cat,
		InputMediaTypes: inst.InputMediaTypes,
	}
}

func (c *Cache) outcome(ctx context.Context, inst *runtime.ProviderInstance, refresh bool) *outcome {
	c.mu.Lock()
	e := c.entries[inst.ID]
	if e == nil {
		e = &entry{}
		c.entries[inst.ID] = e
	}
	p := e.inflight
	if p == nil {
		if last := e.last; last != nil {
			age := c.opts.Now().Sub(last.at)
			if age < c.opts.CacheTTL && (!refresh || age < c.opts.MinRefresh) {
				c.mu.Unlock()
				return last
			}
		}
		p = &probe{done: make(chan struct{})}
		e.inflight = p
		c.probes.Add(1)
		go c.run(e, p, inst.Provider)
	}
	c.mu.Unlock()

	select {
	case <-p.done:
		return p.out
	case <-ctx.Done():
		return &outcome{code: CodeDiscoveryTimeout, at: c.opts.Now()}
	}
}

// run performs one probe on the cache's context and publishes its outcome.
func (c *Cache) run(e *entry, p *probe, prov runtime.Provider) {
	defer c.probes.Done()
	out := c.inspect(prov)
	out.at = c.opts.Now()
	c.mu.Lock()
	e.last = out
	e.inflight = nil
	p.out = out
	c.mu.Unlock()
	close(p.done)
}

type inspectResult struct {
	out *abi.InspectOutput
	err error
}

// inspect calls prov.Inspect bounded by Timeout. A provider that ignores
// its context is abandoned at the deadline (its goroutine ends whenever
// Inspect returns).
func (c *Cache) inspect(prov runtime.Provider) *outcome {
	if prov == nil {
		return &outcome{code: CodeDiscoveryUnsupported}
	}
	ctx, cancel := context.WithTimeout(c.base, c.opts.Timeout)
	defer cancel()
	ch := make(chan inspectResult, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- inspectResult{err: fmt.Errorf("discovery: inspect panicked: %v", r)}
			}
		}()
		out, err := prov.Inspect(ctx)
		ch <- inspectResult{out, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &outcome{code: CodeDiscoveryTimeout}
		}
		return fromInspect(r.out, r.err)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &outcome{code: CodeDiscoveryTimeout}
		}
		return &outcome{code: CodeDiscoveryFailed} // cache closed
	}
}

// fromInspect maps a probe's result to an outcome.
func fromInspect(out *abi.InspectOutput, err error) *outcome {
	if err != nil {
		return &outcome{code: codeForError(err)}
	}
	if out == nil {
		return &outcome{code: CodeInvalidDiscoveryResponse}
	}
	if _, ok := codes[out.Code]; !ok {
		return &outcome{code: CodeInvalidDiscoveryResponse}
	}
	if !isCatalogCode(out.Code) {
		return &outcome{code: out.Code}
	}
	models, complete, ok := checkModels(out.Models, out.Complete)
	if !ok {
		return &outcome{code: CodeInvalidDiscoveryResponse}
	}
	return &outcome{code: out.Code, models: models, complete: complete}
}

func isCatalogCode(code string) bool {
	return code == CodeCatalogAvailable || code == CodeCLICatalogAvailable
}

// checkModels validates a reported inventory. Every id must be a valid
// model id (else the whole probe is INVALID_DISCOVERY_RESPONSE: one bad id
// means the adapter misparsed the vendor's answer). Repeated ids are
// dropped (paginated listings can repeat an entry). More than
// MaxCatalogModels ids are truncated with complete=false, the rule for a
// catalog read that hits its cap (wire-extensions §7).
func checkModels(in []string, complete bool) ([]string, bool, bool) {
	out := make([]string, 0, min(len(in), MaxCatalogModels))
	seen := make(map[string]struct{}, len(in))
	for _, m := range in {
		if !protocol.IsModelID(m) {
			return nil, false, false
		}
		if _, dup := seen[m]; dup {
			continue
		}
		seen[m] = struct{}{}
		if len(out) == MaxCatalogModels {
			complete = false
			continue
		}
		out = append(out, m)
	}
	return out, complete, true
}

// codeForError maps a probe error (a *protocol.Error from the provider
// runtime, or anything else) to an inspection code.
func codeForError(err error) string {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		if errors.Is(err, context.DeadlineExceeded) {
			return CodeDiscoveryTimeout
		}
		return CodeDiscoveryFailed
	}
	switch pe.Code {
	case protocol.CodeRateLimited:
		return CodeRateLimited
	case protocol.CodeProviderUnreachable:
		return CodeProviderUnreachable
	case protocol.CodeProviderAuth:
		return CodeAuthRejected
	case protocol.CodeAuthRequired:
		return CodeAuthRequired
	case protocol.CodeTimeout:
		return CodeDiscoveryTimeout
	case protocol.CodeInvalidProviderResponse, protocol.CodeInvalidProviderResult, protocol.CodeResponseTooLarge:
		return CodeInvalidDiscoveryResponse
	case CodeCLIUnavailable, CodeCLIUpgradeRequired:
		return string(pe.Code)
	}
	return CodeDiscoveryFailed
}

func (o *outcome) health() Health {
	ci := codes[o.code] // every stored code is in the table
	return Health{Status: ci.status, Code: o.code, Message: ci.message, CheckedAt: o.at}
}

// catalog derives the catalog: the probe's inventory after a successful
// catalog read, otherwise the allowlist (configured) or nothing
// (unavailable), never complete. A failed probe replaces the previous
// outcome in the cache, so a stale inventory is never shown after it.
func (o *outcome) catalog(inst *runtime.ProviderInstance) Catalog {
	if isCatalogCode(o.code) {
		return Catalog{Source: SourceProvider, Models: append([]string{}, o.models...), Complete: o.complete}
	}
	if inst.Models != nil {
		n := min(len(inst.Models), MaxCatalogModels)
		return Catalog{Source: SourceConfigured, Models: append([]string{}, inst.Models[:n]...), Complete: false}
	}
	return Catalog{Source: SourceUnavailable, Models: []string{}, Complete: false}
}
