package vendorsim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// gemini simulates the Gemini API's generateContent family
// (https://ai.google.dev/api/generate-content, errors:
// https://ai.google.dev/gemini-api/docs/troubleshooting, models:
// https://ai.google.dev/api/models#method:-models.list):
//
//   - POST /v1beta/models/{model}:streamGenerateContent?alt=sse streams
//     GenerateContentResponse chunks as data-only SSE with CRLF line ends;
//     there is no terminal event: the last chunk carries the candidate's
//     finishReason (and the final usageMetadata). POST
//     /v1beta/models/{model}:generateContent answers one such object.
//   - The key travels in x-goog-api-key. A wrong key is not a 401: Gemini
//     answers 400 INVALID_ARGUMENT with an ErrorInfo reason API_KEY_INVALID.
//   - HTTP errors are google.rpc.Status: {"error":{"code","message","status",
//     "details"}}; a 429 carries a RetryInfo detail (retryDelay "2s") rather
//     than a Retry-After header. An error mid-stream is a data line holding
//     the same {"error":{…}} object.
//   - Function calls come whole in one part (name and args object, no id),
//     with an opaque thoughtSignature on the first call of a turn, as
//     Gemini 3 models send. Like Gemini 3, the simulator refuses a request
//     whose model turn has function calls but no signature on the first one
//     (400 INVALID_ARGUMENT), so adapters are tested on carrying it back.
//   - GET /v1beta/models: {"models":[{"name":"models/…",
//     "supportedGenerationMethods":[…]}], "nextPageToken"}, with pageSize
//     (default 50, at most 1000) and pageToken.
type gemini struct{}

func init() { Register(gemini{}) }

// GeminiSignature is the thoughtSignature the simulator attaches to the
// first function call of a turn.
const GeminiSignature = "c2lnbmF0dXJlLXZlbmRvcnNpbQ=="

func (gemini) Name() string     { return "gemini" }
func (gemini) BasePath() string { return "/v1beta/" }

func (gemini) Credential() (header, prefix string) { return "x-goog-api-key", "" }

// geminiMethod splits /v1beta/models/{model}:{method}.
func geminiMethod(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return "", "", false
	}
	return model, method, true
}

func (gemini) Route(r *http.Request) Route {
	if r.Method == http.MethodGet && r.URL.Path == "/v1beta/models" {
		return RouteModels
	}
	if r.Method == http.MethodPost {
		if _, m, ok := geminiMethod(r.URL.Path); ok && (m == "streamGenerateContent" || m == "generateContent") {
			return RouteGenerate
		}
	}
	return RouteNotFound
}

type geminiPart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	ThoughtSignature string `json:"thoughtSignature"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		MaxOutputTokens    int             `json:"maxOutputTokens"`
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

func (gemini) ParsePrompt(r *http.Request, body []byte) (*Prompt, error) {
	model, method, _ := geminiMethod(r.URL.Path)
	p := &Prompt{Model: model, Stream: method == "streamGenerateContent"}
	if p.Stream && r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse Gemini streams a JSON array; adapters must ask
		// for SSE.
		return nil, errors.New("vendorsim: streamGenerateContent without alt=sse is not simulated")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields() // Gemini rejects unknown fields: "Invalid JSON payload received. Unknown name …"
	var req geminiRequest
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("invalid JSON payload received: %v", err)
	}
	if len(req.Contents) == 0 {
		return nil, errors.New("* GenerateContentRequest.contents: contents is not specified")
	}
	if gc := req.GenerationConfig; gc != nil {
		p.MaxTokens = gc.MaxOutputTokens
		if len(gc.ResponseSchema) > 0 && len(gc.ResponseJSONSchema) > 0 {
			return nil, errors.New("responseSchema and responseJsonSchema are mutually exclusive")
		}
		if (len(gc.ResponseSchema) > 0 || len(gc.ResponseJSONSchema) > 0) && gc.ResponseMimeType != "application/json" {
			return nil, errors.New("a response schema needs responseMimeType application/json")
		}
		p.Schema = len(gc.ResponseSchema) > 0 || len(gc.ResponseJSONSchema) > 0
	}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			if len(d.Parameters) > 0 && len(d.ParametersJSONSchema) > 0 {
				return nil, errors.New("parameters and parametersJsonSchema are mutually exclusive")
			}
			p.Tools = append(p.Tools, d.Name)
		}
	}
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return nil, fmt.Errorf("* GenerateContentRequest.contents[%d].role: Please use a valid role: user, model", i)
		}
		if len(c.Parts) == 0 {
			return nil, fmt.Errorf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty", i)
		}
		var text []string
		firstCall := true
		for j, part := range c.Parts {
			switch {
			case part.FunctionCall != nil:
				if c.Role != "model" {
					return nil, fmt.Errorf("contents[%d].parts[%d]: functionCall is only allowed in model contents", i, j)
				}
				if firstCall && part.ThoughtSignature == "" {
					return nil, fmt.Errorf("function call is missing a thought_signature in functionCall parts. Position in contents: %d, position in parts: %d", i, j)
				}
				firstCall = false
			case part.FunctionResponse != nil:
				fr := part.FunctionResponse
				var obj map[string]json.RawMessage
				if fr.Name == "" || json.Unmarshal(fr.Response, &obj) != nil || obj == nil {
					return nil, fmt.Errorf("contents[%d].parts[%d].functionResponse: name and an object response are required", i, j)
				}
				p.ToolResults = append(p.ToolResults, ToolResult{Name: fr.Name, Content: string(fr.Response)})
			case part.Text != nil:
				if c.Role == "user" && !part.Thought {
					text = append(text, *part.Text)
				}
			default:
				return nil, fmt.Errorf("contents[%d].parts[%d]: part has no data", i, j)
			}
		}
		if c.Role == "user" && len(text) > 0 {
			p.LastUser = strings.Join(text, "")
		}
	}
	return p, nil
}

// geminiStatus is the google.rpc.Code name Gemini uses for an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

func geminiErrorBody(code int, status, message string, details []any) []byte {
	e := map[string]any{"code": code, "message": message, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

func (gemini) WriteError(w http.ResponseWriter, e *HTTPError) {
	code, status, msg := e.Status, e.Code, e.Message
	var details []any
	switch {
	case code == http.StatusUnauthorized:
		// What Gemini really answers for a bad API key.
		code, status = 400, "INVALID_ARGUMENT"
		msg = "API key not valid. Please pass a valid API key."
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": "API_KEY_INVALID", "domain": "googleapis.com"})
	case code == http.StatusTooManyRequests && e.RetryAfter != "":
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": e.RetryAfter + "s"})
	}
	if status == "" {
		status = geminiStatus(code)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	w.Write(geminiErrorBody(code, status, msg, details))
}

// geminiFinish maps a vendor-neutral finish to finishReason (function calls
// end with STOP: Gemini has no tool-call finish reason).
func geminiFinish(f Finish) string {
	switch f {
	case FinishLength:
		return "MAX_TOKENS"
	case FinishRefusal:
		return "SAFETY"
	}
	return "STOP"
}

// geminiUsage renders usageMetadata: promptTokenCount includes cached
// content, candidatesTokenCount excludes thoughts, zero counters omitted as
// Gemini's JSON does.
func geminiUsage(u *Usage) map[string]int64 {
	m := map[string]int64{}
	put := func(k string, v int64) {
		if v != 0 {
			m[k] = v
		}
	}
	var total int64
	if u.Input != nil {
		put("promptTokenCount", *u.Input)
		total += *u.Input
	}
	if u.CachedInput != nil {
		put("cachedContentTokenCount", *u.CachedInput)
	}
	if u.Output != nil {
		out := *u.Output
		if u.Reasoning != nil {
			put("thoughtsTokenCount", *u.Reasoning)
			out -= *u.Reasoning
		}
		put("candidatesTokenCount", out)
		total += *u.Output
	}
	put("totalTokenCount", total)
	return m
}

// geminiChunk renders one GenerateContentResponse.
func geminiChunk(model string, parts []any, finish string, u *Usage) []byte {
	cand := map[string]any{"index": 0}
	if len(parts) > 0 {
		cand["content"] = map[string]any{"role": "model", "parts": parts}
	}
	if finish != "" {
		cand["finishReason"] = finish
		if finish == "SAFETY" {
			cand["safetyRatings"] = []any{map[string]any{"category": "HARM_CATEGORY_DANGEROUS_CONTENT",
				"probability": "HIGH", "blocked": true}}
		}
	}
	resp := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "vendorsim"}
	if u != nil {
		resp["usageMetadata"] = geminiUsage(u)
	}
	b, _ := json.Marshal(resp)
	return b
}

func geminiCallParts(calls []ReplyToolCall) ([]any, error) {
	var parts []any
	for i, tc := range calls {
		var args map[string]any
		if err := json.Unmarshal([]byte(tc.ArgsText()), &args); err != nil {
			return nil, err
		}
		p := map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": args}}
		if i == 0 {
			p["thoughtSignature"] = GeminiSignature
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// geminiEvent writes one data-only event with CRLF line ends, as Google's
// front end does.
func geminiEvent(rw *ReplyWriter, data []byte) bool {
	b := make([]byte, 0, len(data)+10)
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\r\n\r\n"...)
	return rw.Raw(b)
}

func (g gemini) WriteReply(rw *ReplyWriter, p *Prompt, rep *Reply) {
	finish := geminiFinish(rep.FinishOf())
	if len(rep.ToolCalls) > 0 && rep.Finish == FinishLength {
		// A call cut off at the limit: Gemini cannot emit half a call; it
		// reports the malformed call instead.
		finish, rep = "MALFORMED_FUNCTION_CALL", &Reply{Usage: rep.Usage}
	}
	calls, err := geminiCallParts(rep.ToolCalls)
	if err != nil {
		g.WriteError(rw.w, &HTTPError{Status: 500, Message: "vendorsim: bad tool arguments"})
		return
	}
	if !p.Stream {
		var parts []any
		if t := rep.Text(); t != "" {
			parts = append(parts, map[string]any{"text": t})
		}
		parts = append(parts, calls...)
		if rep.StreamError != "" || rep.Truncate {
			g.WriteError(rw.w, &HTTPError{Status: 500, Message: "An internal error has occurred."})
			return
		}
		rw.JSON(200, geminiChunk(p.Model, parts, finish, rep.Usage))
		return
	}
	rw.StartSSE()
	for i, c := range rep.Chunks {
		if !geminiEvent(rw, geminiChunk(p.Model, []any{map[string]any{"text": c}}, "", nil)) {
			return
		}
		if rep.Hold && i == 0 {
			rw.Hold()
			return
		}
	}
	if rep.PadBytes > 0 {
		pad := geminiChunk(p.Model, []any{map[string]any{"text": strings.Repeat("x", 4000)}}, "", nil)
		for rw.Written() < rep.PadBytes {
			if !geminiEvent(rw, pad) {
				return
			}
		}
	}
	if rep.Truncate {
		return
	}
	if rep.StreamError != "" {
		geminiEvent(rw, geminiErrorBody(500, "INTERNAL", rep.StreamError, nil))
		return
	}
	if rep.Hold && len(calls) > 0 {
		if geminiEvent(rw, geminiChunk(p.Model, calls, "", nil)) {
			rw.Hold()
		}
		return
	}
	// The last chunk: the calls (if any), the finish reason and the usage.
	geminiEvent(rw, geminiChunk(p.Model, calls, finish, rep.Usage))
}

// WriteModels serves GET /v1beta/models with pageSize and pageToken.
func (gemini) WriteModels(w http.ResponseWriter, r *http.Request, models []string, pageSize int) {
	q := r.URL.Query()
	size := 50
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			gemini{}.WriteError(w, &HTTPError{Status: 400, Message: "Invalid page size"})
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	size = min(size, pageSize)
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(string(b))
		if err != nil || err2 != nil || n < 0 || n > len(models) {
			gemini{}.WriteError(w, &HTTPError{Status: 400, Message: "Invalid page token"})
			return
		}
		start = n
	}
	end := min(start+size, len(models))
	list := []any{}
	for _, id := range models[start:end] {
		list = append(list, map[string]any{"name": "models/" + id, "version": "001", "displayName": id,
			"supportedGenerationMethods": []string{"generateContent", "countTokens"}})
	}
	page := map[string]any{"models": list}
	if end < len(models) {
		page["nextPageToken"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	b, _ := json.Marshal(page)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Write(b)
}
