// Command openai is the adhost provider extension for the OpenAI Chat
// Completions API and every OpenAI-compatible server (vLLM, llama.cpp
// server, Ollama, xAI, Groq, Together, OpenRouter …). It is built for
// wasip1 and runs inside the host's sandbox (manifests/openai.toml):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o openai.wasm ./plugins/openai
//
// One model turn is one POST {endpoint}chat/completions with stream: true
// (request.go), followed through its SSE stream until "data: [DONE]"
// (stream.go, read with the single-pass scanner of scan.go). The discovery
// probe reads GET {endpoint}models (main.go). The host injects the
// Authorization header and enforces the origins; the adapter never sees
// the key and reports failures with fixed codes, never vendor bodies.
//
// Settings (validated by the manifest's schema and again here, config.go):
// endpoint (https, or http on a loopback host; default
// https://api.openai.com/v1/), maxTokensField (max_completion_tokens or the
// legacy max_tokens), structuredOutput (response_format json_schema, default
// true), includeUsage (stream_options.include_usage, default true).
//
// Tests run the adapter natively through sdk-plugin/sdktest against the
// loopback simulator of internal/vendorsim: golden transcripts in
// testdata/*.txtar (go test -run TestTranscripts -update rewrites them),
// the conformance scenarios, and — without -short — the real wasm build
// through runtime/wasm. RATIONALE.md records the performance choices.
package main
