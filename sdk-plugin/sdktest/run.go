package sdktest

import (
	"encoding/json"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// Result is the outcome of one operation run through the fake host.
type Result struct {
	// Status is what plugin_call returned.
	Status abi.Status
	// Error is the reported error when Status is abi.StatusError.
	Error *abi.ErrorOutput
	// Items are the streamed items in order, including dropped ones.
	Items []Item
	// Text is the concatenation of the accepted text deltas.
	Text string
	// Progress and ToolCallDeltas count the accepted progress items.
	Progress, ToolCallDeltas int
	// Usage is the last accepted EmitUsage, nil when none.
	Usage *abi.Usage
	// Logs and Requests are what the plugin logged and sent upstream.
	Logs     []LogLine
	Requests []Request
	// Host is the fake host of the call, for further inspection.
	Host *Host
}

// CompleteResult is Complete's outcome.
type CompleteResult struct {
	Result
	// Output is the turn's result when Status is abi.StatusOK.
	Output *abi.CompleteOutput
}

// Complete runs p.Complete natively through the SDK's dispatch (the path
// the wasm glue takes), with in encoded and decoded as the host would. It
// fails the test on what the host would refuse: a result it cannot decode
// strictly, or, for a streaming plugin, streamed text that differs from
// the result's text. A turn that streamed no text is not compared: the
// host then streams the result's text itself, as one delta.
func Complete(t testing.TB, p sdk.Provider, in *abi.CompleteInput, opts Options) *CompleteResult {
	t.Helper()
	h := NewHost(t, opts)
	st := run(t, h, abi.OpComplete, &sdk.Plugin{Info: sdk.Info{ID: "sdktest", Version: "0.0.0"}, Provider: p}, in)
	res := &CompleteResult{Result: h.result(t, st)}
	if st == abi.StatusOK {
		res.Output = new(abi.CompleteOutput)
		if err := decodeStrict(h.RawOutput(), res.Output); err != nil {
			t.Fatalf("sdktest: complete output %s: %v", h.RawOutput(), err)
		}
		if !opts.NoTextStreaming && res.Text != "" && res.Text != res.Output.Text {
			t.Errorf("sdktest: streamed text %q differs from the result's text %q", res.Text, res.Output.Text)
		}
	}
	return res
}

// InspectResult is Inspect's outcome.
type InspectResult struct {
	Result
	Output *abi.InspectOutput
}

// Inspect runs the provider's discovery probe (DISCOVERY_UNSUPPORTED when p
// does not implement sdk.Inspector).
func Inspect(t testing.TB, p sdk.Provider, opts Options) *InspectResult {
	t.Helper()
	h := NewHost(t, opts)
	st := run(t, h, abi.OpInspect, &sdk.Plugin{Info: sdk.Info{ID: "sdktest", Version: "0.0.0"}, Provider: p}, nil)
	res := &InspectResult{Result: h.result(t, st)}
	if st == abi.StatusOK {
		res.Output = new(abi.InspectOutput)
		if err := decodeStrict(h.RawOutput(), res.Output); err != nil {
			t.Fatalf("sdktest: inspect output %s: %v", h.RawOutput(), err)
		}
	}
	return res
}

// InvokeResult is Invoke's outcome.
type InvokeResult struct {
	Result
	// Output is the tool's output JSON when Status is abi.StatusOK.
	Output json.RawMessage
}

// Invoke runs one tool call of ts natively.
func Invoke(t testing.TB, ts sdk.ToolSet, in *abi.ToolInvokeInput, opts Options) *InvokeResult {
	t.Helper()
	h := NewHost(t, opts)
	st := run(t, h, abi.OpToolInvoke, &sdk.Plugin{Info: sdk.Info{ID: "sdktest", Version: "0.0.0"}, Tools: ts}, in)
	res := &InvokeResult{Result: h.result(t, st)}
	if st == abi.StatusOK {
		var out abi.ToolInvokeOutput
		if err := decodeStrict(h.RawOutput(), &out); err != nil {
			t.Fatalf("sdktest: tool output %s: %v", h.RawOutput(), err)
		}
		res.Output = out.Output
	}
	return res
}

// ListTools runs OpToolList and returns the definitions.
func ListTools(t testing.TB, ts sdk.ToolSet) []abi.ToolDef {
	t.Helper()
	h := NewHost(t, Options{})
	st := run(t, h, abi.OpToolList, &sdk.Plugin{Info: sdk.Info{ID: "sdktest", Version: "0.0.0"}, Tools: ts}, nil)
	if st != abi.StatusOK {
		t.Fatalf("sdktest: tool_list status %d: %s", st, h.RawOutput())
	}
	var out abi.ToolList
	if err := decodeStrict(h.RawOutput(), &out); err != nil {
		t.Fatalf("sdktest: tool_list output %s: %v", h.RawOutput(), err)
	}
	return out.Tools
}

// Info runs OpInfo on p (typically sdk.Registered(), to check a plugin's
// init against its manifest).
func Info(t testing.TB, p *sdk.Plugin) abi.Info {
	t.Helper()
	h := NewHost(t, Options{})
	if st := run(t, h, abi.OpInfo, p, nil); st != abi.StatusOK {
		t.Fatalf("sdktest: info status %d: %s", st, h.RawOutput())
	}
	var info abi.Info
	if err := decodeStrict(h.RawOutput(), &info); err != nil {
		t.Fatalf("sdktest: info output %s: %v", h.RawOutput(), err)
	}
	return info
}

// Dispatch runs one plugin_call of p on h with in (any JSON-encodable value,
// nil for ops without input) and returns the status; the output is
// h.RawOutput(). It is the building block of Complete and friends, for
// tests that drive several ops on one host.
func Dispatch(t testing.TB, h *Host, op abi.Op, p *sdk.Plugin, in any) abi.Status {
	t.Helper()
	return run(t, h, op, p, in)
}

func run(t testing.TB, h *Host, op abi.Op, p *sdk.Plugin, in any) abi.Status {
	t.Helper()
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("sdktest: encode input: %v", err)
		}
		h.SetInput(b)
	}
	st := sdk.Dispatch(h, op, p)
	if h.OpenHandles() != 0 {
		t.Errorf("sdktest: %d HTTP handles still open after the call", h.OpenHandles())
	}
	return st
}

func (h *Host) result(t testing.TB, st abi.Status) Result {
	t.Helper()
	r := Result{Status: st, Items: h.Items(), Text: h.Text(), Logs: h.Logs(), Requests: h.Requests(), Host: h}
	for _, it := range r.Items {
		if it.Dropped {
			continue
		}
		switch it.Kind {
		case abi.EmitProgress:
			r.Progress++
		case abi.EmitToolCallDelta:
			r.ToolCallDeltas++
		case abi.EmitUsage:
			r.Usage = it.Usage
		}
	}
	switch st {
	case abi.StatusOK:
	case abi.StatusError:
		r.Error = new(abi.ErrorOutput)
		if err := decodeStrict(h.RawOutput(), r.Error); err != nil || r.Error.Code == "" {
			t.Fatalf("sdktest: error output %s: %v", h.RawOutput(), err)
		}
	case abi.StatusCancelled:
	default:
		t.Fatalf("sdktest: unknown status %d", st)
	}
	return r
}
