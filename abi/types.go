package abi

import (
	"bytes"
	"encoding/json"
)

// JSON shapes of each op's input and output. Field names are exact and
// case-sensitive; the host decodes guest output strictly (unknown fields are
// an invalid result) and bounds it by MaxOutputBytes.

// Info is OpInfo's output. The host compares ID and Version with the pin in
// host.toml and Kind with the embedded manifest.
type Info struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Kind    Kind   `json:"kind"`
}

// Kind is what an extension provides.
type Kind string

const (
	KindProvider Kind = "provider"
	KindTool     Kind = "tool"
	KindEmbedder Kind = "embedder"
)

// Role of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of the conversation handed to a provider.
//
//   - user: Content.
//   - assistant: Content and optional ToolCalls the model made in that turn.
//   - tool: the JSON-encoded output of one call in Content, with ToolCallID
//     and Name of the call it answers.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Name       string     `json:"name,omitempty"`
	// Parts follow Content in a user turn that carries attached files
	// (wire-context §6.3): a text label before each file, then the file
	// itself, in context order. Adapters map them to their vendor's own
	// part shapes; the host re-sends them on every step of the run.
	Parts []Part `json:"parts,omitempty"`
}

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
	PartPDF   = "pdf"
)

// Part is one piece of a user turn after its Content.
//
//   - text: Text.
//   - image, pdf: MediaType (image/png, image/jpeg, image/webp,
//     application/pdf) and Data, canonical standard base64 of the file;
//     a pdf has Name, a display file name ("<source id>.pdf") for vendors
//     that want one.
type Part struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Data      string `json:"data,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ToolCall is a model's request to run a tool. Arguments is a JSON object.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolDef is a tool definition offered to the model or listed by a tool
// extension. InputSchema is a JSON Schema object. OutputSchema, when set,
// is the JSON Schema the tool's output must match; the host checks it and
// never sends it to a provider (wire-core §12.1 offers name, description
// and inputSchema).
type ToolDef struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// CompleteInput is OpComplete's input: one model turn.
type CompleteInput struct {
	// Model is the explicit model id of the run (never defaulted).
	Model string `json:"model"`
	// Instructions are system-style instructions; when the run has an
	// outputSchema the host has already appended its JSON directive.
	Instructions string `json:"instructions,omitempty"`
	// Messages is the conversation so far: history, the user input, and the
	// assistant/tool turns of earlier steps of this run.
	Messages []Message `json:"messages"`
	// Tools are the definitions selected for this run (empty: none).
	Tools []ToolDef `json:"tools,omitempty"`
	// MaxOutputTokens is this step's output-token bound (≥ 1).
	MaxOutputTokens int `json:"maxOutputTokens"`
	// OutputSchema is the run's outputSchema, for adapters whose vendor
	// supports native structured output. The host validates the final text
	// itself either way.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Native is private continuation state the adapter returned earlier in a
	// native session (conversation-sessions); never shown to applications.
	Native json.RawMessage `json:"native,omitempty"`
	// Step is the 1-based model step of the run.
	Step int `json:"step"`
	// Buffered tells the adapter that nothing consumes this turn's text
	// as it streams (a JSON-mode run without an idle timeout): it may ask
	// its vendor for the whole answer at once instead of a stream. Text
	// emitted anyway is accepted as usual.
	Buffered bool `json:"buffered,omitempty"`
}

// CompleteOutput is OpComplete's result.
type CompleteOutput struct {
	Text         string          `json:"text"`
	ToolCalls    []ToolCall      `json:"toolCalls,omitempty"`
	Usage        *Usage          `json:"usage,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"` // "stop" | "length"
	Native       json.RawMessage `json:"native,omitempty"`
}

// Usage is what an adapter measured for one turn. Nil fields are unknown;
// an explicit 0 is a reported zero. The host normalizes it (wire-core §14.1).
type Usage struct {
	InputTokens          *int64   `json:"inputTokens,omitempty"`
	OutputTokens         *int64   `json:"outputTokens,omitempty"`
	CachedInputTokens    *int64   `json:"cachedInputTokens,omitempty"`
	ReasoningTokens      *int64   `json:"reasoningTokens,omitempty"`
	CostUSD              *float64 `json:"costUsd,omitempty"`
	APIEquivalentCostUSD *float64 `json:"apiEquivalentCostUsd,omitempty"`
	// CacheCreationInputTokens is reported by some vendors (Anthropic); it is
	// part of InputTokens and kept for usage records only.
	CacheCreationInputTokens *int64 `json:"cacheCreationInputTokens,omitempty"`
}

// InspectOutput is OpInspect's result: a fixed inspection code
// (wire-extensions §7: CATALOG_AVAILABLE, AUTH_REQUIRED, AUTH_REJECTED,
// RATE_LIMITED, PROVIDER_UNREACHABLE, INVALID_DISCOVERY_RESPONSE,
// DISCOVERY_FAILED, ACCESS_DENIED, DISCOVERY_UNSUPPORTED …), the models the
// vendor reported, and whether the listing was complete.
type InspectOutput struct {
	Code     string   `json:"code"`
	Models   []string `json:"models,omitempty"`
	Complete bool     `json:"complete,omitempty"`
}

// ToolList is OpToolList's result.
type ToolList struct {
	Tools []ToolDef `json:"tools"`
}

// ToolInvokeInput is OpToolInvoke's input.
type ToolInvokeInput struct {
	CallID    string          `json:"callId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolInvokeOutput is OpToolInvoke's result. Output is any JSON value.
type ToolInvokeOutput struct {
	Output json.RawMessage `json:"output"`
}

// EmbedInput and EmbedOutput are OpEmbed's shapes (embedder extensions).
type EmbedInput struct {
	Model  string   `json:"model"`
	Inputs []string `json:"inputs"`
}

type EmbedOutput struct {
	Vectors [][]float32 `json:"vectors"`
	Usage   *Usage      `json:"usage,omitempty"`
}

// ErrorOutput is the output of a call that returned StatusError. Code must be
// one of the provider/tool codes of wire-core §7.2 (RATE_LIMITED,
// PROVIDER_AUTH, PROVIDER_ERROR, PROVIDER_UNREACHABLE, PROVIDER_FAILED,
// PROVIDER_REFUSAL, INVALID_PROVIDER_RESPONSE, RESPONSE_TOO_LARGE,
// INCOMPLETE_STREAM, AUTH_REQUIRED, TRUNCATED_TOOL_CALL, TOOL_FAILED, …);
// any other code becomes INTERNAL_ERROR. The host never forwards Message to a
// client or a log line: the public message is fixed per code by the host.
// Message exists for sdktest and for the plugin author's own tests.
type ErrorOutput struct {
	Code      string `json:"code"`
	Message   string `json:"message,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
	// Status is the upstream HTTP status, when the error came from one (it
	// decides PROVIDER_ERROR's retryability: ≥ 500 is retryable).
	Status int `json:"status,omitempty"`
	// RetryAfterMs is the upstream Retry-After, when known (RATE_LIMITED).
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
}

// HTTPRequest is the meta JSON of HostHTTPStart.
type HTTPRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Headers are single-valued; names are case-insensitive. The host drops
	// authorization, x-api-key, x-goog-api-key, cookie, proxy-* and hop-by-hop
	// headers supplied here.
	Headers map[string]string `json:"headers,omitempty"`
	// Stream marks a response the guest will read with HostHTTPNextEvent (its
	// size bound is MaxStreamBytes of event data rather than
	// MaxResponseBytes of body).
	Stream bool `json:"stream,omitempty"`
}

// HTTPResponse is HostHTTPHead's output. Header names are lower-case; only
// the first value of each is kept.
type HTTPResponse struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
}

// SplitEvent splits an EventFrame written by HostHTTPNextEvent into the
// event name ("message" when the event had none) and its data (data lines
// joined by '\n').
func SplitEvent(frame []byte) (name, data []byte) {
	i := bytes.IndexByte(frame, '\n')
	if i < 0 {
		return frame, nil
	}
	return frame[:i], frame[i+1:]
}

// AppendEvent appends an EventFrame for name and data to dst.
func AppendEvent(dst []byte, name string, data []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, '\n')
	return append(dst, data...)
}
