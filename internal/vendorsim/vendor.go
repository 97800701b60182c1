package vendorsim

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
)

// Vendor is one vendor's wire format. Implementations are stateless (a
// Server may serve many requests at once) and register from init.
type Vendor interface {
	// Name is the registry key ("openai", "anthropic", "gemini").
	Name() string

	// BasePath is the path, relative to the server root, that an adapter's
	// endpoint setting points at, with a trailing slash ("/v1/",
	// "/v1beta/"). Server.Endpoint is URL()+BasePath().
	BasePath() string

	// Credential names the request header that carries the API key and the
	// prefix before the key ("Authorization", "Bearer "). The server checks
	// it against Options.APIKey and redacts it in recordings.
	Credential() (header, prefix string)

	// Route classifies a request of the conformance responder.
	Route(r *http.Request) Route

	// ParsePrompt decodes a generation request into the vendor-neutral
	// Prompt. An error is answered with a 400 in the vendor's error shape.
	ParsePrompt(r *http.Request, body []byte) (*Prompt, error)

	// WriteError writes an HTTP error response in the vendor's shape.
	WriteError(w http.ResponseWriter, e *HTTPError)

	// WriteReply writes a successful generation response: an SSE stream when
	// p.Stream, else one JSON body. It must honour the fault modifiers of
	// Reply (StreamError, Truncate, Hold, PadBytes) in the vendor's terms.
	WriteReply(rw *ReplyWriter, p *Prompt, rep *Reply)

	// WriteModels writes one page of the models list for request r, using
	// the vendor's pagination convention with at most pageSize ids per page.
	WriteModels(w http.ResponseWriter, r *http.Request, models []string, pageSize int)
}

// Route is what a request asks for.
type Route int

const (
	RouteNotFound Route = iota + 1
	RouteGenerate
	RouteModels
)

var (
	registryMu sync.RWMutex
	registry   = map[string]Vendor{}
)

// Register makes a vendor available to New. It panics on a duplicate name,
// like database/sql.Register.
func Register(v Vendor) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[v.Name()]; dup {
		panic("vendorsim: Register called twice for vendor " + v.Name())
	}
	registry[v.Name()] = v
}

// Lookup returns the registered vendor with that name.
func Lookup(name string) (Vendor, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	v, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("vendorsim: unknown vendor %q", name)
	}
	return v, nil
}

// Vendors lists the registered vendor names, sorted.
func Vendors() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Prompt is the vendor-neutral view of a generation request: just what the
// conformance responder needs to pick a Reply.
type Prompt struct {
	Model  string
	Stream bool
	// LastUser is the text of the last user message ("" when none).
	LastUser string
	// ToolResults are the tool results the request carries, in order.
	ToolResults []ToolResult
	// Tools are the names of the tools offered.
	Tools []string
	// Schema reports whether the request asked for native structured output.
	Schema bool
	// MaxTokens is the output-token bound sent (0 when absent).
	MaxTokens int
	// Detail is vendor-specific request state the vendor's ParsePrompt
	// keeps for its WriteReply (nil when none).
	Detail any
}

// ToolResult is one tool result carried back to the model.
type ToolResult struct {
	CallID  string
	Name    string // "" when the vendor's format does not repeat it
	Content string // the result as sent (JSON text for adhost adapters)
}

// Reply is a vendor-neutral model answer. Vendors encode it; the fault
// modifiers make the encoding fail in the vendor's own way.
type Reply struct {
	// Chunks are visible text deltas, one per streamed event.
	Chunks []string
	// ToolCalls are the calls the model makes, streamed after the text.
	ToolCalls []ReplyToolCall
	// Usage is reported at the end of the stream when not nil.
	Usage *Usage
	// Finish is why the model stopped (FinishStop when empty and there are
	// no tool calls, FinishToolCalls when there are).
	Finish Finish

	// StreamError ends the stream after the chunks with the vendor's
	// in-stream error event carrying this message.
	StreamError string
	// Truncate ends the stream after the chunks without the terminal
	// marker: the connection just closes.
	Truncate bool
	// Hold streams the first item (the first chunk, or the first fragment
	// of the first tool call's arguments) and then holds the response open
	// until the client goes away.
	Hold bool
	// PadBytes streams filler text until at least this many bytes of
	// response body were written, before finishing normally.
	PadBytes int64
}

// ReplyToolCall is one tool call of a Reply.
type ReplyToolCall struct {
	ID   string
	Name string
	// Args are the argument JSON text split into streamed fragments; their
	// concatenation is the arguments object.
	Args []string
}

// Text returns the concatenated chunks.
func (r *Reply) Text() string {
	n := 0
	for _, c := range r.Chunks {
		n += len(c)
	}
	b := make([]byte, 0, n)
	for _, c := range r.Chunks {
		b = append(b, c...)
	}
	return string(b)
}

// Args returns the concatenated argument fragments.
func (c *ReplyToolCall) ArgsText() string {
	var b []byte
	for _, a := range c.Args {
		b = append(b, a...)
	}
	return string(b)
}

// Finish is a vendor-neutral stop reason; each vendor maps it to its own
// ("stop"/"end_turn"/"STOP", …).
type Finish string

const (
	FinishStop      Finish = "stop"
	FinishLength    Finish = "length"
	FinishToolCalls Finish = "tool_calls"
	FinishRefusal   Finish = "refusal" // content filter / safety block
)

// FinishOf returns r.Finish with its default filled in.
func (r *Reply) FinishOf() Finish {
	if r.Finish != "" {
		return r.Finish
	}
	if len(r.ToolCalls) > 0 {
		return FinishToolCalls
	}
	return FinishStop
}

// Usage is the vendor-neutral token usage a Reply reports. A nil field is
// not reported by the vendor.
type Usage struct {
	Input, Output, CachedInput, Reasoning, CacheCreation *int64
}

// Int64 returns a pointer to v, for Usage literals.
func Int64(v int64) *int64 { return &v }

// HTTPError is an HTTP error answer. Vendors shape the body.
type HTTPError struct {
	Status int
	// Type and Code are the vendor's error classification (vendors fill
	// defaults per status when empty).
	Type, Code string
	Message    string
	// RetryAfter is sent as the Retry-After header when not empty.
	RetryAfter string
}
