package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/manifest"
	"adhost/runtime/protocol"
)

// InstanceConfig binds an extension to one provider instance or tool
// configuration (host.toml [[providers]] / [[tools]]).
type InstanceConfig struct {
	// ID names the instance in logs (the provider id).
	ID string
	// Settings is the instance's settings JSON object (nil: {}). It is
	// validated against the manifest's settings schema and handed to the
	// guest through the config host function; it must not hold secrets.
	Settings json.RawMessage
	// Secrets resolves the manifest's credential slots by name. The host
	// calls a resolver at request time and injects the value itself; the
	// guest never sees it. Keys must be declared slots.
	Secrets map[string]func(ctx context.Context) (string, error)
	// KV is the store of the kv namespace of a tool extension whose
	// manifest sets kv = true (kv.go); nil: its kv calls are denied.
	KV durable.KV
	// Process binds an extension whose manifest declares [process] to its
	// pinned binary and account directory (process.go); nil for others.
	Process *ProcessBinding
}

// binding is an extension bound to one InstanceConfig.
type binding struct {
	x      *Extension
	id     string
	config []byte
	net    *netPolicy
	proc   *procPolicy
	kv     *kvSpace
}

func (x *Extension) bind(ic InstanceConfig) (*binding, error) {
	wrap := func(err error) error {
		return fmt.Errorf("extension %s: instance %q: %w: %v", x.pin, ic.ID, ErrInstanceConfig, err)
	}
	if err := x.m.ValidateSettings(ic.Settings); err != nil {
		return nil, wrap(err)
	}
	cfg := []byte("{}")
	if len(bytes.TrimSpace(ic.Settings)) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, ic.Settings); err != nil {
			return nil, wrap(err)
		}
		cfg = buf.Bytes()
	}
	for name := range ic.Secrets {
		if !slices.ContainsFunc(x.m.Credentials, func(c manifest.Credential) bool { return c.Name == name }) {
			return nil, wrap(fmt.Errorf("secret %q is not a credential slot of the manifest", name))
		}
	}
	b := &binding{x: x, id: ic.ID, config: cfg}
	if x.m.KV && ic.KV != nil {
		b.kv = &kvSpace{store: ic.KV, ext: x.m.ID}
	}
	if ic.Process != nil || x.m.Process != nil {
		if ic.Process == nil {
			return nil, wrap(errors.New("the manifest declares [process] but no binary is bound"))
		}
		var err error
		if b.proc, err = newProcPolicy(x, ic.Process); err != nil {
			return nil, wrap(err)
		}
	}
	if x.m.HasNetwork() {
		ep, err := ResolveEndpoint(x.m, ic.Settings)
		if err != nil {
			return nil, wrap(err)
		}
		if b.net, err = newNetPolicy(x, ep, ic.Secrets); err != nil {
			return nil, wrap(err)
		}
		origins, err := ResolveAllowOrigins(x.m, ic.Settings)
		if err != nil {
			return nil, wrap(err)
		}
		b.net.allowOperatorOrigins(origins)
	}
	return b, nil
}

// Provider binds a provider extension to one provider instance. The
// settings are validated here, once; the returned Provider is safe for
// concurrent use.
func (x *Extension) Provider(ic InstanceConfig) (runtime.Provider, error) {
	if x.m.Kind != abi.KindProvider {
		return nil, fmt.Errorf("extension %s: %w: kind is %s, not provider", x.pin, ErrKindMismatch, x.m.Kind)
	}
	b, err := x.bind(ic)
	if err != nil {
		return nil, err
	}
	return &provider{b}, nil
}

// ToolSet binds a tool extension to a configuration. The tool list is
// fetched once and cached.
func (x *Extension) ToolSet(ic InstanceConfig) (runtime.ToolSet, error) {
	if x.m.Kind != abi.KindTool {
		return nil, fmt.Errorf("extension %s: %w: kind is %s, not tool", x.pin, ErrKindMismatch, x.m.Kind)
	}
	b, err := x.bind(ic)
	if err != nil {
		return nil, err
	}
	return &toolSet{binding: b}, nil
}

// call runs one op on a pooled instance and maps every failure to a public
// error. invalid is the code for a result that breaks the contract.
//
// The failure paths live in separate functions: their logging would make
// this frame large, and a call runs the guest on top of it — a small frame
// keeps the run goroutine within its initial stack.
func (b *binding) call(ctx context.Context, cs *callState, invalid protocol.Code) ([]byte, error) {
	x := b.x
	cs.config, cs.net, cs.procPol = b.config, b.net, b.proc
	if ctx.Err() != nil {
		return nil, protocol.Wrap(protocol.CodeCancelled, context.Cause(ctx))
	}
	inst, l, err := x.pool.acquire(ctx)
	if err != nil {
		err = b.acquireFailed(ctx, cs, err)
		observeCall(x, cs.op, err)
		return nil, err
	}
	res := x.invoke(ctx, inst, cs)
	x.pool.release(ctx, inst, l, res.discard)
	if !res.cancelled && !res.watchdog && res.err == nil && cs.violation == "" && res.status == abi.StatusOK && !cs.binaryRefused {
		observeCall(x, cs.op, nil)
		return res.output, nil
	}
	err = b.callFailed(ctx, cs, &res, invalid)
	observeCall(x, cs.op, err)
	return nil, err
}

//go:noinline
func (b *binding) acquireFailed(ctx context.Context, cs *callState, err error) error {
	x := b.x
	switch {
	case ctx.Err() != nil:
		return protocol.Wrap(protocol.CodeCancelled, context.Cause(ctx))
	case errors.Is(err, ErrClosed):
		return protocol.Wrap(protocol.CodeProviderExtensionUnavail, fmt.Errorf("extension %s: %w", x.pin, err))
	case errors.Is(err, ErrBusy):
		// Only a call without an admission reservation (a discovery
		// probe, a direct caller) can meet a full cap.
		return protocol.Wrap(protocol.CodeBusy, fmt.Errorf("extension %s: %w", x.pin, err))
	}
	x.log.Error("extension instance unavailable", "instance", b.id, "op", cs.op.String(), "err", err)
	return protocol.Wrap(protocol.CodeInternalError, fmt.Errorf("extension %s: %w", x.pin, err))
}

// callFailed classifies a call that did not return an ok result. Guest
// faults are the extension's failures with codes of their own (see fault);
// only a failure of the host itself is INTERNAL_ERROR. The operator's log
// gets the precise cause, the client a message naming the class.
//
//go:noinline
func (b *binding) callFailed(ctx context.Context, cs *callState, res *callResult, invalid protocol.Code) error {
	x := b.x
	cause := func(err error) error { return fmt.Errorf("extension %s: op %s: %w", x.pin, cs.op, err) }
	switch {
	case res.cancelled:
		return protocol.Wrap(protocol.CodeCancelled, context.Cause(ctx))
	case cs.violation != "":
		// The first breach of the contract is the cause, however the
		// call then ended (a trap on it, the watchdog, a bad status).
		x.log.Warn("extension broke the ABI contract", "instance", b.id, "op", cs.op.String(), "reason", cs.violation)
		return protocol.Wrap(invalid, cause(errors.New(cs.violation)))
	case res.fault == faultInvalid:
		x.log.Warn("extension exceeded an ABI limit", "instance", b.id, "op", cs.op.String(), "err", res.err)
		return protocol.Wrap(invalid, cause(res.err))
	case res.fault == faultCompute:
		x.log.Warn("extension stopped by the compute watchdog", "instance", b.id, "op", cs.op.String(), "limit", x.computeLimit)
		return faultError(x.m.Kind, res.fault, cause(res.err))
	case res.fault == faultTurn:
		x.log.Warn("extension stopped at its turn timeout", "instance", b.id, "op", cs.op.String(), "limit", x.opts.TurnTimeout)
		return faultError(x.m.Kind, res.fault, cause(res.err))
	case res.fault != faultNone:
		x.log.Warn("extension call failed", "instance", b.id, "op", cs.op.String(), "class", res.fault.String(), "err", res.err)
		return faultError(x.m.Kind, res.fault, cause(res.err))
	case errors.Is(res.err, ErrClosed):
		return protocol.Wrap(protocol.CodeProviderExtensionUnavail, cause(res.err))
	case res.err != nil:
		x.log.Error("extension call failed in the host", "instance", b.id, "op", cs.op.String(), "err", res.err)
		return protocol.Wrap(protocol.CodeInternalError, cause(res.err))
	}
	if cs.binaryRefused {
		// The pinned binary changed or vanished since it was verified:
		// the operator's fix, whatever the guest made of the refusal.
		return protocol.Wrap(protocol.CodeProviderExtensionUnavail, fmt.Errorf("extension %s: op %s: the pinned binary was refused", x.pin, cs.op))
	}
	if cs.noCredential && res.status == abi.StatusError {
		// Whatever the guest made of the refused request, the cause is
		// the host's missing credential (wire-core §7.2 AUTH_REQUIRED).
		return protocol.Wrap(protocol.CodeAuthRequired, fmt.Errorf("extension %s: op %s: a credential is not available", x.pin, cs.op))
	}
	switch res.status {
	case abi.StatusCancelled:
		return protocol.Wrap(protocol.CodeCancelled, fmt.Errorf("extension %s: op %s: guest reported cancellation", x.pin, cs.op))
	case abi.StatusError:
		return b.guestError(cs.op, res.output, invalid)
	}
	x.log.Warn("extension returned an unknown status", "instance", b.id, "op", cs.op.String(), "status", int32(res.status))
	return protocol.Wrap(invalid, cause(fmt.Errorf("unknown status %d", int32(res.status))))
}

// passCodes are the codes a guest may report (wire-core §7.2 provider and
// tool codes). Each gets the host's fixed public message.
var passCodes = map[protocol.Code]bool{
	protocol.CodeRateLimited:             true,
	protocol.CodeProviderAuth:            true,
	protocol.CodeProviderError:           true,
	protocol.CodeProviderUnreachable:     true,
	protocol.CodeProviderFailed:          true,
	protocol.CodeProviderRefusal:         true,
	protocol.CodeTruncatedToolCall:       true,
	protocol.CodeInvalidProviderResponse: true,
	protocol.CodeResponseTooLarge:        true,
	protocol.CodeIncompleteStream:        true,
	protocol.CodeAuthRequired:            true,
	protocol.CodeToolFailed:              true,
	protocol.CodeTimeout:                 true,
	// A file type the vendor API cannot take (wire-context §7).
	"UNSUPPORTED_MODALITY": true,
}

// guestError maps an ErrorOutput to a public error. The guest's message is
// neither returned nor logged. An error output that does not decode, or
// carries a code the guest may not raise, breaks the result contract
// (invalid).
func (b *binding) guestError(op abi.Op, out []byte, invalid protocol.Code) error {
	var eo abi.ErrorOutput
	if err := decodeStrict(out, &eo); err != nil {
		b.x.log.Warn("extension returned an invalid error output", "instance", b.id, "op", op.String())
		return protocol.Wrap(invalid, fmt.Errorf("extension %s: op %s: invalid error output", b.x.pin, op))
	}
	code := protocol.Code(eo.Code)
	if !passCodes[code] {
		b.x.log.Warn("extension returned a code it may not raise", "instance", b.id, "op", op.String(), "code", fmt.Sprintf("%.64q", eo.Code))
		return protocol.Wrap(invalid, fmt.Errorf("extension %s: op %s: code %.64q not allowed", b.x.pin, op, eo.Code))
	}
	e := protocol.New(code)
	if code == protocol.CodeProviderError {
		e.Retryable = eo.Status >= 500
	}
	if code == protocol.CodeRateLimited && eo.RetryAfterMs > 0 {
		e.RetryAfter = time.Duration(min(eo.RetryAfterMs, maxRetryAfterMs)) * time.Millisecond
	}
	e.Err = fmt.Errorf("extension %s: op %s: %s (upstream status %d, retry after %d ms)", b.x.pin, op, code, eo.Status, eo.RetryAfterMs)
	return e
}

// maxRetryAfterMs bounds a guest's Retry-After hint (a day): the engine
// gives up on waits past the run's maxDelayMs anyway.
const maxRetryAfterMs = 24 * 60 * 60 * 1000

type provider struct{ *binding }

var _ runtime.Provider = (*provider)(nil)

// maxToolCalls bounds the tool calls of one turn (wire-extensions §10.3).
const maxToolCalls = 32

func (p *provider) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	buf := inputBufs.Get().(*[]byte)
	input, err := appendCompleteInput((*buf)[:0], in)
	if err != nil {
		inputBufs.Put(buf)
		return nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	if sink == nil {
		sink = discardSink{}
	}
	cs := &callState{op: abi.OpComplete, input: input, sink: sink}
	cs.streamedHash.SetSeed(hashSeed)
	out, err := p.call(ctx, cs, protocol.CodeInvalidProviderResult)
	// The guest copied its input during the call; the buffer is free again.
	cs.input = nil
	if cap(input) <= maxPooledInput {
		*buf = input[:0]
		inputBufs.Put(buf)
	}
	if err != nil {
		return nil, err
	}
	var co abi.CompleteOutput
	if err := decodeCompleteOutput(out, &co); err != nil {
		return nil, p.invalid(cs.op, "output does not decode as CompleteOutput")
	}
	if reason := p.checkComplete(&co, cs); reason != "" {
		return nil, p.invalid(cs.op, reason)
	}
	return &co, nil
}

var hashSeed = maphash.MakeSeed()

// inputBufs recycles the encoded complete inputs: one is built per model
// turn and is dead once the call returned (the guest copies its input with
// the input host function during the call). Buffers larger than
// maxPooledInput are left to the garbage collector.
var inputBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledInput = 64 << 10

type discardSink struct{}

func (discardSink) Text(string)     {}
func (discardSink) Progress()       {}
func (discardSink) Usage(abi.Usage) {}

func (p *provider) invalid(op abi.Op, reason string) error {
	p.x.log.Warn("extension returned an invalid result", "instance", p.id, "op", op.String(), "reason", firstLine(reason))
	return protocol.Wrap(protocol.CodeInvalidProviderResult, fmt.Errorf("extension %s: op %s: %s", p.x.pin, op, firstLine(reason)))
}

// checkComplete enforces the result shape of wire-extensions §10.3 that
// the JSON decoder cannot: finish reasons, tool-call bounds, declared
// capabilities, and streamed text equal to the final text.
func (p *provider) checkComplete(co *abi.CompleteOutput, cs *callState) string {
	switch co.FinishReason {
	case "", "stop", "length":
	default:
		return "unknown finishReason"
	}
	if len(co.ToolCalls) > 0 && !p.x.m.Capability("tools") {
		return "tool calls without the tools capability"
	}
	if len(co.ToolCalls) > maxToolCalls {
		return "more than 32 tool calls"
	}
	for _, tc := range co.ToolCalls {
		if len(tc.ID) < 1 || len(tc.ID) > 256 {
			return "tool call id must be 1..256 bytes"
		}
		if tc.Name == "" || len(tc.Name) > 256 {
			return "tool call without a valid name"
		}
		a := bytes.TrimSpace(tc.Arguments)
		if len(a) == 0 || a[0] != '{' || !json.Valid(a) {
			return "tool call arguments are not a JSON object"
		}
	}
	if co.Usage != nil && !validUsage(co.Usage) {
		return "negative usage"
	}
	if cs.streamed > 0 {
		var h maphash.Hash
		h.SetSeed(hashSeed)
		h.WriteString(co.Text)
		if len(co.Text) != cs.streamed || h.Sum64() != cs.streamedHash.Sum64() {
			return "streamed text differs from the final text"
		}
	}
	return ""
}

// Inspect runs the discovery probe. An extension whose manifest does not
// declare inspect answers DISCOVERY_UNSUPPORTED without running guest code;
// a probe result that fails validation is INVALID_DISCOVERY_RESPONSE.
func (p *provider) Inspect(ctx context.Context) (*abi.InspectOutput, error) {
	if !p.x.m.Inspect {
		return &abi.InspectOutput{Code: "DISCOVERY_UNSUPPORTED"}, nil
	}
	cs := &callState{op: abi.OpInspect}
	out, err := p.call(ctx, cs, protocol.CodeInvalidProviderResult)
	if err != nil {
		return nil, err
	}
	var io abi.InspectOutput
	if err := decodeStrict(out, &io); err != nil || !inspectCodes[io.Code] || len(io.Models) > 1000 {
		p.x.log.Warn("extension returned an invalid inspect result", "instance", p.id)
		return &abi.InspectOutput{Code: "INVALID_DISCOVERY_RESPONSE"}, nil
	}
	if cs.noCredential && io.Code != "CATALOG_AVAILABLE" {
		// The probe could not authenticate because the host has no
		// credential to inject: unauthenticated, not unreachable.
		return &abi.InspectOutput{Code: "AUTH_REQUIRED"}, nil
	}
	return &io, nil
}

// inspectCodes are the fixed inspection codes of wire-extensions §7.
var inspectCodes = map[string]bool{
	"CATALOG_AVAILABLE": true, "AUTH_REQUIRED": true, "AUTH_REJECTED": true, "CLI_AUTH_REQUIRED": true,
	"RATE_LIMITED": true, "PROVIDER_UNREACHABLE": true, "INVALID_DISCOVERY_RESPONSE": true,
	"CLI_UNAVAILABLE": true, "DISCOVERY_TIMEOUT": true, "DISCOVERY_FAILED": true,
	"ACCESS_DENIED": true, "DISCOVERY_UNSUPPORTED": true, "CLI_UPGRADE_REQUIRED": true,
	"CLI_SESSION_PRESENT": true, "CLI_CATALOG_AVAILABLE": true, "CLI_STATUS_UNKNOWN": true,
}

type toolSet struct {
	*binding
	mu    sync.Mutex
	tools []abi.ToolDef
}

var _ runtime.ToolSet = (*toolSet)(nil)

func (t *toolSet) Tools(ctx context.Context) ([]abi.ToolDef, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tools != nil {
		return slices.Clone(t.tools), nil
	}
	if defs := t.x.m.ToolDefs(); len(defs) > 0 {
		// Declared in the manifest: the pinned definitions are the
		// tools, whatever the guest would list at run time.
		t.tools = defs
		return slices.Clone(t.tools), nil
	}
	out, err := t.call(ctx, &callState{op: abi.OpToolList}, protocol.CodeToolFailed)
	if err != nil {
		return nil, err
	}
	var tl abi.ToolList
	if err := decodeStrict(out, &tl); err != nil {
		return nil, t.invalidTool(abi.OpToolList, "tool list does not decode")
	}
	seen := map[string]bool{}
	for _, d := range tl.Tools {
		s := bytes.TrimSpace(d.InputSchema)
		if d.Name == "" || len(d.Name) > 128 || seen[d.Name] || len(s) == 0 || s[0] != '{' || !json.Valid(s) {
			return nil, t.invalidTool(abi.OpToolList, "invalid tool definition")
		}
		seen[d.Name] = true
	}
	if tl.Tools == nil {
		tl.Tools = []abi.ToolDef{}
	}
	t.tools = tl.Tools
	return slices.Clone(t.tools), nil
}

func (t *toolSet) Invoke(ctx context.Context, call abi.ToolCall, progress func()) (json.RawMessage, error) {
	input, err := json.Marshal(abi.ToolInvokeInput{CallID: call.ID, Name: call.Name, Arguments: call.Arguments})
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	cs := &callState{op: abi.OpToolInvoke, input: input, onProg: progress, kv: t.kv, subject: runtime.ToolSubject(ctx)}
	out, err := t.call(ctx, cs, protocol.CodeToolFailed)
	if err != nil {
		return nil, err
	}
	var to abi.ToolInvokeOutput
	if err := decodeStrict(out, &to); err != nil || len(bytes.TrimSpace(to.Output)) == 0 || !json.Valid(to.Output) {
		return nil, t.invalidTool(abi.OpToolInvoke, "tool output is not a JSON value")
	}
	return to.Output, nil
}

func (t *toolSet) invalidTool(op abi.Op, reason string) error {
	t.x.log.Warn("extension returned an invalid result", "instance", t.id, "op", op.String(), "reason", reason)
	return protocol.Wrap(protocol.CodeToolFailed, fmt.Errorf("extension %s: op %s: %s", t.x.pin, op, reason))
}
