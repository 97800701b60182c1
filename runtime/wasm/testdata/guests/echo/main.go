// Command echo is a test guest for runtime/wasm: a provider that reads a
// response every way the ABI allows (http_head, http_read, http_next_event)
// and hands back whatever it read, as streamed text and as its result, so
// that a test can check that no injected credential ever reached it. Other
// commands try to put a value the guest was given in its input into a
// result or an event, which the host must refuse. It uses raw
// //go:wasmexport and //go:wasmimport bindings, not the SDK.
//
// The last user message is "<cmd>:<arg>":
//
//	read:<url>        head, then the body with http_read in 7-byte reads
//	read-gzip:<url>   the same, asking for a compressed, ranged body, which
//	                  it inflates itself
//	events:<url>      head, then every event with http_next_event
//	leak-output:<s>   a request to the endpoint, then a result carrying s
//	leak-emit:<s>     a request to the endpoint, then a text event carrying s
//	leak-log:<s>      a request to the endpoint, then a warning carrying s
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
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

// got is what the guest read, as it streamed it: the final text must equal
// the streamed text.
var got strings.Builder

// put streams s as text, adds it to got and prints it (the host wants
// valid UTF-8, and a read may end inside a character).
func put(s string) {
	s = strings.ToValidUTF8(s, "?")
	if s == "" {
		return
	}
	got.WriteString(s)
	os.Stderr.WriteString(s + "\n") // the host logs it at debug level
	b := []byte(s)
	hostEmit(int32(abi.EmitText), ptr(b), uint32(len(b)))
}

//go:wasmexport plugin_call
func call(op int32) int32 {
	switch abi.Op(op) {
	case abi.OpInfo:
		setOutput(abi.Info{ID: "echoback", Version: "1.0.0", Kind: abi.KindProvider})
		return 0
	case abi.OpComplete:
		var in abi.CompleteInput
		if err := json.Unmarshal(pull(hostInput), &in); err != nil || len(in.Messages) == 0 {
			return 1
		}
		cmd, arg, _ := strings.Cut(in.Messages[len(in.Messages)-1].Content, ":")
		return complete(cmd, arg)
	}
	return 1
}

func complete(cmd, arg string) int32 {
	got.Reset()
	switch cmd {
	case "read", "read-gzip", "events":
		var hdr map[string]string
		if cmd == "read-gzip" {
			hdr = map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=2-"}
		}
		h := start(arg, cmd == "events", hdr)
		if h < 0 {
			put("errno:" + strconv.Itoa(int(h)))
			break
		}
		put("head:")
		head(h)
		put("\n")
		switch cmd {
		case "read":
			readAll(h)
		case "read-gzip":
			readInflate(h)
		default:
			events(h)
		}
		httpClose(h)
	case "leak-output", "leak-emit", "leak-log":
		cfg := struct{ Endpoint string }{}
		json.Unmarshal(pull(hostConfig), &cfg)
		if h := start(cfg.Endpoint+"/headers", false, nil); h >= 0 {
			httpClose(h)
		}
		if cmd == "leak-log" {
			b := []byte("logged " + arg)
			hostLog(int32(abi.LogWarn), ptr(b), uint32(len(b)))
			setOutput(abi.CompleteOutput{Text: "logged", FinishReason: "stop"})
			return 0
		}
		if cmd == "leak-emit" {
			// Not printed: the value came in the input, not from the
			// network, and guest output is logged at debug level.
			b := []byte("emitted " + arg)
			hostEmit(int32(abi.EmitText), ptr(b), uint32(len(b)))
			setOutput(abi.CompleteOutput{Text: "emitted " + arg, FinishReason: "stop"})
			return 0
		}
		setOutput(abi.CompleteOutput{Text: "result " + arg, FinishReason: "stop"})
		return 0
	default:
		put("unknown command " + cmd)
	}
	setOutput(abi.CompleteOutput{Text: got.String(), FinishReason: "stop"})
	return 0
}

func start(url string, stream bool, hdr map[string]string) int32 {
	if hdr == nil {
		hdr = map[string]string{"Accept": "*/*"}
	}
	meta, _ := json.Marshal(abi.HTTPRequest{Method: "GET", URL: url, Stream: stream, Headers: hdr})
	return httpStart(ptr(meta), uint32(len(meta)), 0, 0)
}

// head puts the http_head answer, asking for its size first.
func head(h int32) {
	n := httpHead(h, 0, 0)
	if n < 0 {
		put("errno:" + strconv.Itoa(int(n)))
		return
	}
	b := make([]byte, n)
	httpHead(h, ptr(b), uint32(n))
	put(string(b))
}

// readAll reads the body in 7-byte reads, so that an echoed key spans
// several of them, and streams each read as it comes.
func readAll(h int32) {
	buf := make([]byte, 7)
	for {
		r := httpRead(h, ptr(buf), uint32(len(buf)))
		if r < 0 {
			put("errno:" + strconv.Itoa(int(r)))
			return
		}
		n, eof := abi.UnpackEOF(r)
		put(string(buf[:n]))
		if eof {
			return
		}
	}
}

// readInflate reads the whole body and inflates it when it is gzip.
func readInflate(h int32) {
	var body []byte
	buf := make([]byte, 512)
	for {
		r := httpRead(h, ptr(buf), uint32(len(buf)))
		if r < 0 {
			put("errno:" + strconv.Itoa(int(r)))
			return
		}
		n, eof := abi.UnpackEOF(r)
		body = append(body, buf[:n]...)
		if eof {
			break
		}
	}
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		if b, err := io.ReadAll(zr); err == nil {
			put("inflated:")
			body = b
		}
	}
	put(string(body))
}

func events(h int32) {
	buf := make([]byte, 16)
	for {
		r := httpNextEvent(h, ptr(buf), uint32(len(buf)))
		if r < 0 {
			put("errno:" + strconv.Itoa(int(r)))
			return
		}
		n, eof := abi.UnpackEOF(r)
		if int(n) > len(buf) {
			buf = make([]byte, n) // too small: nothing consumed, retry
			continue
		}
		if eof && n == 0 {
			put("eof")
			return
		}
		name, data := abi.SplitEvent(buf[:n])
		put(string(name) + "=" + string(data) + ";")
	}
}
