package runtime

import (
	"bytes"
	"encoding/json"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// plan is what validation resolved for one run.
type plan struct {
	cfg             *engineConfig // the configuration the run was validated against
	inst            *ProviderInstance
	tools           []*hostTool // in request order
	toolByName      map[string]*hostTool
	toolDefs        []abi.ToolDef
	output          validator // nil without outputSchema
	maxSteps        int
	maxOutputTokens int
	idle            time.Duration
	instructions    string
	// context is the run's selected context (nil: no attachments and no
	// outputArtifact); contextSet what Assemble made of it for this run.
	context    RunContext
	contextSet *ContextSet
	// approvals is the run's decoded `approvals` option; nil: none.
	approvals *ApprovalPolicy
}

// maxAppToolDefBytes bounds one application tool definition
// (wire-extensions §5.5).
const maxAppToolDefBytes = 128_000

// outputDirective is appended to the instructions of a run with an
// outputSchema (wire-core §9: wording free).
const outputDirective = "Respond with only a JSON value that conforms to the following JSON Schema. Do not add any other text.\nJSON Schema: "

// validate runs the semantic checks of wire-core §3.3 in their order. The
// decoder (protocol.DecodeRunRequest) has already enforced the schema;
// features this host does not implement keep their slot in the order and
// answer with their "unavailable" code.
func (e *Engine) validate(req *protocol.RunRequest) (*plan, error) {
	if req == nil {
		return nil, protocol.New(protocol.CodeInvalidRequest)
	}
	// Defensive range checks the decoder already guarantees.
	if req.Input == "" ||
		(req.MaxSteps != nil && (*req.MaxSteps < 1 || *req.MaxSteps > MaxSteps)) ||
		(req.MaxOutputTokens != nil && (*req.MaxOutputTokens < 1 || *req.MaxOutputTokens > MaxOutputTokens)) ||
		(req.IdleTimeoutMs != nil && (*req.IdleTimeoutMs < 0 || *req.IdleTimeoutMs > 2147483647)) {
		return nil, protocol.New(protocol.CodeInvalidRequest)
	}
	// The context fields' schema: a schema failure precedes every
	// semantic check.
	var rc RunContext
	if len(req.Attachments) > 0 || len(req.OutputArtifact) > 0 {
		if e.contexts == nil {
			return nil, protocol.New(protocol.CodeInvalidRequest)
		}
	}
	if e.contexts != nil && (len(req.Attachments) > 0 || len(req.OutputArtifact) > 0 || len(req.Retrieval) > 0) {
		var err error
		if rc, err = e.contexts.Parse(req); err != nil {
			return nil, protocol.AsPublic(err)
		}
	}
	// 1. sessions
	if len(req.Session) > 0 {
		return nil, protocol.New(protocol.CodeSessionsUnavailable)
	}
	// 2–3. retrieval: a service, the option's schema, and its attachment
	// budget (attachments + limit ≤ 16), all by the context service,
	// which holds the evidence seam
	if len(req.Retrieval) > 0 {
		if rc == nil {
			return nil, protocol.New(protocol.CodeRetrievalUnavailable)
		}
		if err := rc.CheckRetrieval(); err != nil {
			return nil, protocol.AsPublic(err)
		}
	}
	// 4. idempotency
	if req.IdempotencyKey != nil && !e.idemKeys {
		return nil, protocol.New(protocol.CodeIdempotencyUnavailable)
	}
	// 5. provider
	cfg := e.cfg.Load()
	inst := cfg.providers[req.Provider]
	if inst == nil {
		return nil, protocol.New(protocol.CodeUnknownProvider)
	}
	// 6–9. inline preflight, references and modality per item, artifact
	// (wire-context §3.1)
	if rc != nil {
		if err := rc.Check(inst.InputMediaTypes[req.Model]); err != nil {
			return nil, protocol.AsPublic(err)
		}
	}
	// 10. retries need safeRetries
	if req.Retry != nil && req.Retry.MaxAttempts > 1 && !inst.Capabilities["safeRetries"] {
		return nil, protocol.New(protocol.CodeUnsupportedCapability)
	}
	// 11. model allowlist (nil: any explicit model; empty: none)
	if inst.Models != nil && !contains(inst.Models, req.Model) {
		return nil, protocol.New(protocol.CodeUnsupportedModel)
	}
	// 12. required capabilities must be advertised as true
	for _, c := range req.RequiredCapabilities {
		if !inst.Capabilities[c] {
			return nil, protocol.New(protocol.CodeUnsupportedCapability)
		}
	}
	// 13. tools need the tools capability
	if len(req.Tools) > 0 && !inst.Capabilities["tools"] {
		return nil, protocol.New(protocol.CodeUnsupportedTools)
	}
	// 14. duplicate tool names
	seen := make(map[string]bool, len(req.Tools))
	for _, name := range req.Tools {
		if seen[name] {
			return nil, protocol.New(protocol.CodeInvalidRequest)
		}
		seen[name] = true
	}
	// 15–19. application tools
	apps, err := e.applicationTools(req, cfg, seen)
	if err != nil {
		return nil, err
	}
	// 20. every selected tool is registered
	pl := &plan{inst: inst, cfg: cfg, context: rc}
	if len(req.Tools) > 0 {
		pl.toolByName = make(map[string]*hostTool, len(req.Tools))
	}
	for _, name := range req.Tools {
		ht := cfg.tools[name]
		if ht == nil {
			ht = apps[name]
		}
		if ht == nil {
			return nil, protocol.New(protocol.CodeUnknownTool)
		}
		pl.tools = append(pl.tools, ht)
		pl.toolByName[name] = ht
		def := ht.tool.Def
		def.OutputSchema = nil // the host's to check, not the model's (wire-core §12.1)
		pl.toolDefs = append(pl.toolDefs, def)
	}
	// 21. approvals
	if len(req.Approvals) > 0 {
		if e.reviewer == nil {
			return nil, protocol.New(protocol.CodeApprovalUnavailable)
		}
		if pl.approvals, err = e.reviewer.Policy(req.Approvals); err != nil {
			return nil, protocol.AsPublic(err)
		}
	}
	// 22. outputSchema
	if len(req.OutputSchema) > 0 {
		s, err := compileSchema(req.OutputSchema)
		if err != nil {
			pe := protocol.New(protocol.CodeInvalidSchema)
			pe.Err = err
			return nil, pe
		}
		pl.output = s
	}

	pl.maxSteps = effective(req.MaxSteps, DefaultMaxSteps, cfg.limits.MaxSteps)
	pl.maxOutputTokens = effective(req.MaxOutputTokens, DefaultMaxOutputTokens, cfg.limits.MaxOutputTokens)
	pl.idle = cfg.limits.IdleTimeout
	if req.IdleTimeoutMs != nil && *req.IdleTimeoutMs > 0 {
		d := time.Duration(*req.IdleTimeoutMs) * time.Millisecond
		if pl.idle == 0 || d < pl.idle {
			pl.idle = d
		}
	}
	if req.Instructions != nil {
		pl.instructions = *req.Instructions
	}
	if pl.output != nil {
		if pl.instructions != "" {
			pl.instructions += "\n\n"
		}
		pl.instructions += outputDirective + compactString(req.OutputSchema)
	}
	if rc != nil && rc.Directive() != "" {
		if pl.instructions != "" {
			pl.instructions += "\n\n"
		}
		pl.instructions += rc.Directive()
	}
	return pl, nil
}

// effective is the request value or the default, lowered to the host limit.
func effective(req *int, def, host int) int {
	v := def
	if req != nil {
		v = *req
	}
	if host > 0 && v > host {
		v = host
	}
	return v
}

// authorize checks the provider grant, the grant of every selected tool
// (wire-core §11.2): an application tool needs an applicationTools grant
// entry, any other tool the tools grant (wire-extensions §5.1), and the
// retrieval.search grant of the run's corpus (§6.3). It runs after
// validation, so validation codes reach tokens without the grant.
func authorize(p *Principal, req *protocol.RunRequest, pl *plan) error {
	if p == nil || !p.Providers[req.Provider] {
		return protocol.New(protocol.CodeForbidden)
	}
	if pl.context != nil {
		if ev := pl.context.Retrieval(); ev != nil && !p.Can("retrieval.search:"+ev.Corpus()) {
			return protocol.New(protocol.CodeForbidden)
		}
	}
	for _, t := range req.Tools {
		if ht := pl.toolByName[t]; ht != nil && ht.app {
			if _, ok := p.ApplicationTools[t]; !ok {
				return protocol.New(protocol.CodeForbidden)
			}
			continue
		}
		if !p.Tools[t] {
			return protocol.New(protocol.CodeForbidden)
		}
	}
	return nil
}

// streamRequired refuses the SSE-only options on a JSON run, after
// authorization (wire-core §3.3), applicationTools first.
func streamRequired(req *protocol.RunRequest, mode Mode) error {
	switch {
	case mode == ModeStream:
		return nil
	case len(req.ApplicationTools) > 0:
		return protocol.New(protocol.CodeToolStreamRequired)
	case len(req.Approvals) > 0:
		return protocol.New(protocol.CodeApprovalStreamRequired)
	}
	return nil
}

// applicationTools runs checks 15–19 of wire-core §3.3 on the run's
// application tool definitions and returns them by name, compiled. They
// are the run's own tools: the review requirement of each is the host
// default or the definition's flag here, and the executor's grant may add
// review once the principal is known (reviewRequired).
func (e *Engine) applicationTools(req *protocol.RunRequest, cfg *engineConfig, selected map[string]bool) (map[string]*hostTool, error) {
	if len(req.ApplicationTools) == 0 {
		return nil, nil
	}
	if e.apps == nil {
		return nil, protocol.New(protocol.CodeApplicationToolsUnavail)
	}
	defs, err := e.apps.Definitions(req.ApplicationTools)
	if err != nil {
		return nil, protocol.AsPublic(err)
	}
	out := make(map[string]*hostTool, len(defs))
	for _, d := range defs { // 16
		if out[d.Def.Name] != nil || cfg.tools[d.Def.Name] != nil {
			return nil, protocol.New(protocol.CodeToolDefinitionConflict)
		}
		out[d.Def.Name] = &hostTool{}
	}
	for _, d := range defs { // 17
		if !selected[d.Def.Name] {
			return nil, protocol.New(protocol.CodeInvalidRequest)
		}
	}
	for _, d := range defs { // 18
		if d.Size > maxAppToolDefBytes {
			return nil, protocol.New(protocol.CodeToolDefinitionLimit)
		}
	}
	requireAll := e.apps.RequireApproval()
	for _, d := range defs { // 19
		ht := &hostTool{
			tool: &Tool{Def: d.Def, RequiresApproval: requireAll || d.RequiresApproval},
			exec: e.apps,
			app:  true,
		}
		if ht.schema, err = compileSchema(d.Def.InputSchema); err != nil {
			return nil, protocol.AsPublic(err)
		}
		if len(d.Def.OutputSchema) > 0 {
			if ht.output, err = compileSchema(d.Def.OutputSchema); err != nil {
				return nil, protocol.AsPublic(err)
			}
		}
		out[d.Def.Name] = ht
	}
	return out, nil
}

// reviewRequired is whether a call of ht needs an approval in a run of p:
// the tool's own requirement, or, for an application tool, a grant that
// does not waive review (wire-extensions §5.2).
func reviewRequired(ht *hostTool, p *Principal) bool {
	if ht.tool.RequiresApproval {
		return true
	}
	if !ht.app {
		return false
	}
	needs, ok := p.ApplicationTools[ht.tool.Def.Name]
	return !ok || needs
}

// bindGrants settles the review requirement of the run's application
// tools for the principal that starts it. Those hostTools belong to this
// run's plan alone, so they are marked in place.
func (pl *plan) bindGrants(p *Principal) {
	for _, ht := range pl.tools {
		if ht.app && reviewRequired(ht, p) {
			ht.tool.RequiresApproval = true
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func compactString(raw json.RawMessage) string {
	c, err := compactJSON(raw)
	if err != nil {
		return string(raw)
	}
	return string(c)
}

// compactJSON validates raw and returns its compact form.
func compactJSON(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
