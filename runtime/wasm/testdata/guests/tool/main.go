// Command tool is a test guest for runtime/wasm: a tool extension.
package main

import (
	"encoding/json"
	"unsafe"

	"adhost/abi"
)

func main() {}

//go:wasmimport llmhost input
func hostInput(buf, cap uint32) uint32

//go:wasmimport llmhost output
func hostOutput(ptr, n uint32)

//go:wasmimport llmhost emit
func hostEmit(kind int32, ptr, n uint32) int32

//go:wasmexport plugin_abi_v1
func marker() {}

func ptr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func setOutput(v any) {
	b, _ := json.Marshal(v)
	hostOutput(ptr(b), uint32(len(b)))
}

//go:wasmexport plugin_call
func call(op int32) int32 {
	switch abi.Op(op) {
	case abi.OpInfo:
		setOutput(abi.Info{ID: "tooltest", Version: "0.2.0", Kind: abi.KindTool})
		return 0
	case abi.OpToolList:
		setOutput(abi.ToolList{Tools: []abi.ToolDef{{Name: "lookup", Description: "Look up a receipt.", InputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}}}`)}}})
		return 0
	case abi.OpToolInvoke:
		n := hostInput(0, 0)
		b := make([]byte, n)
		hostInput(ptr(b), n)
		var in abi.ToolInvokeInput
		json.Unmarshal(b, &in)
		var args struct{ Value int }
		json.Unmarshal(in.Arguments, &args)
		if args.Value < 0 {
			setOutput(abi.ErrorOutput{Code: "TOOL_FAILED", Message: "negative"})
			return 1
		}
		hostEmit(int32(abi.EmitProgress), 0, 0)
		out, _ := json.Marshal(map[string]int{"receipt": args.Value})
		setOutput(abi.ToolInvokeOutput{Output: out})
		return 0
	}
	return 1
}
