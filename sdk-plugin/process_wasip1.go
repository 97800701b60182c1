//go:build wasip1

package sdk

import "unsafe"

// The process imports (abi.HostProc*). They are methods of wasmHost called
// only through ProcessHost, from Call.StartProcess and Process: a module
// that never starts a process does not link them, so it imports none.

//go:wasmimport llmhost proc_start
func hostProcStart(meta unsafe.Pointer, metaLen uint32, stdin unsafe.Pointer, stdinLen uint32) int32

//go:wasmimport llmhost proc_read_line
func hostProcReadLine(handle int32, buf unsafe.Pointer, capacity uint32) int64

//go:wasmimport llmhost proc_read
func hostProcRead(handle int32, buf unsafe.Pointer, capacity uint32) int64

//go:wasmimport llmhost proc_stderr
func hostProcStderr(handle int32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport llmhost proc_wait
func hostProcWait(handle int32) int32

//go:wasmimport llmhost proc_close
func hostProcClose(handle int32)

func (wasmHost) ProcStart(meta, stdin []byte) int32 {
	return hostProcStart(ptr(meta), uint32(len(meta)), ptr(stdin), uint32(len(stdin)))
}
func (wasmHost) ProcReadLine(h int32, buf []byte) int64 {
	return hostProcReadLine(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) ProcRead(h int32, buf []byte) int64 {
	return hostProcRead(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) ProcStderr(h int32, buf []byte) int32 {
	return hostProcStderr(h, ptr(buf), uint32(len(buf)))
}
func (wasmHost) ProcWait(h int32) int32 { return hostProcWait(h) }
func (wasmHost) ProcClose(h int32)      { hostProcClose(h) }
