// Command spinner is a test guest for runtime/wasm's compute watchdog and
// output bounds, written against the raw ABI (//go:wasmimport, no SDK).
// The last user message selects the mode:
//
//	config              call config() forever
//	progress            emit progress forever
//	sse:URL             stream URL and emit progress per event, waiting on
//	                    the network between events
//	flood:TOTAL:CHUNK   stream TOTAL bytes of text in CHUNK-byte emits, then
//	                    report them as the final text
package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unsafe"

	"adhost/abi"
)

func main() {}

//go:wasmimport llmhost input
func hostInput(buf, cap uint32) uint32

//go:wasmimport llmhost output
func hostOutput(ptr, n uint32)

//go:wasmimport llmhost config
func hostConfig(buf, cap uint32) uint32

//go:wasmimport llmhost emit
func hostEmit(kind int32, ptr, n uint32) int32

//go:wasmimport llmhost http_start
func httpStart(meta, metaLen, body, bodyLen uint32) int32

//go:wasmimport llmhost http_next_event
func httpNextEvent(h int32, buf, cap uint32) int64

//go:wasmimport llmhost http_close
func httpClose(h int32)

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

var spins int // keeps the loops observable

//go:wasmexport plugin_call
func call(op int32) int32 {
	switch abi.Op(op) {
	case abi.OpInfo:
		setOutput(abi.Info{ID: "spinner", Version: "1.0.0", Kind: abi.KindProvider})
		return 0
	case abi.OpComplete:
	default:
		return 1
	}
	raw := make([]byte, hostInput(0, 0))
	hostInput(ptr(raw), uint32(len(raw)))
	var in abi.CompleteInput
	if err := json.Unmarshal(raw, &in); err != nil || len(in.Messages) == 0 {
		return 1
	}
	cmd, arg, _ := strings.Cut(in.Messages[len(in.Messages)-1].Content, ":")
	switch cmd {
	case "config":
		for {
			spins += int(hostConfig(0, 0))
		}
	case "progress":
		for {
			spins += int(hostEmit(int32(abi.EmitProgress), 0, 0))
		}
	case "close":
		// A waiting host function that returns at once is no wait.
		for {
			httpClose(12345)
			spins++
		}
	case "badevent":
		for {
			spins += int(httpNextEvent(999, 0, 0))
		}
	case "sse":
		return stream(arg)
	case "flood":
		total, chunk := 0, 1
		if t, c, ok := strings.Cut(arg, ":"); ok {
			total, _ = strconv.Atoi(t)
			chunk, _ = strconv.Atoi(c)
		}
		buf := bytes.Repeat([]byte("x"), chunk)
		for sent := 0; sent < total; sent += chunk {
			b := buf[:min(chunk, total-sent)]
			if hostEmit(int32(abi.EmitText), ptr(b), uint32(len(b))) != 0 {
				return 2
			}
		}
		setOutput(abi.CompleteOutput{Text: strings.Repeat("x", total), FinishReason: "stop"})
		return 0
	}
	return 1
}

func stream(url string) int32 {
	meta, _ := json.Marshal(abi.HTTPRequest{Method: "GET", URL: url, Stream: true})
	h := httpStart(ptr(meta), uint32(len(meta)), 0, 0)
	if h < 0 {
		return 1
	}
	defer httpClose(h)
	buf := make([]byte, 256)
	events := 0
	for {
		r := httpNextEvent(h, ptr(buf), uint32(len(buf)))
		if r < 0 {
			return 1
		}
		n, eof := abi.UnpackEOF(r)
		if int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		if eof && n == 0 {
			break
		}
		events++
		hostEmit(int32(abi.EmitProgress), 0, 0)
	}
	setOutput(abi.CompleteOutput{Text: "", FinishReason: "stop"})
	_ = events
	return 0
}
