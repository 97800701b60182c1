package vendorsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// anthropic simulates the Anthropic Messages API
// (https://docs.anthropic.com/en/api/messages, streaming:
// https://docs.anthropic.com/en/docs/build-with-claude/streaming, errors:
// https://docs.anthropic.com/en/api/errors, models:
// https://docs.anthropic.com/en/api/models-list).
//
// It checks the request rules the real API enforces and an adapter is most
// likely to get wrong, answering a 400 invalid_request_error as the API
// would: max_tokens present, the first message from the user, roles
// alternating and limited to user and assistant (no "system" role), no empty text blocks, every tool_use
// answered by a tool_result in the next user message, tool_result blocks
// first in their message, tool_result ids that name a preceding tool_use.
type anthropic struct{}

func init() { Register(anthropic{}) }

// AnthropicVersion is the anthropic-version the simulator requires, as the
// real API does (a request without it is a 400).
const AnthropicVersion = "2023-06-01"

func (anthropic) Name() string     { return "anthropic" }
func (anthropic) BasePath() string { return "/v1/" }

func (anthropic) Credential() (header, prefix string) { return "x-api-key", "" }

func (anthropic) Route(r *http.Request) Route {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		return RouteGenerate
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		return RouteModels
	}
	return RouteNotFound
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // string or blocks
}

type anthropicRequest struct {
	Model        string                  `json:"model"`
	MaxTokens    *int                    `json:"max_tokens"`
	System       json.RawMessage         `json:"system"`
	Messages     []anthropicMessage      `json:"messages"`
	Stream       bool                    `json:"stream"`
	Tools        []struct{ Name string } `json:"tools"`
	OutputFormat json.RawMessage         `json:"output_format"`
}

func (anthropic) ParsePrompt(r *http.Request, body []byte) (*Prompt, error) {
	if r.Header.Get("anthropic-version") == "" {
		return nil, errors.New("anthropic-version: header is required")
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("content-type %q is not application/json", ct)
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid JSON body: %v", err)
	}
	if req.Model == "" {
		return nil, errors.New("model: Field required")
	}
	if req.MaxTokens == nil || *req.MaxTokens < 1 {
		return nil, errors.New("max_tokens: Field required")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	p := &Prompt{Model: req.Model, Stream: req.Stream, MaxTokens: *req.MaxTokens, Schema: len(req.OutputFormat) > 0}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, t.Name)
	}
	var pendingToolUse map[string]bool // tool_use ids of the previous assistant message
	seenToolUse := map[string]bool{}
	prevRole := ""
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && m.Role != "user" {
			return nil, errors.New(`messages: first message must use the "user" role`)
		}
		if m.Role == prevRole {
			return nil, fmt.Errorf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		prevRole = m.Role
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %v", i, err)
		}
		if len(blocks) == 0 {
			return nil, fmt.Errorf("messages.%d: all messages must have non-empty content", i)
		}
		var text []string
		toolUses := map[string]bool{}
		answered := map[string]bool{}
		seenOther := false
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return nil, fmt.Errorf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
				text = append(text, *b.Text)
				seenOther = true
			case "tool_use":
				if m.Role != "assistant" {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
				}
				if b.ID == "" || b.Name == "" || !anthropicIsObject(b.Input) {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_use needs id, name and an object input", i, j)
				}
				if seenToolUse[b.ID] {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_use ids must be unique", i, j)
				}
				seenToolUse[b.ID] = true
				toolUses[b.ID] = true
			case "tool_result":
				if m.Role != "user" {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_result blocks are only allowed in user messages", i, j)
				}
				if seenOther {
					return nil, fmt.Errorf("messages.%d: tool_result blocks must come first in the content", i)
				}
				if !pendingToolUse[b.ToolUseID] {
					return nil, fmt.Errorf("messages.%d.content.%d: unexpected tool_use_id found in tool_result blocks: %s. Each tool_result block must have a corresponding tool_use block in the previous message", i, j, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
				p.ToolResults = append(p.ToolResults, ToolResult{CallID: b.ToolUseID, Content: anthropicResultText(b.Content)})
			default:
				return nil, fmt.Errorf("messages.%d.content.%d.type: unsupported block type %q", i, j, b.Type)
			}
		}
		if m.Role == "user" {
			for id := range pendingToolUse {
				if !answered[id] {
					return nil, fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
				}
			}
			if len(text) > 0 {
				p.LastUser = strings.Join(text, "\n")
			}
		}
		pendingToolUse = toolUses
	}
	if prevRole == "assistant" && len(pendingToolUse) > 0 {
		return nil, errors.New("messages: the final assistant message has tool_use blocks without results")
	}
	return p, nil
}

// anthropicBlocks decodes a message content: a string is one text block.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: &s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errors.New("must be a string or a list of content blocks")
	}
	return blocks, nil
}

// anthropicResultText is the text of a tool_result content: a string, or
// the concatenated text blocks.
func anthropicResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" && bl.Text != nil {
			b.WriteString(*bl.Text)
		}
	}
	return b.String()
}

func anthropicIsObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// anthropicErrorType is the error type the API uses for a status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

func (anthropic) WriteError(w http.ResponseWriter, e *HTTPError) {
	typ := e.Type
	if typ == "" || typ == "server_error" {
		typ = anthropicErrorType(e.Status)
	}
	body, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": e.Message},
		"request_id": "req_vendorsim",
	})
	if e.RetryAfter != "" {
		w.Header().Set("retry-after", e.RetryAfter)
	}
	w.Header().Set("request-id", "req_vendorsim")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(body)
}

// anthropicStop maps a vendor-neutral finish to stop_reason.
func anthropicStop(f Finish) string {
	switch f {
	case FinishLength:
		return "max_tokens"
	case FinishToolCalls:
		return "tool_use"
	case FinishRefusal:
		return "refusal"
	}
	return "end_turn"
}

// anthropicUsage renders a Usage the Anthropic way: input_tokens excludes
// the cached parts (read and creation), output_tokens includes thinking.
// Fields the Usage does not report are omitted.
func anthropicUsage(u *Usage, withInput bool) map[string]int64 {
	m := map[string]int64{}
	if u == nil {
		return m
	}
	if withInput && u.Input != nil {
		in := *u.Input
		if u.CachedInput != nil {
			m["cache_read_input_tokens"] = *u.CachedInput
			in -= *u.CachedInput
		}
		if u.CacheCreation != nil {
			m["cache_creation_input_tokens"] = *u.CacheCreation
			in -= *u.CacheCreation
		}
		m["input_tokens"] = in
	}
	if u.Output != nil {
		m["output_tokens"] = *u.Output
	}
	return m
}

func (a anthropic) WriteReply(rw *ReplyWriter, p *Prompt, rep *Reply) {
	if !p.Stream {
		a.writeMessage(rw, p, rep)
		return
	}
	ev := func(name string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return rw.Event(name, b)
	}
	msg := map[string]any{
		"id": "msg_vendorsim", "type": "message", "role": "assistant", "content": []any{},
		"model": p.Model, "stop_reason": nil, "stop_sequence": nil,
	}
	if rep.Usage != nil {
		u := anthropicUsage(rep.Usage, true)
		u["output_tokens"] = 1 // the API reports a running count here
		msg["usage"] = u
	}
	if !ev("message_start", map[string]any{"type": "message_start", "message": msg}) {
		return
	}
	index := 0
	if len(rep.Chunks) > 0 || rep.PadBytes > 0 {
		if !ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}) {
			return
		}
		if !ev("ping", map[string]string{"type": "ping"}) {
			return
		}
		for i, c := range rep.Chunks {
			if !ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]string{"type": "text_delta", "text": c}}) {
				return
			}
			if rep.Hold && i == 0 {
				rw.Hold()
				return
			}
		}
		if rep.PadBytes > 0 {
			pad, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]string{"type": "text_delta", "text": strings.Repeat("x", 4000)}})
			for rw.Written() < rep.PadBytes {
				if !rw.Event("content_block_delta", pad) {
					return
				}
			}
		}
		if rep.Truncate || rep.StreamError != "" {
			a.endEarly(rw, rep)
			return
		}
		if !ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) {
			return
		}
		index++
	}
	for _, tc := range rep.ToolCalls {
		if !ev("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}}) {
			return
		}
		frags := append([]string{""}, tc.Args...) // the API opens with an empty fragment
		for i, f := range frags {
			if !ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": f}}) {
				return
			}
			if rep.Hold && i == 1 {
				rw.Hold()
				return
			}
		}
		if !ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": index}) {
			return
		}
		index++
	}
	if rep.Truncate || rep.StreamError != "" {
		a.endEarly(rw, rep)
		return
	}
	delta := map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStop(rep.FinishOf()), "stop_sequence": nil}}
	if rep.Usage != nil {
		delta["usage"] = anthropicUsage(rep.Usage, false)
	}
	if !ev("message_delta", delta) {
		return
	}
	ev("message_stop", map[string]string{"type": "message_stop"})
}

// endEarly ends a stream the faulty way: an in-stream error event, or just
// the end of the body.
func (anthropic) endEarly(rw *ReplyWriter, rep *Reply) {
	if rep.StreamError != "" {
		b, _ := json.Marshal(map[string]any{"type": "error",
			"error": map[string]string{"type": "api_error", "message": rep.StreamError}})
		rw.Event("error", b)
	}
}

// writeMessage answers a non-streamed request with a Message object.
func (anthropic) writeMessage(rw *ReplyWriter, p *Prompt, rep *Reply) {
	var content []any
	if t := rep.Text(); t != "" {
		content = append(content, map[string]any{"type": "text", "text": t})
	}
	for _, tc := range rep.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name,
			"input": json.RawMessage(tc.ArgsText())})
	}
	if content == nil {
		content = []any{}
	}
	msg := map[string]any{
		"id": "msg_vendorsim", "type": "message", "role": "assistant", "content": content,
		"model": p.Model, "stop_reason": anthropicStop(rep.FinishOf()), "stop_sequence": nil,
	}
	if rep.Usage != nil {
		msg["usage"] = anthropicUsage(rep.Usage, true)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		rw.JSON(500, []byte(`{"type":"error","error":{"type":"api_error","message":"bad tool arguments"}}`))
		return
	}
	rw.JSON(200, b)
}

// WriteModels serves GET /v1/models: limit (1..1000, default 20), after_id
// and before_id cursors; the page carries data, has_more, first_id, last_id.
func (anthropic) WriteModels(w http.ResponseWriter, r *http.Request, models []string, pageSize int) {
	q := r.URL.Query()
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			anthropic{}.WriteError(w, &HTTPError{Status: 400, Message: "limit: Input should be between 1 and 1000"})
			return
		}
		limit = n
	}
	limit = min(limit, pageSize)
	start := 0
	if after := q.Get("after_id"); after != "" {
		i := anthropicIndexOf(models, after)
		if i < 0 {
			anthropic{}.WriteError(w, &HTTPError{Status: 400, Message: "after_id: unknown model id"})
			return
		}
		start = i + 1
	}
	end := min(start+limit, len(models))
	data := []any{}
	for _, id := range models[start:end] {
		data = append(data, map[string]string{"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"})
	}
	page := map[string]any{"data": data, "has_more": end < len(models), "first_id": nil, "last_id": nil}
	if end > start {
		page["first_id"], page["last_id"] = models[start], models[end-1]
	}
	b, _ := json.Marshal(page)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func anthropicIndexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
