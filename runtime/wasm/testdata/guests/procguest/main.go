// Command procguest is a test guest for the process capability of
// runtime/wasm: well-behaved or hostile as the last user message says
// (see complete). It uses raw //go:wasmimport against the abi names.
package main

import (
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

//go:wasmimport llmhost emit
func hostEmit(kind int32, ptr, n uint32) int32

//go:wasmimport llmhost proc_start
func procStart(meta, metaLen, stdin, stdinLen uint32) int32

//go:wasmimport llmhost proc_read_line
func procReadLine(h int32, buf, cap uint32) int64

//go:wasmimport llmhost proc_read
func procRead(h int32, buf, cap uint32) int64

//go:wasmimport llmhost proc_stderr
func procStderr(h int32, buf, cap uint32) int32

//go:wasmimport llmhost proc_wait
func procWait(h int32) int32

//go:wasmimport llmhost proc_close
func procClose(h int32)

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
		setOutput(abi.Info{ID: "procguest", Version: "1.0.0", Kind: abi.KindProvider})
		return 0
	case abi.OpComplete:
		n := hostInput(0, 0)
		raw := make([]byte, n)
		hostInput(ptr(raw), n)
		var in abi.CompleteInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return 1
		}
		return complete(in.Messages[len(in.Messages)-1].Content)
	}
	return 1
}

func text(s string) int32 {
	setOutput(abi.CompleteOutput{Text: s, FinishReason: "stop"})
	return 0
}

func start(binary string, args []string, stdin string) int32 {
	meta, _ := json.Marshal(abi.ProcessStart{Binary: binary, Args: args})
	in := []byte(stdin)
	return procStart(ptr(meta), uint32(len(meta)), ptr(in), uint32(len(in)))
}

// complete runs one behaviour:
//
//	run:ARGS      start "cli" with the space-separated ARGS and stdin
//	              "input", read every line, wait; answer the lines, the
//	              exit code and the stderr length
//	start:NAME    start NAME; answer the handle or errno
//	raw           like run, reading raw chunks
//	lens:ARGS     like run, answering the lines' lengths
//	flood         start "cli", read lines until an error; answer it
//	leak:N        start "cli" N times, read a line of each and never
//	              close any; answer the handles and errnos
//	wait          start "cli" and wait for it (a hung CLI: cancellation)
//	stream        start "cli", emit every line as text, never close it
func complete(msg string) int32 {
	cmd, arg, _ := strings.Cut(msg, ":")
	switch cmd {
	case "run", "raw", "lens":
		var args []string
		if arg != "" {
			args = strings.Split(arg, " ")
		}
		h := start("cli", args, "input")
		if h < 0 {
			return text("errno " + strconv.Itoa(int(h)))
		}
		var out []string
		if cmd == "raw" {
			var all []byte
			buf := make([]byte, 7)
			for {
				r := procRead(h, ptr(buf), uint32(len(buf)))
				if r < 0 {
					return text("read errno " + strconv.Itoa(int(r)))
				}
				n, eof := abi.UnpackEOF(r)
				all = append(all, buf[:n]...)
				if eof {
					break
				}
			}
			out = append(out, string(all))
		} else {
			buf := make([]byte, 4)
			for {
				r := procReadLine(h, ptr(buf), uint32(len(buf)))
				if r < 0 {
					return text("read errno " + strconv.Itoa(int(r)))
				}
				n, eof := abi.UnpackEOF(r)
				if eof && n == 0 {
					break
				}
				if int(n) > len(buf) {
					buf = make([]byte, n)
					continue
				}
				if cmd == "lens" {
					out = append(out, strconv.Itoa(int(n)))
				} else {
					out = append(out, string(buf[:n]))
				}
			}
		}
		code := procWait(h)
		en := procStderr(h, 0, 0)
		procClose(h)
		return text(strings.Join(out, "|") + " exit " + strconv.Itoa(int(code)) + " stderr " + strconv.Itoa(int(en)))
	case "start":
		h := start(arg, nil, "")
		return text("handle " + strconv.Itoa(int(h)))
	case "flood":
		h := start("cli", nil, "")
		if h < 0 {
			return text("errno " + strconv.Itoa(int(h)))
		}
		buf := make([]byte, 1<<20)
		lines := 0
		for {
			r := procReadLine(h, ptr(buf), uint32(len(buf)))
			if r < 0 {
				return text("lines " + strconv.Itoa(lines) + " errno " + strconv.Itoa(int(r)))
			}
			n, eof := abi.UnpackEOF(r)
			if eof && n == 0 {
				return text("lines " + strconv.Itoa(lines) + " eof")
			}
			lines++
		}
	case "leak":
		n, _ := strconv.Atoi(arg)
		var res []string
		buf := make([]byte, 64)
		for i := 0; i < n; i++ {
			h := start("cli", nil, "")
			if h > 0 {
				procReadLine(h, ptr(buf), uint32(len(buf))) // it is running
			}
			res = append(res, strconv.Itoa(int(h)))
		}
		return text(strings.Join(res, " "))
	case "wait":
		h := start("cli", nil, "")
		if h < 0 {
			return text("errno " + strconv.Itoa(int(h)))
		}
		return text("wait " + strconv.Itoa(int(procWait(h))))
	case "stream":
		h := start("cli", nil, "")
		if h < 0 {
			return text("errno " + strconv.Itoa(int(h)))
		}
		buf := make([]byte, 4096)
		var all strings.Builder
		for {
			r := procReadLine(h, ptr(buf), uint32(len(buf)))
			if r < 0 {
				return 2
			}
			n, eof := abi.UnpackEOF(r)
			if eof && n == 0 {
				return text(all.String())
			}
			all.Write(buf[:n])
			if hostEmit(int32(abi.EmitText), ptr(buf), uint32(n)) == 1 {
				return 2
			}
		}
	}
	return 1
}
