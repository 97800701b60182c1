package sdk

import (
	"encoding/json"
	"sync/atomic"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// outputBuf and spareCall are reused across calls: a pooled instance
// serves many turns, one at a time, the host copies the output during
// Output, and a Call is valid only during its operation, so both are free
// again when the call returns. (In the sandbox an allocation costs about a
// microsecond.) Native tests may dispatch concurrently: whoever finds a
// slot empty allocates.
var (
	outputBuf atomic.Pointer[[]byte]
	spareCall atomic.Pointer[Call]
)

// maxKeptBuffer bounds a buffer kept for the next call: a one-off huge
// output should not pin its memory (wasm memory never shrinks, and the host
// recycles an instance past a high-water mark).
const maxKeptBuffer = 1 << 20

func takeBuf(slot *atomic.Pointer[[]byte], size int) *[]byte {
	if p := slot.Swap(nil); p != nil {
		return p
	}
	b := make([]byte, size)
	return &b
}

// keepBuf returns p to slot holding b, its buffer grown or not.
func keepBuf(slot *atomic.Pointer[[]byte], p *[]byte, b []byte) {
	if cap(b) <= maxKeptBuffer {
		*p = b[:cap(b)]
		slot.Store(p)
	}
}

// Dispatch runs one plugin_call: op's input is read from h, the matching
// method of p is called, and its result or error is written with h.Output.
// The wasm glue calls it for the registered plugin; sdktest calls it to run
// a plugin natively through exactly the same path.
//
// Input and result are decoded and encoded without reflection (see
// codec.go): in the sandbox, encoding/json cost far more than the turn.
// A panic in plugin code is not recovered (see the package doc).
func Dispatch(h Host, op abi.Op, p *Plugin) abi.Status {
	c := spareCall.Swap(nil)
	if c == nil {
		c = NewCall(h)
	} else {
		c.h = h
	}
	st := dispatch(c, op, p)
	c.finish()
	// Drop references to this call's data; keep the buffers.
	scratch, meta, head := c.scratch[:0], c.meta[:0], c.head[:0]
	if cap(scratch) > maxKeptBuffer {
		scratch = nil
	}
	if cap(meta) > maxKeptBuffer {
		meta = nil
	}
	if cap(head) > maxKeptBuffer {
		head = nil
	}
	header := c.header
	if len(header) > 64 {
		header = nil // a one-off large head: do not keep its table
	}
	*c = Call{scratch: scratch, meta: meta, head: head, header: header}
	spareCall.Store(c)
	return st
}

func dispatch(c *Call, op abi.Op, p *Plugin) abi.Status {
	switch op {
	case abi.OpInfo:
		if p.Info.ID == "" || p.Kind() == "" {
			return fail(c, CodeInternalError, "sdk: plugin has no info or nothing registered")
		}
		info := abi.Info{ID: p.Info.ID, Version: p.Info.Version, Kind: p.Kind()}
		return output(c, func(b []byte) ([]byte, error) { return appendInfo(b, &info), nil })

	case abi.OpComplete:
		if p.Provider == nil {
			return fail(c, CodeInternalError, "sdk: op complete on a module without a provider")
		}
		var in abi.CompleteInput
		if err := readInput(c, func(b []byte) error { return decodeCompleteInput(b, &in) }); err != nil {
			return fail(c, CodeInternalError, "sdk: decode complete input: "+err.Error())
		}
		out, err := p.Provider.Complete(c, &in)
		if err != nil {
			return failErr(c, err, CodeInternalError)
		}
		if out == nil {
			return fail(c, CodeInternalError, "sdk: Complete returned neither output nor error")
		}
		return output(c, func(b []byte) ([]byte, error) { return appendCompleteOutput(b, out) })

	case abi.OpInspect:
		insp, isInsp := p.Provider.(Inspector)
		if !isInsp {
			if p.Provider == nil {
				return fail(c, CodeInternalError, "sdk: op inspect on a module without a provider")
			}
			out := abi.InspectOutput{Code: InspectDiscoveryUnsupported}
			return output(c, func(b []byte) ([]byte, error) { return appendInspectOutput(b, &out), nil })
		}
		out, err := insp.Inspect(c)
		if err != nil {
			return failErr(c, err, CodeInternalError)
		}
		if out == nil {
			return fail(c, CodeInternalError, "sdk: Inspect returned neither output nor error")
		}
		return output(c, func(b []byte) ([]byte, error) { return appendInspectOutput(b, out), nil })

	case abi.OpToolList:
		if p.Tools == nil {
			return fail(c, CodeInternalError, "sdk: op tool_list on a module without tools")
		}
		list := abi.ToolList{Tools: p.Tools.List()}
		if list.Tools == nil {
			list.Tools = []abi.ToolDef{}
		}
		// Once per instance: encoding/json is fine here.
		return output(c, func(b []byte) ([]byte, error) {
			j, err := json.Marshal(list)
			return append(b, j...), err
		})

	case abi.OpToolInvoke:
		if p.Tools == nil {
			return fail(c, CodeInternalError, "sdk: op tool_invoke on a module without tools")
		}
		var in abi.ToolInvokeInput
		if err := readInput(c, func(b []byte) error { return decodeToolInvokeInput(b, &in) }); err != nil {
			return fail(c, CodeInternalError, "sdk: decode tool input: "+err.Error())
		}
		out, err := p.Tools.Invoke(c, &in)
		if err != nil {
			return failErr(c, err, CodeToolFailed)
		}
		if out == nil {
			out = json.RawMessage("null")
		}
		if !jsonscan.Valid(out) {
			return fail(c, CodeToolFailed, "sdk: tool output is not JSON")
		}
		return output(c, func(b []byte) ([]byte, error) { return appendToolInvokeOutput(b, out) })

	case abi.OpEmbed:
		if p.Embedder == nil {
			return fail(c, CodeInternalError, "sdk: op embed on a module without an embedder")
		}
		var in abi.EmbedInput
		// Embedding inputs are plain strings: encoding/json is fine here.
		if err := readInput(c, func(b []byte) error { return json.Unmarshal(b, &in) }); err != nil {
			return fail(c, CodeInternalError, "sdk: decode embed input: "+err.Error())
		}
		out, err := p.Embedder.Embed(c, &in)
		if err != nil {
			return failErr(c, err, CodeProviderFailed)
		}
		if out == nil {
			return fail(c, CodeInternalError, "sdk: Embed returned neither output nor error")
		}
		return output(c, func(b []byte) ([]byte, error) { return appendEmbedOutput(b, out) })
	}
	return fail(c, CodeInternalError, "sdk: unsupported op "+op.String())
}

// readInput reads the op's input into a buffer of its exact size, which
// the decoded value then owns (its strings and raw members are views of
// it), and decodes it with decode.
func readInput(c *Call, decode func([]byte) error) error {
	n := c.h.Input(nil) // the size; then one exact read
	if n <= 0 {
		return decode(nil)
	}
	return decode(fetch(c.h.Input, make([]byte, n)))
}

// output encodes the op's result with enc into a reused buffer and hands it
// to the host.
func output(c *Call, enc func([]byte) ([]byte, error)) abi.Status {
	p := takeBuf(&outputBuf, 4<<10)
	b, err := enc((*p)[:0])
	if err != nil {
		keepBuf(&outputBuf, p, b)
		return fail(c, CodeInternalError, "sdk: encode result: "+err.Error())
	}
	// A result past abi.MaxOutputBytes is left to the host, which reports it
	// as the invalid result it is (INVALID_PROVIDER_RESULT for a turn).
	c.h.Output(b)
	keepBuf(&outputBuf, p, b)
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
	p := takeBuf(&outputBuf, 4<<10)
	b := appendErrorOutput((*p)[:0], &e)
	c.h.Output(b)
	keepBuf(&outputBuf, p, b)
	return abi.StatusError
}
