package main

import (
	"encoding/json"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// Native costs of the parts of one turn, to see where guest CPU goes (in
// the sandbox each costs roughly 40–100× more; encoding/json is at the top
// of that range). The adapter's own parts are BenchmarkTurnSettings,
// BenchmarkTurnBuild and BenchmarkTurnEvents; the SDK's per-call JSON
// (input decode, HTTP meta and head, output encode) is shown for
// comparison.

func BenchmarkTurnSettings(b *testing.B) {
	raw := []byte(`{"endpoint":"http://127.0.0.1:1234/v1/"}`)
	for b.Loop() {
		if _, err := configFor(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTurnBuild(b *testing.B) {
	cfg, _ := parseSettings(nil)
	in := userTurn("conformance:text")
	for b.Loop() {
		if _, err := buildRequest(cfg, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurnEvents: a short reply's whole stream (role, two content
// chunks, finish, [DONE]).
func BenchmarkTurnEvents(b *testing.B) {
	role := `{"id":"chatcmpl-sim1","object":"chat.completion.chunk","created":1767225600,"model":"fixture-model","system_fingerprint":"fp_vendorsim","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`
	finish := `{"id":"chatcmpl-sim1","object":"chat.completion.chunk","created":1767225600,"model":"fixture-model","system_fingerprint":"fp_vendorsim","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`
	events := [][]byte{[]byte(role), []byte(textChunk), []byte(textChunk), []byte(finish), []byte("[DONE]")}
	name := []byte("message")
	for b.Loop() {
		st := &turnStream{out: &recorder{}}
		for _, d := range events {
			if err := st.handle(name, d); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := st.result(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSDKInputDecode(b *testing.B) {
	raw, _ := json.Marshal(userTurn("conformance:text"))
	for b.Loop() {
		var in abi.CompleteInput
		if err := json.Unmarshal(raw, &in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSDKHTTPMeta(b *testing.B) {
	req := &abi.HTTPRequest{Method: "POST", URL: "http://127.0.0.1:1234/v1/chat/completions",
		Headers: map[string]string{"content-type": "application/json", "accept": "text/event-stream"}, Stream: true}
	head := []byte(`{"status":200,"headers":{"content-type":"text/event-stream; charset=utf-8","cache-control":"no-cache","date":"Mon, 30 Nov 2026 11:00:00 GMT"}}`)
	for b.Loop() {
		if _, err := json.Marshal(req); err != nil {
			b.Fatal(err)
		}
		var h abi.HTTPResponse
		if err := json.Unmarshal(head, &h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSDKOutputEncode(b *testing.B) {
	out := &abi.CompleteOutput{Text: "Hello fixture", FinishReason: "stop"}
	for b.Loop() {
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}

// scriptHost is an sdk.Host that answers one streamed turn from memory:
// the native cost (and allocations) of a whole turn through the SDK.
type scriptHost struct {
	input, config, head []byte
	events              [][]byte
	next                int
}

func (h *scriptHost) copyIn(src, buf []byte) int32 {
	if len(src) <= len(buf) {
		copy(buf, src)
	}
	return int32(len(src))
}
func (h *scriptHost) Input(buf []byte) int32             { return h.copyIn(h.input, buf) }
func (h *scriptHost) Output([]byte)                      {}
func (h *scriptHost) Config(buf []byte) int32            { return h.copyIn(h.config, buf) }
func (h *scriptHost) Emit(abi.EmitKind, []byte) bool     { return false }
func (h *scriptHost) HTTPStart(_, _ []byte) int32        { h.next = 0; return 1 }
func (h *scriptHost) HTTPHead(_ int32, buf []byte) int32 { return h.copyIn(h.head, buf) }
func (h *scriptHost) HTTPRead(int32, []byte) int64       { return abi.PackEOF(0, true) }
func (h *scriptHost) HTTPNextEvent(_ int32, buf []byte) int64 {
	if h.next == len(h.events) {
		return abi.PackEOF(0, true)
	}
	ev := h.events[h.next]
	n := len("message\n") + len(ev)
	if n > len(buf) {
		return abi.PackEOF(uint32(n), false)
	}
	h.next++
	copy(buf[copy(buf, "message\n"):], ev)
	return abi.PackEOF(uint32(n), false)
}
func (h *scriptHost) HTTPClose(int32)              {}
func (h *scriptHost) Cancelled() bool              { return false }
func (h *scriptHost) Log(abi.LogLevel, []byte)     {}
func (h *scriptHost) LogEnabled(abi.LogLevel) bool { return false }

// BenchmarkTurnDispatch: one conformance:text turn through sdk.Dispatch,
// host calls answered from memory. Its allocs/op are the guest's per turn.
func BenchmarkTurnDispatch(b *testing.B) {
	input, _ := json.Marshal(userTurn("conformance:text"))
	role := `{"choices":[{"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-sim1","model":"sim-large","object":"chat.completion.chunk","system_fingerprint":"fp_vendorsim","usage":null}`
	finish := `{"choices":[{"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-sim1","model":"sim-large","object":"chat.completion.chunk","system_fingerprint":"fp_vendorsim","usage":null}`
	h := &scriptHost{
		input:  input,
		config: []byte(`{"endpoint":"http://127.0.0.1:1234/v1/"}`),
		head:   []byte(`{"status":200,"headers":{"cache-control":"no-cache","content-type":"text/event-stream","date":"Mon, 30 Nov 2026 11:00:00 GMT"}}`),
		events: [][]byte{[]byte(role), []byte(textChunk), []byte(textChunk), []byte(finish), []byte("[DONE]")},
	}
	p := &sdk.Plugin{Info: sdk.Info{ID: pluginID, Version: pluginVersion}, Provider: provider{}}
	b.ReportAllocs()
	for b.Loop() {
		if st := sdk.Dispatch(h, abi.OpComplete, p); st != abi.StatusOK {
			b.Fatal(st)
		}
	}
}
