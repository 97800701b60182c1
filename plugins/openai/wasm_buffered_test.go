//go:build !wasip1

package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"adhost/internal/plugintest"
)

// BenchmarkWasmBuffered: one Buffered turn through runtime/wasm against a
// loopback server answering the gateway harness's 20-word completion;
// cpu-µs/op is the whole process (guest, glue, HTTP client and server).
func BenchmarkWasmBuffered(b *testing.B) {
	body := []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 ","role":"assistant"}}],"created":0,"id":"chatcmpl-mock","model":"mock-model","object":"chat.completion","usage":{"completion_tokens":20,"prompt_tokens":5,"total_tokens":25}}` + "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	p := loadWasm(b, srv.URL+"/v1/")
	in := userTurn("hi")
	in.Buffered = true
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := p.Complete(b.Context(), in, &plugintest.Sink{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
