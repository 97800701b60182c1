package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"adhost/abi"
)

// The request body of models/{model}:streamGenerateContent and
// :generateContent (https://ai.google.dev/api/generate-content). It is built
// once per turn, so encoding/json is fine here; only the per-event path
// avoids reflection.
type generateRequest struct {
	SystemInstruction *content         `json:"systemInstruction,omitempty"`
	Contents          []content        `json:"contents"`
	Tools             []tool           `json:"tools,omitempty"`
	GenerationConfig  generationConfig `json:"generationConfig"`
}

type content struct {
	Role  string `json:"role,omitempty"` // "user" | "model"
	Parts []part `json:"parts"`
}

type part struct {
	Text             string            `json:"text,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	// ThoughtSignature is the opaque signature Gemini attached to a
	// functionCall part; thinking models require it back verbatim.
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
	// InlineData is an attached image or PDF
	// (https://ai.google.dev/gemini-api/docs/image-understanding).
	InlineData *inlineData `json:"inlineData,omitempty"`
}

type inlineData struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"` // standard base64
}

type functionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

// functionDeclaration uses parametersJsonSchema, which takes a JSON Schema as
// is, rather than parameters, which takes Gemini's OpenAPI-subset Schema
// object and rejects keywords it does not know (additionalProperties,
// $schema …) with a 400.
type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens    int             `json:"maxOutputTokens"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
}

// skipSignature is the placeholder Gemini documents for function calls whose
// thought signature is unknown (history the model did not produce in this
// adapter, or a host that did not hand the adapter's native state back):
// https://ai.google.dev/gemini-api/docs/thought-signatures (FAQ). Gemini 3
// answers 400 when the first function call of a model turn comes back
// without any signature.
const skipSignature = "skip_thought_signature_validator"

// errBadInput marks a CompleteInput the adapter cannot translate (the host
// validated it, so this is a host/adapter mismatch, not a user error).
var errBadInput = errors.New("gemini: input cannot be translated")

// buildRequest translates one turn into a generateContent request body.
//
// Mapping:
//   - instructions → systemInstruction;
//   - user → a "user" content with a text part; assistant → a "model"
//     content with a text part (if any) and one functionCall part per call;
//   - tool → a "user" content with a functionResponse part named after the
//     call (Gemini matches responses to calls by name and order, not by id);
//     an object output is the response as is, any other JSON value is
//     wrapped as {"output": value} (the response must be an object);
//   - consecutive contents of one role are merged (parallel calls answered
//     in one content, as Gemini expects); empty contents are dropped;
//   - maxOutputTokens → generationConfig.maxOutputTokens;
//   - outputSchema, on a turn without tools: see structuredConfig.
func buildRequest(in *abi.CompleteInput, mode string, sigs map[string]string) ([]byte, error) {
	if in.MaxOutputTokens < 1 {
		return nil, fmt.Errorf("%w: maxOutputTokens %d", errBadInput, in.MaxOutputTokens)
	}
	req := generateRequest{GenerationConfig: generationConfig{MaxOutputTokens: in.MaxOutputTokens}}
	if in.Instructions != "" {
		req.SystemInstruction = &content{Parts: []part{{Text: in.Instructions}}}
	}
	names := map[string]string{} // call id → function name, for tool messages without a name
	for i := range in.Messages {
		m := &in.Messages[i]
		var role string
		var parts []part
		switch m.Role {
		case abi.RoleUser:
			role = "user"
			if m.Content != "" {
				parts = append(parts, part{Text: m.Content})
			}
			// Attached files (wire-context §7): each label as a text part,
			// then the file as inlineData.
			for _, p := range m.Parts {
				switch p.Type {
				case abi.PartText:
					parts = append(parts, part{Text: p.Text})
				case abi.PartImage, abi.PartPDF:
					parts = append(parts, part{InlineData: &inlineData{MimeType: p.MediaType, Data: p.Data}})
				default:
					return nil, fmt.Errorf("%w: part type %q", errBadInput, p.Type)
				}
			}
		case abi.RoleAssistant:
			role = "model"
			if m.Content != "" {
				parts = append(parts, part{Text: m.Content})
			}
			first := true
			for _, tc := range m.ToolCalls {
				if tc.Name == "" {
					return nil, fmt.Errorf("%w: tool call without name", errBadInput)
				}
				names[tc.ID] = tc.Name
				p := part{FunctionCall: &functionCall{Name: tc.Name, Args: objectOrEmpty(tc.Arguments)}}
				if s, ok := sigs[tc.ID]; ok {
					p.ThoughtSignature = s
				} else if first {
					// Only the first call of a parallel batch carries a
					// signature; give it the documented placeholder.
					p.ThoughtSignature = skipSignature
				}
				first = false
				parts = append(parts, p)
			}
		case abi.RoleTool:
			role = "user"
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			if name == "" {
				return nil, fmt.Errorf("%w: tool message without a function name", errBadInput)
			}
			parts = append(parts, part{FunctionResponse: &functionResponse{Name: name, Response: responseObject(m.Content)}})
		default:
			return nil, fmt.Errorf("%w: role %q", errBadInput, m.Role)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(req.Contents); n > 0 && req.Contents[n-1].Role == role {
			req.Contents[n-1].Parts = append(req.Contents[n-1].Parts, parts...)
			continue
		}
		req.Contents = append(req.Contents, content{Role: role, Parts: parts})
	}
	if len(in.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(in.Tools))
		for _, t := range in.Tools {
			decls = append(decls, functionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: schemaOrObject(t.InputSchema)})
		}
		req.Tools = []tool{{FunctionDeclarations: decls}}
	} else if len(in.OutputSchema) > 0 {
		req.GenerationConfig.ResponseMimeType, req.GenerationConfig.ResponseJSONSchema = structuredConfig(in.OutputSchema, mode)
	}
	return json.Marshal(&req)
}

// Structured-output modes of settings.structuredOutput.
const (
	structuredAuto = "auto"
	structuredMime = "mime"
	structuredOff  = "off"
)

// structuredConfig decides how a run's outputSchema reaches Gemini. It is
// only used on turns without tools: a JSON response MIME type together with
// function calling is refused by several Gemini models, and the host
// validates the final text against the schema either way.
//
//   - auto: responseMimeType "application/json", plus responseJsonSchema when
//     every keyword of the schema is one Gemini documents as supported for
//     responseJsonSchema (https://ai.google.dev/api/generate-content#generationconfig).
//     A schema using anything else (const, pattern, allOf, not …) is not
//     sent: Gemini would ignore or reject what it does not support, so the
//     model gets only the JSON MIME type and the host's directive.
//   - mime: responseMimeType only.
//   - off: neither.
func structuredConfig(schema json.RawMessage, mode string) (mime string, jsonSchema json.RawMessage) {
	switch mode {
	case structuredOff:
		return "", nil
	case structuredMime:
		return "application/json", nil
	}
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return "application/json", nil
	}
	obj, ok := v.(map[string]any)
	if !ok || !supportedSchema(obj, 0) {
		return "application/json", nil
	}
	delete(obj, "$schema") // dialect marker: not a keyword Gemini lists
	out, err := json.Marshal(obj)
	if err != nil {
		return "application/json", nil
	}
	return "application/json", out
}

// supportedKeywords are the responseJsonSchema keywords Gemini documents
// (plus $schema, which is dropped before sending, and propertyOrdering).
var supportedKeywords = map[string]bool{
	"$id": true, "$defs": true, "$ref": true, "$anchor": true, "$schema": true,
	"type": true, "format": true, "title": true, "description": true,
	"enum": true, "items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"minimum": true, "maximum": true, "anyOf": true, "oneOf": true,
	"properties": true, "additionalProperties": true, "required": true,
	"propertyOrdering": true,
}

// maxSchemaDepth bounds the recursion over a schema (the host bounds the
// request size; this bounds the stack).
const maxSchemaDepth = 64

// supportedSchema reports whether a schema object uses only supported
// keywords, recursively through its subschemas.
func supportedSchema(s map[string]any, depth int) bool {
	if depth > maxSchemaDepth {
		return false
	}
	for k, v := range s {
		if !supportedKeywords[k] {
			return false
		}
		switch k {
		case "properties", "$defs":
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			for _, sub := range m {
				if !subschemaOK(sub, depth) {
					return false
				}
			}
		case "items", "additionalProperties":
			if !subschemaOK(v, depth) {
				return false
			}
		case "prefixItems", "anyOf", "oneOf":
			a, ok := v.([]any)
			if !ok {
				return false
			}
			for _, sub := range a {
				if !subschemaOK(sub, depth) {
					return false
				}
			}
		case "enum":
			a, ok := v.([]any)
			if !ok {
				return false
			}
			for _, e := range a {
				switch e.(type) {
				case string, float64: // "enum (for strings and numbers)"
				default:
					return false
				}
			}
		}
	}
	return true
}

func subschemaOK(v any, depth int) bool {
	switch s := v.(type) {
	case bool:
		return true
	case map[string]any:
		return supportedSchema(s, depth+1)
	}
	return false
}

// responseObject turns the JSON text of a tool output into the object a
// functionResponse needs.
func responseObject(out string) json.RawMessage {
	t := bytes.TrimSpace([]byte(out))
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	if len(t) > 0 && json.Valid(t) {
		return append(append([]byte(`{"output":`), t...), '}')
	}
	q, _ := json.Marshal(out) // a string always marshals
	return append(append([]byte(`{"output":`), q...), '}')
}

// objectOrEmpty returns raw, or {} when raw is empty or JSON null.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// schemaOrObject returns a tool's input schema, or {"type":"object"}.
func schemaOrObject(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}
