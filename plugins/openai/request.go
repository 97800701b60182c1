package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"adhost/abi"
)

// Chat Completions request shapes
// (https://platform.openai.com/docs/api-reference/chat/create). Field order
// is the order of the struct, so requests are byte-stable for transcripts.

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is a system, user, assistant or tool message. Content is a
// pointer so an assistant turn that only calls tools sends "content": null,
// as OpenAI's own clients do.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, as a string
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

// jsonSchema is the json_schema response format. Strict is false: strict
// mode accepts only a subset of JSON Schema (every property required, no
// additionalProperties true …) and the host validates the final text
// against the run's full schema anyway.
type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// buildRequest translates one turn into a Chat Completions request body.
func buildRequest(cfg *config, in *abi.CompleteInput) ([]byte, error) {
	if in.Model == "" {
		return nil, errors.New("model is empty")
	}
	req := chatRequest{
		Model:    in.Model,
		Messages: make([]chatMessage, 0, len(in.Messages)+1),
		Stream:   true,
	}
	if cfg.includeUsage {
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if in.MaxOutputTokens > 0 {
		if cfg.maxTokensField == maxTokens {
			req.MaxTokens = in.MaxOutputTokens
		} else {
			req.MaxCompletionTokens = in.MaxOutputTokens
		}
	}
	if in.Instructions != "" {
		req.Messages = append(req.Messages, chatMessage{Role: "system", Content: ptr(in.Instructions)})
	}
	for i := range in.Messages {
		m := &in.Messages[i]
		switch m.Role {
		case abi.RoleUser:
			req.Messages = append(req.Messages, chatMessage{Role: "user", Content: ptr(m.Content)})
		case abi.RoleAssistant:
			cm := chatMessage{Role: "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				cm.Content = ptr(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args, err := compactObject(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: tool call %s: %w", i, tc.ID, err)
				}
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
					ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args},
				})
			}
			req.Messages = append(req.Messages, cm)
		case abi.RoleTool:
			req.Messages = append(req.Messages, chatMessage{Role: "tool", Content: ptr(m.Content), ToolCallID: m.ToolCallID})
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for _, t := range in.Tools {
		params := t.InputSchema
		if len(bytes.TrimSpace(params)) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		req.Tools = append(req.Tools, chatTool{Type: "function", Function: toolFunction{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	if cfg.structuredOutput && len(bytes.TrimSpace(in.OutputSchema)) > 0 {
		req.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{
			Name: "output", Schema: in.OutputSchema,
		}}
	}
	return json.Marshal(&req)
}

func ptr(s string) *string { return &s }

// compactObject returns a tool call's arguments as compact JSON text.
func compactObject(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "{}", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", errors.New("arguments are not JSON")
	}
	return b.String(), nil
}
