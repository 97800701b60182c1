// Command anthropic is adhost's adapter for the Anthropic Messages API
// (https://docs.anthropic.com/en/api/messages), built as a WebAssembly
// extension (manifests/anthropic.toml).
//
// # Requests
//
// One turn is one POST {endpoint}messages with "stream": true. The host adds
// x-api-key (the api_key credential slot, no prefix) and the static
// anthropic-version: 2023-06-01 header declared in the manifest; the
// adapter never sees the key and never sets either header. instructions go
// to "system", the conversation to "messages" (assistant tool calls as
// tool_use blocks, tool outputs as tool_result blocks in a user message,
// consecutive same-role messages merged, as the API requires), the run's
// tools to "tools" (name, description, input_schema) and maxOutputTokens to
// the required "max_tokens".
//
// Structured output: the classic Messages API has no JSON-schema response
// format, so the adapter does not send outputSchema; the host's JSON
// directive in the instructions and its validation of the final text do the
// work (wire-core §9). Anthropic's newer structured-outputs feature needs a
// beta header and is limited to some models, so 1.0.0 does not use it.
//
// # The stream
//
// Named SSE events (https://docs.anthropic.com/en/docs/build-with-claude/streaming),
// each scanned once with jsonscan (no encoding/json per event):
// message_start (input usage), content_block_start (text or tool_use with
// id and name), content_block_delta (text_delta → visible text;
// input_json_delta → tool arguments assembled per block, reported as
// tool-call progress; thinking_delta → progress), content_block_stop,
// message_delta (stop_reason, cumulative usage), message_stop (the required
// terminal marker: a stream that ends without it is INCOMPLETE_STREAM; after
// it the adapter stops reading and closes the response). ping is ignored
// (never progress); unknown events are ignored, as Anthropic's versioning
// policy asks.
//
// stop_reason end_turn, stop_sequence and tool_use finish with "stop" (with
// the tool calls), max_tokens and model_context_window_exceeded with
// "length" — or TRUNCATED_TOOL_CALL when a tool_use input was cut off —,
// refusal is PROVIDER_REFUSAL and pause_turn (server tools only, which the
// adapter never offers) PROVIDER_FAILED.
//
// # Usage
//
// Anthropic's input_tokens counts only the tokens after the last cache
// breakpoint (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance),
// so inputTokens = input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens, cachedInputTokens = cache_read_input_tokens,
// cacheCreationInputTokens is kept for usage records, and outputTokens is
// message_delta's cumulative output_tokens. Counters the response does not
// carry stay absent.
//
// # Errors
//
// HTTP (https://docs.anthropic.com/en/api/errors): 429 → RATE_LIMITED
// (retryable, Retry-After passed on); 401/403 → PROVIDER_AUTH; 5xx and 529
// (overloaded) → PROVIDER_ERROR retryable; other statuses → PROVIDER_ERROR.
// In-stream error events: overloaded_error is documented as the streaming
// form of a 529, so it is PROVIDER_ERROR retryable too; rate_limit_error is
// RATE_LIMITED; any other is PROVIDER_FAILED. A network failure before the
// response is PROVIDER_UNREACHABLE, after it started INCOMPLETE_STREAM; the
// host's 10,000,000-byte stream bound is RESPONSE_TOO_LARGE. The vendor's
// error body is never read into an error.
//
// # Discovery
//
// Inspect lists GET {endpoint}models?limit=1000, following after_id=last_id
// while has_more, within wire-extensions §7's caps (1000 ids, 20 pages,
// 2 MB; a cap gives complete: false; a repeated cursor or a malformed page
// gives INVALID_DISCOVERY_RESPONSE). 401/403 → AUTH_REJECTED, 429 →
// RATE_LIMITED, 404 → DISCOVERY_UNSUPPORTED, other failures →
// DISCOVERY_FAILED, network → PROVIDER_UNREACHABLE.
package main
