package runtime

import (
	"context"
	"encoding/json"

	"adhost/abi"
)

// Provider executes model turns for one provider instance (one extension,
// one account, its settings). runtime/wasm implements it; tests use fakes.
//
// Errors: a *protocol.Error is public and reaches the client as is (its
// message is already fixed and safe); anything else becomes INTERNAL_ERROR.
// A Provider must return promptly once ctx is done; the engine stops waiting
// for it at cancellation either way.
type Provider interface {
	// Complete runs one model turn. Streamed items go to sink while the turn
	// runs; the returned output is the whole turn.
	Complete(ctx context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error)
	// Inspect runs the read-only discovery probe. An extension without a
	// probe returns an output with code DISCOVERY_UNSUPPORTED.
	Inspect(ctx context.Context) (*abi.InspectOutput, error)
}

// TurnSink receives what a provider streams during one turn. Calls come from
// one goroutine at a time. After the run is cancelled, calls are ignored.
type TurnSink interface {
	// Text is a visible text delta (never empty).
	Text(delta string)
	// Progress reports real work (reasoning or tool-argument deltas).
	Progress()
	// Usage reports the turn's usage so far (last one wins; the turn's
	// output usage takes precedence).
	Usage(u abi.Usage)
}

// ToolSet runs the tools of one tool extension. runtime/wasm implements it.
type ToolSet interface {
	// Tools lists the tools the extension offers.
	Tools(ctx context.Context) ([]abi.ToolDef, error)
	// Invoke runs one call. progress reports real tool progress. The output
	// is any JSON value; the engine bounds and validates it.
	Invoke(ctx context.Context, call abi.ToolCall, progress func()) (json.RawMessage, error)
}

// ProviderInstance is a configured provider (host.toml [[providers]]) with
// its extension bound.
type ProviderInstance struct {
	ID        string
	Name      string
	Vendor    string
	AuthMode  string // "api-key" | "cli-session" | "none"
	AccountID string
	// Models is the execution allowlist. Nil: any explicit model id;
	// empty non-nil: no model allowed.
	Models []string
	// Capabilities are the extension manifest's boolean capabilities
	// (tools and textStreaming always present).
	Capabilities map[string]bool
	// InputMediaTypes are the non-text media types each model accepts
	// (host.toml inputMediaTypes, wire-context §1.2); a model without an
	// entry is text-only.
	InputMediaTypes map[string][]string
	// UsageSource is the manifest's usageSource.
	UsageSource string
	Provider    Provider
}

// Tool is a host tool: a name served by a tool extension.
type Tool struct {
	Def abi.ToolDef
	// RequiresApproval: the tool fails closed with APPROVAL_REQUIRED unless
	// an approval decision exists.
	RequiresApproval bool
	Set              ToolSet
}

// Principal is the authenticated caller: the subject and its grants.
type Principal struct {
	TokenID string
	Subject string
	// Providers and Tools are the granted instance ids and host tool names.
	Providers map[string]bool
	Tools     map[string]bool
	// Ops are the operation grants of the extension features, named
	// "feature.op" as in host.toml's [tokens.grants]: "jobs.submit",
	// "sessions.continue" (see Can). Absent: denied.
	Ops map[string]bool
	// ApproveTools are the tool names whose approvals the token may
	// decide (interactive-approvals, [tokens.grants] approve_tools).
	ApproveTools map[string]bool
	// ApplicationTools are the application tool names the token may
	// select and act as executor for (application_tools), each mapped to
	// whether its calls still need review: false only for a grant with
	// requires_approval = false (wire-extensions §5.2).
	ApplicationTools map[string]bool
	// CredentialDigest is the SHA-256 hex of the bearer token. Durable
	// records keep it to find the credential again (a job dispatched
	// after a restart re-resolves its grants); the bearer itself is
	// never stored.
	CredentialDigest string
}

// Can reports whether p holds the operation grant op ("jobs.read").
func (p *Principal) Can(op string) bool { return p.Ops[op] }
