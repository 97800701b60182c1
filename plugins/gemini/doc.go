// Command gemini is adhost's adapter for the Gemini API's generateContent
// family (https://ai.google.dev/api/generate-content), built as a
// WebAssembly extension (manifests/gemini.toml).
//
// # Requests
//
// One turn is one POST {endpoint}models/{model}:streamGenerateContent?alt=sse
// (or :generateContent when settings.stream is false). The host adds
// x-goog-api-key (the api_key credential slot); the adapter never sees the
// key, which therefore never appears in a URL. instructions go to
// systemInstruction; messages to contents with roles "user" and "model"
// (assistant tool calls as functionCall parts, tool outputs as
// functionResponse parts named after the call, an object output as is and
// any other value wrapped as {"output": value}); consecutive same-role
// contents are merged; tools to one functionDeclarations list using
// parametersJsonSchema (a JSON Schema as is; "parameters" would reject
// keywords outside Gemini's OpenAPI subset); maxOutputTokens to
// generationConfig.maxOutputTokens.
//
// Structured output (settings.structuredOutput, default "auto"): on a turn
// without tools, generationConfig.responseMimeType is "application/json",
// and responseJsonSchema carries the run's outputSchema when every keyword
// in it is one Gemini documents as supported for responseJsonSchema; a
// schema with anything else (const, pattern, allOf, not …) is not sent,
// since Gemini would ignore or reject it. Turns with tools send neither
// (several models refuse a JSON MIME type together with function calling).
// The host validates the final text either way (wire-core §9).
//
// # Tool call ids and thought signatures
//
// Gemini gives function calls no ids: the adapter names them
// "call_<step>_<n>", unique within a run, and matches responses back by
// name and order (as Gemini does). Thinking models attach an opaque
// thoughtSignature to the first call of a turn and Gemini 3 refuses the next
// request without it (https://ai.google.dev/gemini-api/docs/thought-signatures).
// The adapter returns the signatures as its private native state
// (CompleteOutput.Native) and sends them back when the host hands that
// state to the next turn; without it, it sends Gemini's documented
// placeholder "skip_thought_signature_validator", which keeps the request
// valid at some cost in reasoning continuity.
//
// # The stream
//
// Every SSE data is a GenerateContentResponse, scanned once with jsonscan
// (no encoding/json per event): candidates[0].content.parts text → visible
// text (parts marked thought → progress only), functionCall → a tool call
// (tool-call progress), finishReason, usageMetadata (each a snapshot; the
// last wins), promptFeedback.blockReason → PROVIDER_REFUSAL, and
// {"error":{…}} → a stream error. Gemini's stream has no terminal event: it
// is complete when a chunk carried a finishReason; a stream that ends
// without one is INCOMPLETE_STREAM.
//
// finishReason STOP → "stop" (with the calls), MAX_TOKENS → "length";
// SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII and the image
// safety reasons → PROVIDER_REFUSAL (a stable public error; the vendor's
// ratings never surface); any other (MALFORMED_FUNCTION_CALL, OTHER,
// LANGUAGE, …) → PROVIDER_FAILED.
//
// # Usage
//
// https://ai.google.dev/api/generate-content#UsageMetadata: inputTokens =
// promptTokenCount (cached content included) + toolUsePromptTokenCount;
// cachedInputTokens = cachedContentTokenCount; outputTokens =
// candidatesTokenCount + thoughtsTokenCount (the candidates count excludes
// thinking, which is billed as output); reasoningTokens =
// thoughtsTokenCount. Gemini's JSON omits zero counters; counters never
// reported stay absent.
//
// # Errors
//
// HTTP errors are google.rpc.Status bodies
// (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes): 429
// RESOURCE_EXHAUSTED → RATE_LIMITED, retryable, with RetryInfo.retryDelay
// (or a gateway's Retry-After); 401/403 and 400 with ErrorInfo reason
// API_KEY_INVALID (Gemini's answer to a bad key) → PROVIDER_AUTH; 5xx →
// PROVIDER_ERROR retryable; other statuses → PROVIDER_ERROR. A stream
// error: RESOURCE_EXHAUSTED → RATE_LIMITED, UNAVAILABLE → PROVIDER_ERROR
// retryable, anything else → PROVIDER_FAILED. The error message of the
// body never reaches an error.
//
// # Discovery
//
// Inspect lists GET {endpoint}models?pageSize=1000, following
// pageToken=nextPageToken, within wire-extensions §7's caps (1000 ids, 20
// pages, 2 MB). Names lose their "models/" prefix; only models listing
// generateContent among their supportedGenerationMethods are kept.
package main
