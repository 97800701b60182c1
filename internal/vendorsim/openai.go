package vendorsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat),
// the format every OpenAI-compatible server (vLLM, llama.cpp, Ollama, …)
// speaks:
//
//   - POST /v1/chat/completions, Authorization: Bearer <key>.
//   - Streaming: data-only SSE of chat.completion.chunk objects; the first
//     delta carries the role, then content or tool_calls fragments (a tool
//     call's first fragment has index, id, type and function.name, later
//     ones only index and function.arguments), a chunk with finish_reason,
//     with stream_options.include_usage an extra chunk with "choices":[] and
//     the usage (every other chunk then has "usage":null), then
//     "data: [DONE]".
//   - An error mid-stream is a data line holding {"error":{…}}.
//   - HTTP errors: {"error":{"message","type","param","code"}}.
//   - GET /v1/models: {"object":"list","data":[{"id","object":"model",
//     "created","owned_by"}]}. OpenAI does not paginate it; for lists longer
//     than the page size the simulator uses OpenAI's cursor convention of its
//     other list endpoints (limit, after → first_id, last_id, has_more) so
//     adapters that follow it can be tested.
func init() { Register(openAI{}) }

type openAI struct{}

var openAISeq atomic.Int64

func (openAI) Name() string                        { return "openai" }
func (openAI) BasePath() string                    { return "/v1/" }
func (openAI) Credential() (header, prefix string) { return "Authorization", "Bearer " }

func (openAI) Route(r *http.Request) Route {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		return RouteGenerate
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		return RouteModels
	}
	return RouteNotFound
}

// OpenAIRequest is the subset of a Chat Completions request the simulator
// reads.
type OpenAIRequest struct {
	Model         string          `json:"model"`
	Messages      []OpenAIMessage `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	} `json:"response_format"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// OpenAIMessage is one message of a Chat Completions request.
type OpenAIMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text returns a message's content: a string, or the text parts of an
// array of content parts.
func (m *OpenAIMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

func (openAI) ParsePrompt(r *http.Request, body []byte) (*Prompt, error) {
	var req OpenAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if req.Model == "" {
		return nil, errors.New("you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("'messages' must contain at least one message")
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, errors.New("the 'stream_options' parameter is only allowed when 'stream' is enabled")
	}
	p := &Prompt{Model: req.Model, Stream: req.Stream, MaxTokens: req.MaxCompletionTokens}
	if p.MaxTokens == 0 {
		p.MaxTokens = req.MaxTokens
	}
	if req.ResponseFormat != nil {
		switch req.ResponseFormat.Type {
		case "json_schema":
			if len(req.ResponseFormat.JSONSchema) == 0 {
				return nil, errors.New("response_format json_schema requires json_schema")
			}
			p.Schema = true
		case "json_object", "text":
		default:
			return nil, fmt.Errorf("invalid response_format type %q", req.ResponseFormat.Type)
		}
	}
	for _, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, errors.New("tools must be of type function with a name")
		}
		p.Tools = append(p.Tools, t.Function.Name)
	}
	// OpenAI rejects a tool message that does not answer a tool call of
	// the assistant message before it; so does the simulator.
	pending := map[string]string{}
	for i := range req.Messages {
		m := &req.Messages[i]
		txt, err := m.text()
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %v", i, err)
		}
		switch m.Role {
		case "system", "developer":
		case "user":
			p.LastUser = txt
		case "assistant":
			pending = map[string]string{}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
					return nil, fmt.Errorf("messages[%d].tool_calls: id, type function and name are required", i)
				}
				if !json.Valid([]byte(tc.Function.Arguments)) {
					return nil, fmt.Errorf("messages[%d].tool_calls: arguments must be a JSON string", i)
				}
				pending[tc.ID] = tc.Function.Name
			}
		case "tool":
			name, ok := pending[m.ToolCallID]
			if !ok {
				return nil, fmt.Errorf("messages with role 'tool' must be a response to a preceding message with 'tool_calls' (messages[%d])", i)
			}
			p.ToolResults = append(p.ToolResults, ToolResult{CallID: m.ToolCallID, Name: name, Content: txt})
		default:
			return nil, fmt.Errorf("messages[%d]: invalid role %q", i, m.Role)
		}
	}
	p.Detail = openAIDetail{includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	return p, nil
}

func (openAI) WriteError(w http.ResponseWriter, e *HTTPError) {
	typ, code := e.Type, e.Code
	if typ == "" {
		switch {
		case e.Status == 429:
			typ, code = "requests", "rate_limit_exceeded"
		case e.Status == 401:
			typ, code = "invalid_request_error", "invalid_api_key"
		case e.Status == 404:
			typ, code = "invalid_request_error", "unknown_url"
		case e.Status >= 500:
			typ = "server_error"
		default:
			typ = "invalid_request_error"
		}
	}
	body := map[string]any{"error": map[string]any{
		"message": e.Message, "type": typ, "param": nil, "code": nullable(code),
	}}
	b, _ := json.Marshal(body)
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_sim")
	w.WriteHeader(e.Status)
	w.Write(b)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func openAIFinish(f Finish) string {
	switch f {
	case FinishLength:
		return "length"
	case FinishToolCalls:
		return "tool_calls"
	case FinishRefusal:
		return "content_filter"
	}
	return "stop"
}

func openAIUsage(u *Usage) map[string]any {
	m := map[string]any{}
	var in, out int64
	if u.Input != nil {
		in = *u.Input
		m["prompt_tokens"] = in
	}
	if u.Output != nil {
		out = *u.Output
		m["completion_tokens"] = out
	}
	m["total_tokens"] = in + out
	if u.CachedInput != nil {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": *u.CachedInput, "audio_tokens": 0}
	}
	if u.Reasoning != nil {
		m["completion_tokens_details"] = map[string]any{
			"reasoning_tokens": *u.Reasoning, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		}
	}
	return m
}

// openAIDetail is the Prompt.Detail of an OpenAI request.
type openAIDetail struct{ includeUsage bool }

// openAIChunk is a chat.completion.chunk being built.
type openAIChunk struct {
	id, model    string
	includeUsage bool
}

func (c *openAIChunk) encode(delta map[string]any, finish string) []byte {
	choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nullable(finish)}
	m := map[string]any{
		"id": c.id, "object": "chat.completion.chunk", "created": 1767225600, "model": c.model,
		"system_fingerprint": "fp_vendorsim", "choices": []any{choice},
	}
	if c.includeUsage {
		m["usage"] = nil
	}
	b, _ := json.Marshal(m)
	return b
}

func (c *openAIChunk) usage(u *Usage) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": c.id, "object": "chat.completion.chunk", "created": 1767225600, "model": c.model,
		"system_fingerprint": "fp_vendorsim", "choices": []any{}, "usage": openAIUsage(u),
	})
	return b
}

func (v openAI) WriteReply(rw *ReplyWriter, p *Prompt, rep *Reply) {
	id := "chatcmpl-sim" + strconv.FormatInt(openAISeq.Add(1), 10)
	if !p.Stream {
		v.writeJSON(rw, p, rep, id)
		return
	}
	c := &openAIChunk{id: id, model: p.Model, includeUsage: p.Detail.(openAIDetail).includeUsage}
	send := func(delta map[string]any, finish string) bool {
		return rw.Event("", c.encode(delta, finish))
	}
	if !send(map[string]any{"role": "assistant", "content": "", "refusal": nil}, "") {
		return
	}
	for i, chunk := range rep.Chunks {
		if !send(map[string]any{"content": chunk}, "") {
			return
		}
		if rep.Hold && i == 0 {
			rw.Hold()
			return
		}
	}
	for i, tc := range rep.ToolCalls {
		head := map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}
		if !send(head, "") {
			return
		}
		for j, frag := range tc.Args {
			if !send(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": frag},
			}}}, "") {
				return
			}
			if rep.Hold && i == 0 && j == 0 {
				rw.Hold()
				return
			}
		}
	}
	if rep.Hold {
		rw.Hold()
		return
	}
	if rep.PadBytes > 0 {
		filler := strings.Repeat("x", 4000)
		for rw.Written() < rep.PadBytes {
			if !send(map[string]any{"content": filler}, "") {
				return
			}
		}
	}
	if rep.StreamError != "" {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": rep.StreamError, "type": "server_error", "param": nil, "code": nil,
		}})
		rw.Event("", b)
		return
	}
	if rep.Truncate {
		return
	}
	if !send(map[string]any{}, openAIFinish(rep.FinishOf())) {
		return
	}
	if c.includeUsage && rep.Usage != nil {
		if !rw.Event("", c.usage(rep.Usage)) {
			return
		}
	}
	rw.Event("", []byte("[DONE]"))
}

func (openAI) writeJSON(rw *ReplyWriter, p *Prompt, rep *Reply, id string) {
	if rep.Hold {
		rw.Hold()
		return
	}
	if rep.StreamError != "" {
		openAI{}.WriteError(rw.w, &HTTPError{Status: 500, Message: rep.StreamError})
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if txt := rep.Text(); txt != "" || len(rep.ToolCalls) == 0 {
		msg["content"] = txt
	}
	if len(rep.ToolCalls) > 0 {
		var calls []any
		for _, tc := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.ArgsText()}})
		}
		msg["tool_calls"] = calls
	}
	m := map[string]any{
		"id": id, "object": "chat.completion", "created": 1767225600, "model": p.Model,
		"system_fingerprint": "fp_vendorsim",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil,
			"finish_reason": openAIFinish(rep.FinishOf())}},
	}
	if rep.Usage != nil {
		m["usage"] = openAIUsage(rep.Usage)
	}
	b, _ := json.Marshal(m)
	if rep.Truncate {
		b = b[:len(b)/2]
	}
	rw.JSON(http.StatusOK, b)
}

func (openAI) WriteModels(w http.ResponseWriter, r *http.Request, models []string, pageSize int) {
	q := r.URL.Query()
	limit := pageSize
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 && l < limit {
		limit = l
	}
	start := 0
	if after := q.Get("after"); after != "" {
		start = len(models)
		for i, id := range models {
			if id == after {
				start = i + 1
				break
			}
		}
	}
	paged := len(models) > pageSize || q.Has("after") || q.Has("limit")
	end := min(start+limit, len(models))
	data := make([]any, 0, end-start)
	for _, id := range models[start:end] {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1686935002, "owned_by": "vendorsim"})
	}
	body := map[string]any{"object": "list", "data": data}
	if paged {
		body["has_more"] = end < len(models)
		if end > start {
			body["first_id"] = models[start]
			body["last_id"] = models[end-1]
		} else {
			body["first_id"], body["last_id"] = nil, nil
		}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
