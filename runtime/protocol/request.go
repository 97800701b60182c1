package protocol

import "encoding/json"

// RunRequest is the POST /v1/runs body (wire-core §3.1) after strict
// decoding (see DecodeRunRequest). Optional fields are pointers or nil
// slices/maps so "absent" stays distinguishable from a zero value.
type RunRequest struct {
	Provider             string            `json:"provider"`
	Model                string            `json:"model"`
	Input                string            `json:"input"`
	Instructions         *string           `json:"instructions,omitempty"`
	History              []HistoryItem     `json:"history,omitempty"`
	Tools                []string          `json:"tools,omitempty"`
	RequiredCapabilities []string          `json:"requiredCapabilities,omitempty"`
	MaxSteps             *int              `json:"maxSteps,omitempty"`
	MaxOutputTokens      *int              `json:"maxOutputTokens,omitempty"`
	IdleTimeoutMs        *int64            `json:"idleTimeoutMs,omitempty"`
	OutputSchema         json.RawMessage   `json:"outputSchema,omitempty"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	IdempotencyKey       *string           `json:"idempotencyKey,omitempty"`
	Retry                *Retry            `json:"retry,omitempty"`

	// Extension fields, recognised by the decoder but only accepted once
	// their feature is implemented (until then: present ⇒ INVALID_REQUEST,
	// as an upstream revision without the field would answer).
	Attachments      json.RawMessage `json:"attachments,omitempty"`
	OutputArtifact   json.RawMessage `json:"outputArtifact,omitempty"`
	Retrieval        json.RawMessage `json:"retrieval,omitempty"`
	Session          json.RawMessage `json:"session,omitempty"`
	Approvals        json.RawMessage `json:"approvals,omitempty"`
	ApplicationTools json.RawMessage `json:"applicationTools,omitempty"`
}

// HistoryItem is one prior visible turn.
type HistoryItem struct {
	Role    string `json:"role"` // "user" | "assistant"
	Content string `json:"content"`
}

// Retry is the opt-in provider retry policy (wire-core §15.4).
type Retry struct {
	MaxAttempts int  `json:"maxAttempts"`
	BaseDelayMs *int `json:"baseDelayMs,omitempty"`
	MaxDelayMs  *int `json:"maxDelayMs,omitempty"`
}

// RunResult is the JSON-mode body and run.completed's result (wire-core §4).
type RunResult struct {
	RunID        string          `json:"runId"`
	Provider     string          `json:"provider"`
	Model        string          `json:"model"`
	Text         string          `json:"text"`
	Output       json.RawMessage `json:"output,omitempty"`
	Usage        Usage           `json:"usage"`
	Steps        int             `json:"steps"`
	FinishReason string          `json:"finishReason"`
	// Session is the SessionInfo of a session turn (conversation-sessions:
	// the session's next revision), compact JSON; absent otherwise.
	Session json.RawMessage `json:"session,omitempty"`
	// Retrieval is the RetrievalResult of a run with the `retrieval`
	// option (scoped-retrieval, wire-extensions §6.3), compact JSON;
	// absent otherwise.
	Retrieval json.RawMessage `json:"retrieval,omitempty"`
	// Sources is the context manifest (context-inputs, wire-context §8)
	// and Artifacts the draft artifact (draft-artifacts, §9), compact
	// JSON arrays; absent without context or outputArtifact.
	Sources   json.RawMessage `json:"sources,omitempty"`
	Artifacts json.RawMessage `json:"artifacts,omitempty"`
}

// Usage is the wire Usage object (wire-core §14.1): absent = unknown.
type Usage struct {
	InputTokens          *int64   `json:"inputTokens,omitempty"`
	OutputTokens         *int64   `json:"outputTokens,omitempty"`
	CachedInputTokens    *int64   `json:"cachedInputTokens,omitempty"`
	ReasoningTokens      *int64   `json:"reasoningTokens,omitempty"`
	CostUSD              *float64 `json:"costUsd,omitempty"`
	APIEquivalentCostUSD *float64 `json:"apiEquivalentCostUsd,omitempty"`
}

// Protocol constants.
const (
	Name        = "agenticdriver"
	Version     = "1.0"
	HealthProto = "agenticdriver.v1"
)
