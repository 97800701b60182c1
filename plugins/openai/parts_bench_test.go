package main

import (
	"encoding/json"
	"testing"

	"adhost/abi"
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
