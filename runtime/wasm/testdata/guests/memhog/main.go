// Command memhog is a test guest for runtime/wasm: a provider that, asked
// for "hog", allocates and touches 1 MiB at a time until the Go runtime is
// refused memory (its memory.grow returns -1 at the manifest's memoryMiB),
// which makes the runtime exit. Any other input answers with the number of
// MiB this instance holds, so a test can tell a fresh instance from the
// hog. It uses raw //go:wasmimport bindings, not the SDK.
package main

import (
	"bytes"
	"encoding/json"
	"strconv"
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

var hold [][]byte

//go:wasmexport plugin_call
func call(op int32) int32 {
	switch abi.Op(op) {
	case abi.OpInfo:
		setOutput(abi.Info{ID: "memhog", Version: "1.0.0", Kind: abi.KindProvider})
		return 0
	case abi.OpComplete:
		n := hostInput(0, 0)
		in := make([]byte, n)
		hostInput(ptr(in), n)
		if !bytes.Contains(in, []byte(`"content":"hog"`)) {
			setOutput(abi.CompleteOutput{Text: "held=" + strconv.Itoa(len(hold)), FinishReason: "stop"})
			return 0
		}
		hostEmit(int32(abi.EmitProgress), 0, 0)
		for {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // fresh pages cost the host nothing until touched
			}
			hold = append(hold, b)
		}
	}
	return 1
}
