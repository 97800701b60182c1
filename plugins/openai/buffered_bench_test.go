package main

import (
	"encoding/json"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// bodyHost is scriptHost answering http_read with one JSON body.
type bodyHost struct {
	scriptHost
	body []byte
	off  int
}

func (h *bodyHost) HTTPStart(_, _ []byte) int32 { h.off = 0; return 1 }
func (h *bodyHost) HTTPRead(_ int32, buf []byte) int64 {
	n := copy(buf, h.body[h.off:])
	h.off += n
	return abi.PackEOF(uint32(n), h.off == len(h.body))
}

// BenchmarkTurnDispatchBuffered: one Buffered turn (a 20-word answer, as
// the gateway harness's mock vendor sends it) through sdk.Dispatch.
func BenchmarkTurnDispatchBuffered(b *testing.B) {
	in := userTurn("hi")
	in.Buffered = true
	input, _ := json.Marshal(in)
	h := &bodyHost{
		scriptHost: scriptHost{
			input:  input,
			config: []byte(`{"endpoint":"http://127.0.0.1:1234/v1/"}`),
			head:   []byte(`{"status":200,"headers":{"content-length":"313","content-type":"application/json","date":"Mon, 30 Nov 2026 11:00:00 GMT"}}`),
		},
		body: []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 ","role":"assistant"}}],"created":0,"id":"chatcmpl-mock","model":"mock-model","object":"chat.completion","usage":{"completion_tokens":20,"prompt_tokens":5,"total_tokens":25}}` + "\n"),
	}
	p := &sdk.Plugin{Info: sdk.Info{ID: pluginID, Version: pluginVersion}, Provider: provider{}}
	b.ReportAllocs()
	for b.Loop() {
		if st := sdk.Dispatch(h, abi.OpComplete, p); st != abi.StatusOK {
			b.Fatal(st)
		}
	}
}
