package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// buildRequest translates one turn into a Chat Completions request body
// (https://platform.openai.com/docs/api-reference/chat/create):
//
//	{"model", "messages": [system?, user/assistant/tool …], "tools"?,
//	 "stream": true, "stream_options"?, "max_completion_tokens" | "max_tokens",
//	 "response_format"?}
//
// It appends JSON by hand: encoding/json's reflection costs more guest CPU
// per turn than a short reply's whole stream, and the shape is fixed.
// Schemas and tool arguments arrive as JSON the host already validated and
// are copied as they are. request_ref_test.go keeps the encoding/json
// version the fuzz test compares this one with.
func buildRequest(cfg *config, in *abi.CompleteInput) ([]byte, error) {
	return appendRequest(nil, cfg, in)
}

// appendRequest is buildRequest appending to dst (which Complete reuses
// across turns: the host copies the body during http_start).
func appendRequest(dst []byte, cfg *config, in *abi.CompleteInput) ([]byte, error) {
	if in.Model == "" {
		return nil, errors.New("model is empty")
	}
	b := dst[:0]
	if n := 512 + estimate(in); cap(b) < n {
		b = make([]byte, 0, n)
	}
	b = append(b, `{"model":`...)
	b = jsonscan.AppendQuote(b, in.Model)
	b = append(b, `,"messages":[`...)
	// No separator closure: in the sandbox its call per message and the
	// buffer it captures by reference cost more than the test.
	if in.Instructions != "" {
		b = append(b, `{"role":"system","content":`...)
		b = jsonscan.AppendQuote(b, in.Instructions)
		b = append(b, '}')
	}
	for i := range in.Messages {
		m := &in.Messages[i]
		if i > 0 || in.Instructions != "" {
			b = append(b, ',')
		}
		switch m.Role {
		case abi.RoleUser:
			b = append(b, `{"role":"user","content":`...)
			if len(m.Parts) == 0 {
				b = jsonscan.AppendQuote(b, m.Content)
				break
			}
			var err error
			if b, err = appendUserParts(b, m); err != nil {
				return nil, err
			}
		case abi.RoleAssistant:
			// An assistant turn that only called tools sends content null,
			// as OpenAI's own clients do.
			b = append(b, `{"role":"assistant","content":`...)
			if m.Content != "" || len(m.ToolCalls) == 0 {
				b = jsonscan.AppendQuote(b, m.Content)
			} else {
				b = append(b, "null"...)
			}
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for j, tc := range m.ToolCalls {
					args, err := compactObject(tc.Arguments)
					if err != nil {
						return nil, fmt.Errorf("messages[%d]: tool call %s: %w", i, tc.ID, err)
					}
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = jsonscan.AppendQuote(b, tc.ID)
					b = append(b, `,"type":"function","function":{"name":`...)
					b = jsonscan.AppendQuote(b, tc.Name)
					b = append(b, `,"arguments":`...)
					b = jsonscan.AppendQuote(b, args)
					b = append(b, "}}"...)
				}
				b = append(b, ']')
			}
		case abi.RoleTool:
			b = append(b, `{"role":"tool","content":`...)
			b = jsonscan.AppendQuote(b, m.Content)
			if m.ToolCallID != "" {
				b = append(b, `,"tool_call_id":`...)
				b = jsonscan.AppendQuote(b, m.ToolCallID)
			}
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if len(in.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range in.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = jsonscan.AppendQuote(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = jsonscan.AppendQuote(b, t.Description)
			}
			b = append(b, `,"parameters":`...)
			if params := bytes.TrimSpace(t.InputSchema); len(params) > 0 {
				b = append(b, params...)
			} else {
				b = append(b, `{"type":"object"}`...)
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if in.Buffered {
		// Nothing reads the text as it arrives: one JSON answer costs
		// the sandbox far less than a stream of chunks (and usage comes
		// with it).
		b = append(b, `,"stream":false`...)
	} else {
		b = append(b, `,"stream":true`...)
		if cfg.includeUsage {
			b = append(b, `,"stream_options":{"include_usage":true}`...)
		}
	}
	if in.MaxOutputTokens > 0 {
		if cfg.maxTokensField == maxTokens {
			b = append(b, `,"max_tokens":`...)
		} else {
			b = append(b, `,"max_completion_tokens":`...)
		}
		b = strconv.AppendInt(b, int64(in.MaxOutputTokens), 10)
	}
	// Strict is false: strict mode accepts only a subset of JSON Schema
	// (every property required, no additionalProperties true …) and the host
	// validates the final text against the run's full schema anyway.
	if schema := bytes.TrimSpace(in.OutputSchema); cfg.structuredOutput && len(schema) > 0 {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":`...)
		b = append(b, schema...)
		b = append(b, `,"strict":false}}`...)
	}
	return append(b, '}'), nil
}

// appendUserParts writes a user turn with attached files as a Chat
// Completions content array (wire-context §7): the text, then each part —
// labels as text parts, images as data-URL image_url parts. Chat
// Completions has no inline PDF part: a PDF that reaches the adapter
// (configuration refuses it) fails the run with UNSUPPORTED_MODALITY.
func appendUserParts(b []byte, m *abi.Message) ([]byte, error) {
	b = append(b, `[{"type":"text","text":`...)
	b = jsonscan.AppendQuote(b, m.Content)
	b = append(b, '}')
	for _, p := range m.Parts {
		switch p.Type {
		case abi.PartText:
			b = append(b, `,{"type":"text","text":`...)
			b = jsonscan.AppendQuote(b, p.Text)
			b = append(b, '}')
		case abi.PartImage:
			b = append(b, `,{"type":"image_url","image_url":{"url":`...)
			b = jsonscan.AppendQuote(b, "data:"+p.MediaType+";base64,"+p.Data)
			b = append(b, "}}"...)
		default:
			return nil, &sdk.Error{Code: codeUnsupportedModality, Message: "chat completions cannot carry " + p.MediaType}
		}
	}
	return append(b, ']'), nil
}

// codeUnsupportedModality is wire-context's code for a file type the
// vendor API cannot take.
const codeUnsupportedModality = "UNSUPPORTED_MODALITY"

// estimate sizes the request buffer from the input's text.
func estimate(in *abi.CompleteInput) int {
	n := len(in.Instructions) + len(in.OutputSchema)
	for i := range in.Messages {
		n += len(in.Messages[i].Content) + 64
		for _, p := range in.Messages[i].Parts {
			n += len(p.Text) + len(p.Data) + len(p.MediaType) + 64
		}
		for _, tc := range in.Messages[i].ToolCalls {
			n += len(tc.Arguments) + 96
		}
	}
	for _, t := range in.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema) + 64
	}
	return n
}

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
