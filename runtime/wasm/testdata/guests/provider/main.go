// Command provider is a test guest for runtime/wasm: a provider that is
// well-behaved for ordinary input and hostile on request. The last user
// message selects the behaviour (see complete). It uses raw
// //go:wasmexport and //go:wasmimport against the abi names, not the SDK.
package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"
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

//go:wasmimport llmhost cancelled
func hostCancelled() int32

//go:wasmimport llmhost log
func hostLog(level int32, ptr, n uint32)

//go:wasmimport llmhost http_start
func httpStart(meta, metaLen, body, bodyLen uint32) int32

//go:wasmimport llmhost http_head
func httpHead(h int32, buf, cap uint32) int32

//go:wasmimport llmhost http_read
func httpRead(h int32, buf, cap uint32) int64

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

func pull(f func(buf, cap uint32) uint32) []byte {
	n := f(0, 0)
	b := make([]byte, n)
	if n > 0 {
		f(ptr(b), n)
	}
	return b
}

func setOutput(v any) {
	b, _ := json.Marshal(v)
	hostOutput(ptr(b), uint32(len(b)))
}

func emit(kind abi.EmitKind, s string) int32 {
	b := []byte(s)
	return hostEmit(int32(kind), ptr(b), uint32(len(b)))
}

var sink []byte // keeps allocations alive
var noopOut = []byte(`{"text":"","finishReason":"stop"}`)

var hold [][]byte // memory growth
var spin int

//go:wasmexport plugin_call
func call(op int32) int32 {
	switch abi.Op(op) {
	case abi.OpInfo:
		setOutput(abi.Info{ID: "hostile", Version: "1.0.0", Kind: abi.KindProvider})
		return 0
	case abi.OpInspect:
		setOutput(abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{"m1"}, Complete: true})
		return 0
	case abi.OpComplete:
		raw := pull(hostInput)
		if bytes.Contains(raw, []byte(`"content":"noop`)) {
			// Benchmark fast path: measure the host's per-call cost, not
			// the guest's JSON decoder.
			hostOutput(ptr(noopOut), uint32(len(noopOut)))
			return 0
		}
		var in abi.CompleteInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return 1
		}
		msg := ""
		if len(in.Messages) > 0 {
			msg = in.Messages[len(in.Messages)-1].Content
		}
		return complete(msg)
	}
	return 1
}

func text(s string) int32 {
	setOutput(abi.CompleteOutput{Text: s, FinishReason: "stop"})
	return 0
}

func complete(msg string) int32 {
	cmd, arg, _ := strings.Cut(msg, ":")
	switch cmd {
	case "deltas":
		n, _ := strconv.Atoi(arg)
		for i := 0; i < n; i++ {
			if emit(abi.EmitText, "x") == 1 {
				return 2
			}
		}
		return text(strings.Repeat("x", n))
	case "stream":
		if emit(abi.EmitText, arg) == 1 {
			return 2
		}
		return text(arg)
	case "loop":
		emit(abi.EmitProgress, "")
		for {
			spin++
		}
	case "memory":
		for {
			hold = append(hold, make([]byte, 1<<20))
		}
	case "grow":
		n, _ := strconv.Atoi(arg)
		for i := 0; i < n; i++ {
			hold = append(hold, make([]byte, 1<<20))
		}
		return text("grew")
	case "bigoutput":
		big := make([]byte, 50<<20)
		hostOutput(ptr(big), uint32(len(big)))
		return 0
	case "bigemit":
		big := make([]byte, 2<<20)
		hostEmit(int32(abi.EmitText), ptr(big), uint32(len(big)))
		return text("")
	case "emit-after-cancel":
		emit(abi.EmitProgress, "")
		for emit(abi.EmitText, "before") == 0 {
			time.Sleep(time.Millisecond)
		}
		// Cancelled: try to keep streaming anyway.
		for i := 0; i < 100; i++ {
			emit(abi.EmitText, "after")
		}
		setOutput(abi.CompleteOutput{Text: "after"})
		return 0
	case "wait-cancel":
		emit(abi.EmitProgress, "")
		for hostCancelled() == 0 {
			time.Sleep(time.Millisecond)
		}
		return 2
	case "sleep":
		emit(abi.EmitProgress, "")
		time.Sleep(time.Hour)
		return text("woke")
	case "panic":
		panic("boom private-marker")
	case "exit":
		os.Exit(3)
	case "env":
		_, ferr := os.ReadFile("/etc/passwd")
		_, derr := os.ReadDir("/")
		wd, _ := os.Getwd()
		return text("env=" + strings.Join(os.Environ(), ",") + " args=" + strconv.Itoa(len(os.Args)) +
			" file=" + strconv.FormatBool(ferr != nil) + " dir=" + strconv.FormatBool(derr != nil) + " wd=" + wd)
	case "config":
		return text("config=" + string(pull(hostConfig)) + " input=" + string(pull(hostInput)))
	case "error":
		code, status, _ := strings.Cut(arg, ":")
		st, _ := strconv.Atoi(status)
		setOutput(abi.ErrorOutput{Code: code, Message: "private-marker upstream body", Status: st, Retryable: true})
		return 1
	case "badresult":
		b := []byte(`{"text":"x","bogus":1}`)
		hostOutput(ptr(b), uint32(len(b)))
		return 0
	case "mismatch":
		emit(abi.EmitText, "a")
		return text("b")
	case "toolcalls":
		setOutput(abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"value":7}`)}}})
		return 0
	case "usage":
		emit(abi.EmitUsage, `{"inputTokens":3}`)
		in, out := int64(3), int64(4)
		setOutput(abi.CompleteOutput{Text: "", Usage: &abi.Usage{InputTokens: &in, OutputTokens: &out}})
		return 0
	case "status":
		return 7
	case "cancelled":
		return 2
	case "log":
		b := []byte("hello from guest")
		hostLog(int32(abi.LogInfo), ptr(b), uint32(len(b)))
		os.Stderr.WriteString("stderr line\n")
		return text("logged")
	case "badptr":
		hostOutput(0xfffffff0, 100)
		return 0
	case "http", "sse", "post":
		return doHTTP(cmd, arg)
	case "handles":
		// Open more than MaxHTTPHandles requests.
		var last int32
		for i := 0; i < abi.MaxHTTPHandles+1; i++ {
			last = start("GET", arg, nil, false)
			if last < 0 {
				break
			}
		}
		return text("last=" + strconv.Itoa(int(last)))
	}
	return text(msg)
}

func start(method, url string, body []byte, stream bool) int32 {
	meta, _ := json.Marshal(abi.HTTPRequest{
		Method: method, URL: url, Stream: stream,
		Headers: map[string]string{
			"Authorization":       "Bearer guest-supplied",
			"X-Api-Key":           "guest-key",
			"Cookie":              "a=b",
			"Proxy-Authorization": "x",
			"X-Custom":            "ok",
		},
	})
	return httpStart(ptr(meta), uint32(len(meta)), ptr(body), uint32(len(body)))
}

func doHTTP(cmd, url string) int32 {
	var body []byte
	method := "GET"
	if cmd == "post" {
		method = "POST"
		body = make([]byte, abi.MaxRequestBytes+1)
	}
	h := start(method, url, body, cmd == "sse")
	if h < 0 {
		return text("errno:" + strconv.Itoa(int(h)))
	}
	defer httpClose(h)
	headBuf := make([]byte, 4096)
	n := httpHead(h, ptr(headBuf), uint32(len(headBuf)))
	var head abi.HTTPResponse
	json.Unmarshal(headBuf[:n], &head)
	var out strings.Builder
	out.WriteString("status:" + strconv.Itoa(head.Status) + " ")
	if cmd == "sse" {
		buf := make([]byte, 4)
		for {
			r := httpNextEvent(h, ptr(buf), uint32(len(buf)))
			if r < 0 {
				out.WriteString("errno:" + strconv.Itoa(int(r)))
				break
			}
			n, eof := abi.UnpackEOF(r)
			if int(n) > len(buf) {
				buf = make([]byte, n) // too small: nothing consumed, retry
				continue
			}
			if eof && n == 0 {
				out.WriteString("eof")
				break
			}
			name, data := abi.SplitEvent(buf[:n])
			if out.Len() < 1024 { // keep guest CPU small on big streams
				out.WriteString(string(name) + "=" + string(data) + ";")
			}
		}
		return text(out.String())
	}
	buf := make([]byte, 32<<10)
	for {
		r := httpRead(h, ptr(buf), uint32(len(buf)))
		if r < 0 {
			out.WriteString("errno:" + strconv.Itoa(int(r)))
			break
		}
		n, eof := abi.UnpackEOF(r)
		if out.Len() < 1024 {
			out.Write(buf[:n])
		}
		if eof {
			break
		}
	}
	return text(out.String())
}
