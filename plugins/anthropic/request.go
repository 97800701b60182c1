package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"adhost/abi"
)

// The request body of POST {endpoint}messages
// (https://docs.anthropic.com/en/api/messages). It is built once per turn,
// so encoding/json is fine here; only the per-event path avoids reflection.
type messagesRequest struct {
	Model     string       `json:"model"`
	MaxTokens int          `json:"max_tokens"`
	System    string       `json:"system,omitempty"`
	Messages  []apiMessage `json:"messages"`
	Tools     []apiTool    `json:"tools,omitempty"`
	Stream    bool         `json:"stream"`
}

type apiMessage struct {
	Role    string     `json:"role"` // "user" | "assistant"
	Content []apiBlock `json:"content"`
}

// apiBlock is one content block: text, tool_use (assistant) or tool_result
// (user). Fields not used by a type are omitted.
type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content of a tool_result: the JSON text of the tool output as a string
	// block (Anthropic accepts a string or content blocks).
	Content *string `json:"content,omitempty"`
	// Source of an image or document block: the attached file inline.
	Source *apiSource `json:"source,omitempty"`
}

// apiSource is a base64 image or document source
// (https://docs.anthropic.com/en/docs/build-with-claude/vision,
// .../pdf-support).
type apiSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type apiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// errBadInput marks a CompleteInput the adapter cannot translate (the host
// validated it, so this is a host/adapter mismatch, not a user error).
var errBadInput = errors.New("anthropic: input cannot be translated")

// buildRequest translates one turn into a Messages API request body.
//
// Mapping (wire-extensions §10.3):
//   - instructions → top-level "system" (the Messages API has no system role);
//   - user → a user message with one text block;
//   - assistant → text block (if any) then one tool_use block per call;
//   - tool → a user message with a tool_result block (tool_use_id = call id,
//     content = the JSON text of the output);
//   - consecutive messages of one role are merged into one message, which
//     Anthropic requires (roles must alternate), and inside a merged user
//     message tool_result blocks come before text, as Anthropic requires;
//   - empty text blocks are dropped (Anthropic rejects them) and a message
//     left without blocks is dropped;
//   - maxOutputTokens → max_tokens (required by the API);
//   - outputSchema is not sent: the classic Messages API has no JSON-schema
//     response format, so structured output relies on the host's JSON
//     directive in the instructions and the host's validation.
func buildRequest(in *abi.CompleteInput) ([]byte, error) {
	if in.MaxOutputTokens < 1 {
		return nil, fmt.Errorf("%w: maxOutputTokens %d", errBadInput, in.MaxOutputTokens)
	}
	req := messagesRequest{
		Model:     in.Model,
		MaxTokens: in.MaxOutputTokens,
		System:    in.Instructions,
		Stream:    true,
	}
	for i := range in.Messages {
		m := &in.Messages[i]
		var role string
		var blocks []apiBlock
		switch m.Role {
		case abi.RoleUser:
			role = "user"
			if m.Content != "" {
				blocks = append(blocks, apiBlock{Type: "text", Text: m.Content})
			}
			// Attached files (wire-context §7): each label as a text block,
			// then the file as an image or document block.
			for _, p := range m.Parts {
				switch p.Type {
				case abi.PartText:
					blocks = append(blocks, apiBlock{Type: "text", Text: p.Text})
				case abi.PartImage, abi.PartPDF:
					typ := "image"
					if p.Type == abi.PartPDF {
						typ = "document"
					}
					blocks = append(blocks, apiBlock{Type: typ, Source: &apiSource{Type: "base64", MediaType: p.MediaType, Data: p.Data}})
				default:
					return nil, fmt.Errorf("%w: part type %q", errBadInput, p.Type)
				}
			}
		case abi.RoleAssistant:
			role = "assistant"
			if m.Content != "" {
				blocks = append(blocks, apiBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, fmt.Errorf("%w: tool call without id or name", errBadInput)
				}
				blocks = append(blocks, apiBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: objectOrEmpty(tc.Arguments)})
			}
		case abi.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%w: tool message without call id", errBadInput)
			}
			role = "user"
			content := m.Content
			blocks = append(blocks, apiBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: &content})
		default:
			return nil, fmt.Errorf("%w: role %q", errBadInput, m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
			continue
		}
		req.Messages = append(req.Messages, apiMessage{Role: role, Content: blocks})
	}
	for i := range req.Messages {
		if req.Messages[i].Role == "user" {
			toolResultsFirst(req.Messages[i].Content)
		}
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, apiTool{Name: t.Name, Description: t.Description, InputSchema: schemaOrObject(t.InputSchema)})
	}
	return json.Marshal(&req)
}

// toolResultsFirst moves tool_result blocks before the other blocks of a
// user message, keeping the relative order of both groups.
func toolResultsFirst(blocks []apiBlock) {
	sorted := true
	seenOther := false
	for _, b := range blocks {
		if b.Type != "tool_result" {
			seenOther = true
		} else if seenOther {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	out := make([]apiBlock, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			out = append(out, b)
		}
	}
	copy(blocks, out)
}

// objectOrEmpty returns raw, or {} when raw is empty or JSON null (a tool
// call without arguments, a tool without a schema).
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// schemaOrObject returns a tool's input schema, or {"type":"object"} when it
// has none (Anthropic requires input_schema to be an object schema).
func schemaOrObject(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}
