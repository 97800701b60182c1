package sdk

import (
	"encoding/json"

	"adhost/abi"
)

// Provider runs model turns. Complete is called once per turn (abi.OpComplete)
// and must stream visible text through c.EmitText as it arrives when the
// manifest declares textStreaming: the host checks that the streamed text
// equals the returned Text exactly.
//
// Returning an *Error reports that error; returning ErrCancelled (or any
// error once the call is cancelled) reports cancellation; any other error is
// reported as INTERNAL_ERROR.
type Provider interface {
	Complete(c *Call, in *abi.CompleteInput) (*abi.CompleteOutput, error)
}

// Inspector is implemented by a Provider that has a discovery probe
// (abi.OpInspect): a read-only check that never generates. A provider
// without it answers DISCOVERY_UNSUPPORTED.
type Inspector interface {
	Inspect(c *Call) (*abi.InspectOutput, error)
}

// ToolSet is a tool extension. List is called once per instance
// (abi.OpToolList); Invoke once per tool call (abi.OpToolInvoke) and returns
// the tool's output, any JSON value. A plain error from Invoke is reported as
// TOOL_FAILED.
type ToolSet interface {
	List() []abi.ToolDef
	Invoke(c *Call, in *abi.ToolInvokeInput) (json.RawMessage, error)
}

// Embedder is an embedding extension (abi.OpEmbed): Embed returns one
// vector per input, in order, for the model the host names (the corpus's
// model in host.toml). The host checks the count, the dimensions and that
// every vector is finite and non-zero, and normalises them itself. A plain
// error is reported as PROVIDER_FAILED.
type Embedder interface {
	Embed(c *Call, in *abi.EmbedInput) (*abi.EmbedOutput, error)
}

// Info names the plugin for abi.OpInfo. The host compares ID and Version with
// the pin in host.toml and the embedded manifest, so they must equal the
// manifest's id and version.
type Info struct {
	ID      string
	Version string
}

// Plugin is what Dispatch serves: the info and one registered value. The
// wasm glue serves the value filled by SetInfo, RegisterProvider and
// RegisterTools; tests build their own.
type Plugin struct {
	Info     Info
	Provider Provider
	Tools    ToolSet
	Embedder Embedder
}

// Kind returns the extension kind the plugin provides ("" when nothing is
// registered).
func (p *Plugin) Kind() abi.Kind {
	switch {
	case p.Provider != nil:
		return abi.KindProvider
	case p.Tools != nil:
		return abi.KindTool
	case p.Embedder != nil:
		return abi.KindEmbedder
	}
	return ""
}

// registered is the process's plugin, filled from init functions. An
// instance serves one call at a time and init runs before any call, so it
// needs no lock.
var registered Plugin

// SetInfo sets the plugin's id and version (see Info). Call it from init.
func SetInfo(id, version string) {
	registered.Info = Info{ID: id, Version: version}
}

// RegisterProvider makes p the module's provider. Call it from init. A
// module provides one thing: registering a second provider or tool set
// panics, which fails the module at load.
func RegisterProvider(p Provider) {
	if p == nil || registered.Kind() != "" {
		panic("sdk: RegisterProvider: nil provider or a second registration")
	}
	registered.Provider = p
}

// RegisterTools makes t the module's tool set. Call it from init; the same
// one-registration rule as RegisterProvider applies.
func RegisterTools(t ToolSet) {
	if t == nil || registered.Kind() != "" {
		panic("sdk: RegisterTools: nil tool set or a second registration")
	}
	registered.Tools = t
}

// RegisterEmbedder makes e the module's embedder. Call it from init; the
// same one-registration rule as RegisterProvider applies.
func RegisterEmbedder(e Embedder) {
	if e == nil || registered.Kind() != "" {
		panic("sdk: RegisterEmbedder: nil embedder or a second registration")
	}
	registered.Embedder = e
}

// Registered returns the plugin registered by SetInfo, RegisterProvider and
// RegisterTools. A plugin's tests use it to check their init.
func Registered() *Plugin { return &registered }
