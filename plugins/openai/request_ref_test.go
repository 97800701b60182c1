package main

// The first, reflection-based request builder: the reference the
// hand-written encoder in request.go is checked against (FuzzBuildRequest).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"adhost/abi"
)

// Chat Completions request shapes
// (https://platform.openai.com/docs/api-reference/chat/create). Field order
// is the order of the struct, so requests are byte-stable for transcripts.

type refChatRequest struct {
	Model               string             `json:"model"`
	Messages            []refChatMessage   `json:"messages"`
	Tools               []refChatTool      `json:"tools,omitempty"`
	Stream              bool               `json:"stream"`
	StreamOptions       *refStreamOptions  `json:"stream_options,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	ResponseFormat      *refResponseFormat `json:"response_format,omitempty"`
}

type refStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// refChatMessage is a system, user, assistant or tool message. Content is a
// pointer so an assistant turn that only calls tools sends "content": null,
// as OpenAI's own clients do.
type refChatMessage struct {
	Role       string            `json:"role"`
	Content    *string           `json:"content"`
	ToolCalls  []refChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type refChatToolCall struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function refChatFunction `json:"function"`
}

type refChatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, as a string
}

type refChatTool struct {
	Type     string          `json:"type"`
	Function refToolFunction `json:"function"`
}

type refToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type refResponseFormat struct {
	Type       string        `json:"type"`
	JSONSchema refJSONSchema `json:"json_schema"`
}

// refJSONSchema is the json_schema response format. Strict is false: strict
// mode accepts only a subset of JSON Schema (every property required, no
// additionalProperties true …) and the host validates the final text
// against the run's full schema anyway.
type refJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// refBuildRequest translates one turn into a Chat Completions request body.
func refBuildRequest(cfg *config, in *abi.CompleteInput) ([]byte, error) {
	if in.Model == "" {
		return nil, errors.New("model is empty")
	}
	req := refChatRequest{
		Model:    in.Model,
		Messages: make([]refChatMessage, 0, len(in.Messages)+1),
		Stream:   true,
	}
	if cfg.includeUsage {
		req.StreamOptions = &refStreamOptions{IncludeUsage: true}
	}
	if in.MaxOutputTokens > 0 {
		if cfg.maxTokensField == maxTokens {
			req.MaxTokens = in.MaxOutputTokens
		} else {
			req.MaxCompletionTokens = in.MaxOutputTokens
		}
	}
	if in.Instructions != "" {
		req.Messages = append(req.Messages, refChatMessage{Role: "system", Content: refPtr(in.Instructions)})
	}
	for i := range in.Messages {
		m := &in.Messages[i]
		switch m.Role {
		case abi.RoleUser:
			req.Messages = append(req.Messages, refChatMessage{Role: "user", Content: refPtr(m.Content)})
		case abi.RoleAssistant:
			cm := refChatMessage{Role: "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				cm.Content = refPtr(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args, err := refCompactObject(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: tool call %s: %w", i, tc.ID, err)
				}
				cm.ToolCalls = append(cm.ToolCalls, refChatToolCall{
					ID: tc.ID, Type: "function", Function: refChatFunction{Name: tc.Name, Arguments: args},
				})
			}
			req.Messages = append(req.Messages, cm)
		case abi.RoleTool:
			req.Messages = append(req.Messages, refChatMessage{Role: "tool", Content: refPtr(m.Content), ToolCallID: m.ToolCallID})
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for _, t := range in.Tools {
		params := t.InputSchema
		if len(bytes.TrimSpace(params)) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		req.Tools = append(req.Tools, refChatTool{Type: "function", Function: refToolFunction{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	if cfg.structuredOutput && len(bytes.TrimSpace(in.OutputSchema)) > 0 {
		req.ResponseFormat = &refResponseFormat{Type: "json_schema", JSONSchema: refJSONSchema{
			Name: "output", Schema: in.OutputSchema,
		}}
	}
	return json.Marshal(&req)
}

func refPtr(s string) *string { return &s }

// refCompactObject returns a tool call's arguments as compact JSON text.
func refCompactObject(raw json.RawMessage) (string, error) {
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

// FuzzBuildRequest checks the hand-written encoder against the
// encoding/json reference: the same JSON value for any text in the turn.
func FuzzBuildRequest(f *testing.F) {
	f.Add("gpt-4o", "Be terse.", "Hello \"world\" \\ \n\t\u2028 é \x01", "call_1", "lookup", `{"value": 7}`, "Looks up.", `{"type":"object"}`, false)
	f.Add("m", "", "\xff\xfe bad utf8", "", "", ``, "", ``, true)
	f.Fuzz(func(t *testing.T, model, instr, text, callID, name, args, desc, schema string, legacy bool) {
		cfg := &config{endpoint: DefaultEndpoint, maxTokensField: maxCompletionTokens, structuredOutput: true, includeUsage: !legacy}
		if legacy {
			cfg.maxTokensField = maxTokens
		}
		in := &abi.CompleteInput{Model: model, Instructions: instr, MaxOutputTokens: len(text) % 5, Step: 1,
			Messages: []abi.Message{
				{Role: abi.RoleUser, Content: text},
				{Role: abi.RoleAssistant, Content: text[:len(text)/2]},
			}}
		if json.Valid([]byte(args)) {
			in.Messages = append(in.Messages,
				abi.Message{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{{ID: callID, Name: name, Arguments: json.RawMessage(args)}}},
				abi.Message{Role: abi.RoleTool, Content: text, ToolCallID: callID, Name: name})
		}
		if json.Valid([]byte(schema)) {
			in.Tools = []abi.ToolDef{{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}}
			in.OutputSchema = json.RawMessage(schema)
		}
		got, gerr := buildRequest(cfg, in)
		want, werr := refBuildRequest(cfg, in)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("errors differ: %v vs %v", gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %s", got)
		}
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("requests differ:\n got %s\nwant %s", got, want)
		}
	})
}
