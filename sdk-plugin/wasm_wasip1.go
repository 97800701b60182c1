//go:build wasip1

package sdk

import (
	"unsafe"

	"adhost/abi"
)

// The guest side of ABI v1: the exports the host calls and the llmhost
// imports it provides. Signatures must match abi's documentation exactly;
// the host checks them at load.

//go:wasmexport plugin_abi_v1
func pluginABIV1() {}

//go:wasmexport plugin_call
func pluginCall(op int32) int32 {
	return int32(Dispatch(wasmHost{}, abi.Op(op), &registered))
}

//go:wasmimport llmhost input
func hostInput(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport llmhost output
func hostOutput(ptr unsafe.Pointer, n uint32)

//go:wasmimport llmhost config
func hostConfig(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport llmhost emit
func hostEmit(kind int32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport llmhost http_start
func hostHTTPStart(meta unsafe.Pointer, metaLen uint32, body unsafe.Pointer, bodyLen uint32) int32

//go:wasmimport llmhost http_head
func hostHTTPHead(handle int32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport llmhost http_read
func hostHTTPRead(handle int32, buf unsafe.Pointer, capacity uint32) int64

//go:wasmimport llmhost http_next_event
func hostHTTPNextEvent(handle int32, buf unsafe.Pointer, capacity uint32) int64

//go:wasmimport llmhost http_close
func hostHTTPClose(handle int32)

//go:wasmimport llmhost cancelled
func hostCancelled() int32

//go:wasmimport llmhost log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport llmhost log_enabled
func hostLogEnabled(level int32) int32

// ptr returns the address of b's first byte, or nil for an empty slice
// (the host accepts any pointer with a zero length).
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// wasmHost calls the imported host functions. Go's wasm GC does not move
// objects, and each pointer is a live argument for the duration of the
// call, so passing slice addresses is safe.
type wasmHost struct{}

func (wasmHost) Input(buf []byte) int32  { return hostInput(ptr(buf), uint32(len(buf))) }
func (wasmHost) Output(p []byte)         { hostOutput(ptr(p), uint32(len(p))) }
func (wasmHost) Config(buf []byte) int32 { return hostConfig(ptr(buf), uint32(len(buf))) }
func (wasmHost) Emit(kind abi.EmitKind, p []byte) bool {
	return hostEmit(int32(kind), ptr(p), uint32(len(p))) == 1
}
func (wasmHost) HTTPStart(meta, body []byte) int32 {
	return hostHTTPStart(ptr(meta), uint32(len(meta)), ptr(body), uint32(len(body)))
}
func (wasmHost) HTTPHead(h int32, buf []byte) int32 {
	return hostHTTPHead(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) HTTPRead(h int32, buf []byte) int64 {
	return hostHTTPRead(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) HTTPNextEvent(h int32, buf []byte) int64 {
	return hostHTTPNextEvent(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) HTTPClose(h int32) { hostHTTPClose(h) }
func (wasmHost) Cancelled() bool   { return hostCancelled() == 1 }
func (wasmHost) Log(level abi.LogLevel, msg []byte) {
	hostLog(int32(level), ptr(msg), uint32(len(msg)))
}
func (wasmHost) LogEnabled(level abi.LogLevel) bool { return hostLogEnabled(int32(level)) == 1 }
