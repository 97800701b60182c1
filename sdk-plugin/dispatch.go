package sdk

import (
	"encoding/json"
	"sync"

	"adhost/abi"
)

// inputBufs recycles input buffers across calls: a pooled instance serves
// many turns, and each turn's input (the whole conversation) can be large.
var inputBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// Dispatch runs one plugin_call: op's input is read from h, the matching
// method of p is called, and its result or error is written with h.Output.
// The wasm glue calls it for the registered plugin; sdktest calls it to run
// a plugin natively through exactly the same path.
//
// Input and result use encoding/json (once per call); streamed items do not.
// A panic in plugin code is not recovered (see the package doc).
func Dispatch(h Host, op abi.Op, p *Plugin) abi.Status {
	c := NewCall(h)
	defer c.finish()
	switch op {
	case abi.OpInfo:
		if p.Info.ID == "" || p.Kind() == "" {
			return fail(c, CodeInternalError, "sdk: plugin has no info or nothing registered")
		}
		return ok(c, abi.Info{ID: p.Info.ID, Version: p.Info.Version, Kind: p.Kind()})

	case abi.OpComplete:
		if p.Provider == nil {
			return fail(c, CodeInternalError, "sdk: op complete on a module without a provider")
		}
		var in abi.CompleteInput
		if err := readInput(c, &in); err != nil {
			return fail(c, CodeInternalError, "sdk: decode complete input: "+err.Error())
		}
		out, err := p.Provider.Complete(c, &in)
		if err != nil {
			return failErr(c, err, CodeInternalError)
		}
		if out == nil {
			return fail(c, CodeInternalError, "sdk: Complete returned neither output nor error")
		}
		return ok(c, out)

	case abi.OpInspect:
		insp, isInsp := p.Provider.(Inspector)
		if !isInsp {
			if p.Provider == nil {
				return fail(c, CodeInternalError, "sdk: op inspect on a module without a provider")
			}
			return ok(c, abi.InspectOutput{Code: InspectDiscoveryUnsupported})
		}
		out, err := insp.Inspect(c)
		if err != nil {
			return failErr(c, err, CodeInternalError)
		}
		if out == nil {
			return fail(c, CodeInternalError, "sdk: Inspect returned neither output nor error")
		}
		return ok(c, out)

	case abi.OpToolList:
		if p.Tools == nil {
			return fail(c, CodeInternalError, "sdk: op tool_list on a module without tools")
		}
		list := abi.ToolList{Tools: p.Tools.List()}
		if list.Tools == nil {
			list.Tools = []abi.ToolDef{}
		}
		return ok(c, list)

	case abi.OpToolInvoke:
		if p.Tools == nil {
			return fail(c, CodeInternalError, "sdk: op tool_invoke on a module without tools")
		}
		var in abi.ToolInvokeInput
		if err := readInput(c, &in); err != nil {
			return fail(c, CodeInternalError, "sdk: decode tool input: "+err.Error())
		}
		out, err := p.Tools.Invoke(c, &in)
		if err != nil {
			return failErr(c, err, CodeToolFailed)
		}
		if out == nil {
			out = json.RawMessage("null")
		}
		if !json.Valid(out) {
			return fail(c, CodeToolFailed, "sdk: tool output is not JSON")
		}
		return ok(c, abi.ToolInvokeOutput{Output: out})
	}
	return fail(c, CodeInternalError, "sdk: unsupported op "+op.String())
}

// readInput decodes the op's input into v using a pooled buffer.
// encoding/json copies what it keeps (json.RawMessage included), so the
// buffer goes back to the pool at once.
func readInput(c *Call, v any) error {
	bp := inputBufs.Get().(*[]byte)
	b := fetch(c.h.Input, *bp)
	err := json.Unmarshal(b, v)
	if cap(b) > cap(*bp) && cap(b) <= 1<<20 {
		*bp = b[:cap(b)] // keep a grown buffer unless it is huge
	}
	inputBufs.Put(bp)
	return err
}

func ok(c *Call, v any) abi.Status {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(c, CodeInternalError, "sdk: encode result: "+err.Error())
	}
	if len(b) > abi.MaxOutputBytes {
		return fail(c, CodeInternalError, "sdk: result exceeds abi.MaxOutputBytes")
	}
	c.h.Output(b)
	return abi.StatusOK
}

func fail(c *Call, code, msg string) abi.Status {
	return writeError(c, abi.ErrorOutput{Code: code, Message: msg})
}

func failErr(c *Call, err error, plain string) abi.Status {
	out, cancelled := errorOutput(c, err, plain)
	if cancelled {
		return abi.StatusCancelled
	}
	return writeError(c, out)
}

func writeError(c *Call, e abi.ErrorOutput) abi.Status {
	if len(e.Message) > 4096 {
		e.Message = e.Message[:4096] // private and for tests only: keep it small
	}
	b, err := json.Marshal(e)
	if err != nil {
		b = []byte(`{"code":"INTERNAL_ERROR"}`)
	}
	c.h.Output(b)
	return abi.StatusError
}
