package main

import (
	"bytes"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// emitter is what a turn streams to the host: *sdk.Call in production, a
// recorder in tests and benchmarks. Each method reports whether the run was
// cancelled.
type emitter interface {
	EmitTextBytes(b []byte) (cancelled bool)
	ToolCallDelta() (cancelled bool)
	Progress() (cancelled bool)
}

// maxToolCallIndex bounds the tool_calls index a stream may use: the engine
// refuses more than 32 calls a step anyway (TOOL_LIMIT), and a hostile index
// must not make the adapter allocate.
const maxToolCallIndex = 127

// toolCall is one tool call being assembled from stream fragments.
type toolCall struct {
	id, name string
	args     []byte
}

// turnStream follows one Chat Completions stream: data-only SSE of
// chat.completion.chunk objects ending with "data: [DONE]"
// (https://platform.openai.com/docs/api-reference/chat-streaming). It is
// fed one event at a time and never decodes with reflection; each chunk is
// read in one pass (scan.go).
type turnStream struct {
	out emitter

	text   []byte
	calls  []*toolCall
	finish string // finish_reason as sent ("" until one arrives)
	done   bool   // [DONE] seen
	usage  *abi.Usage

	buf []byte // scratch for decoded strings
}

var doneMarker = []byte("[DONE]")

// errCancelled is returned by handle when the host reported cancellation.
var errCancelled = sdk.ErrCancelled

func invalid(msg string) *sdk.Error {
	return &sdk.Error{Code: sdk.CodeInvalidProviderResponse, Message: msg}
}

// handle processes one SSE event. After [DONE] further events are ignored.
//
// A chunk is read in one pass with skim (see scan.go for why): the top
// level is checked to the end and the spans of choices, usage and error
// kept; nothing is emitted from a chunk that is malformed or carries an
// error. Then each choice is applied.
func (s *turnStream) handle(name, data []byte) error {
	if s.done {
		return nil
	}
	if string(name) == "error" {
		// Some OpenAI-compatible servers name their error events.
		return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error event"}
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		s.done = true
		return nil
	}
	var sc skim
	sc.reset(data)
	if !sc.enter('{') {
		return invalid("stream chunk is not a JSON object")
	}
	var choices, usage []byte
	failed := false
	for first := true; sc.next('}', &first); {
		switch string(sc.key()) {
		case "choices":
			choices = sc.value()
		case "usage":
			usage = sc.value()
		case "error":
			if v := sc.value(); v != nil && !isNull(v) {
				failed = true
			}
		default:
			sc.skip(0)
		}
	}
	if sc.bad || !sc.end() {
		return invalid("stream chunk is not a JSON object")
	}
	if failed {
		return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error object"}
	}
	if choices != nil && !isNull(choices) {
		var cs skim
		cs.reset(choices)
		if !cs.enter('[') {
			return invalid("choices is not an array")
		}
		for first := true; cs.next(']', &first); {
			if err := s.choice(cs.value()); err != nil {
				return err
			}
		}
	}
	if usage != nil && !isNull(usage) {
		v, err := jsonscan.Parse(usage)
		if err != nil || v.Kind() != jsonscan.Object {
			return invalid("usage is not an object")
		}
		s.usage = mapUsage(v)
	}
	return nil
}

func isNull(span []byte) bool { return string(span) == "null" }

func isString(span []byte) bool { return len(span) > 0 && span[0] == '"' }

// choice applies one element of choices. Only choice 0 exists (the adapter
// never asks for n > 1); others are ignored.
func (s *turnStream) choice(span []byte) error {
	var c skim
	c.reset(span)
	if !c.enter('{') {
		return invalid("choice is not an object")
	}
	var index, delta, finish []byte
	for first := true; c.next('}', &first); {
		switch string(c.key()) {
		case "index":
			index = c.value()
		case "delta":
			delta = c.value()
		case "finish_reason":
			finish = c.value()
		default:
			c.skip(0)
		}
	}
	if c.bad {
		return invalid("choice is not an object")
	}
	if index != nil {
		if n, ok := intOf(index); ok && n != 0 {
			return nil
		}
	}
	if isString(finish) {
		b, ok := appendString(s.buf[:0], finish)
		if !ok {
			return invalid("bad finish_reason")
		}
		s.buf = b
		if string(b) != s.finish {
			s.finish = string(b)
		}
	}
	if delta == nil || isNull(delta) {
		return nil
	}
	var d skim
	d.reset(delta)
	if !d.enter('{') {
		return invalid("delta is not an object")
	}
	for first := true; d.next('}', &first); {
		switch string(d.key()) {
		case "content":
			v := d.value()
			if !isString(v) {
				continue // null on role and tool-call chunks
			}
			b, ok := appendString(s.buf[:0], v)
			if !ok {
				return invalid("bad content string")
			}
			s.buf = b
			if len(b) == 0 {
				continue
			}
			s.text = append(s.text, b...)
			if s.out.EmitTextBytes(b) {
				return errCancelled
			}
		case "refusal":
			if v := d.value(); isString(v) && len(v) > 2 {
				return &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "model refused"}
			}
		case "reasoning_content", "reasoning":
			// Reasoning text of OpenAI-compatible reasoning servers (vLLM,
			// DeepSeek, OpenRouter): real work, never visible text.
			if v := d.value(); isString(v) && len(v) > 2 {
				if s.out.Progress() {
					return errCancelled
				}
			}
		case "tool_calls":
			v := d.value()
			if v == nil || isNull(v) {
				continue
			}
			var tc skim
			tc.reset(v)
			if !tc.enter('[') {
				return invalid("tool_calls is not an array")
			}
			for first := true; tc.next(']', &first); {
				if err := s.toolDelta(tc.value()); err != nil {
					return err
				}
			}
		default:
			d.skip(0)
		}
	}
	return nil
}

// toolDelta merges one tool_calls fragment: the first of a call carries
// index, id, type and function.name; later ones index and a piece of
// function.arguments.
func (s *turnStream) toolDelta(span []byte) error {
	var e skim
	e.reset(span)
	if !e.enter('{') {
		return invalid("tool call delta is not an object")
	}
	var index, id, fn []byte
	for first := true; e.next('}', &first); {
		switch string(e.key()) {
		case "index":
			index = e.value()
		case "id":
			id = e.value()
		case "function":
			fn = e.value()
		default:
			e.skip(0)
		}
	}
	idx := int64(-1)
	if index != nil {
		n, ok := intOf(index)
		if !ok || n < 0 || n > maxToolCallIndex {
			return invalid("bad tool call index")
		}
		idx = n
	}
	var idText string
	if isString(id) {
		b, ok := appendString(s.buf[:0], id)
		if !ok {
			return invalid("bad tool call id")
		}
		s.buf = b
		idText = string(b)
	}
	if idx < 0 {
		// Some compatible servers omit the index and send whole calls: a new
		// id starts a new call, anything else continues the last one.
		idx = int64(len(s.calls))
		if len(s.calls) > 0 && (!isString(id) || idText == s.calls[len(s.calls)-1].id) {
			idx--
		}
		if idx > maxToolCallIndex {
			return invalid("too many tool calls")
		}
	}
	for int64(len(s.calls)) <= idx {
		s.calls = append(s.calls, &toolCall{})
	}
	call := s.calls[idx]
	if isString(id) {
		switch {
		case call.id == "":
			call.id = idText
		case idText != "" && idText != call.id:
			return invalid("tool call id changed mid-call")
		}
	}
	if fn != nil && !isNull(fn) {
		var f skim
		f.reset(fn)
		if !f.enter('{') {
			return invalid("tool call function is not an object")
		}
		for first := true; f.next('}', &first); {
			switch string(f.key()) {
			case "name":
				v := f.value()
				if !isString(v) {
					continue
				}
				b, ok := appendString(s.buf[:0], v)
				if !ok {
					return invalid("bad tool name")
				}
				s.buf = b
				switch {
				case call.name == "":
					call.name = string(b)
				case len(b) > 0 && string(b) != call.name:
					return invalid("tool name changed mid-call")
				}
			case "arguments":
				v := f.value()
				switch {
				case isString(v):
					var ok bool
					if call.args, ok = appendString(call.args, v); !ok {
						return invalid("bad arguments string")
					}
				case len(v) > 0 && v[0] == '{':
					// A few compatible servers send the arguments object itself.
					call.args = append(call.args, v...)
				case isNull(v):
				default:
					return invalid("arguments is not a string")
				}
			default:
				f.skip(0)
			}
		}
	}
	if s.out.ToolCallDelta() {
		return errCancelled
	}
	return nil
}

// mapUsage maps OpenAI usage to abi.Usage without inventing anything: a
// field the server did not send (or sent as a non-integer or negative
// number) stays unknown.
func mapUsage(u jsonscan.Value) *abi.Usage {
	out := &abi.Usage{}
	count := func(v jsonscan.Value) *int64 {
		n, err := v.Int()
		if err != nil || n < 0 {
			return nil
		}
		return &n
	}
	for it := u.Iter(); it.Next(); {
		k, v := it.Key(), it.Value()
		switch {
		case k.Equal("prompt_tokens"):
			out.InputTokens = count(v)
		case k.Equal("completion_tokens"):
			out.OutputTokens = count(v)
		case k.Equal("prompt_tokens_details"):
			if c, err := v.Get("cached_tokens"); err == nil {
				out.CachedInputTokens = count(c)
			}
		case k.Equal("completion_tokens_details"):
			if r, err := v.Get("reasoning_tokens"); err == nil {
				out.ReasoningTokens = count(r)
			}
		}
	}
	return out
}

// result builds the turn's output once the stream ended: eof reports that
// the body ended (rather than [DONE] arriving).
func (s *turnStream) result() (*abi.CompleteOutput, error) {
	if !s.done {
		return nil, &sdk.Error{Code: sdk.CodeIncompleteStream, Message: "stream ended without [DONE]"}
	}
	out := &abi.CompleteOutput{Text: string(s.text), Usage: s.usage}
	switch s.finish {
	case "content_filter":
		return nil, &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "finish_reason content_filter"}
	case "length":
		out.FinishReason = "length"
	default:
		// stop, tool_calls, function_call, and the odd names some compatible
		// servers use: the model finished its turn.
		out.FinishReason = "stop"
	}
	calls, err := finishCalls(s.calls, s.finish == "length")
	if err != nil {
		return nil, err
	}
	out.ToolCalls = calls
	return out, nil
}

// finishCalls checks assembled tool calls: each needs an id, a name and
// arguments that form a JSON object ("" counts as {}). Arguments cut off by
// the token limit are TRUNCATED_TOOL_CALL; otherwise broken ones are an
// invalid response.
func finishCalls(calls []*toolCall, length bool) ([]abi.ToolCall, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	out := make([]abi.ToolCall, 0, len(calls))
	for _, c := range calls {
		args := bytes.TrimSpace(c.args)
		if len(args) == 0 {
			args = []byte("{}")
		}
		v, err := jsonscan.Parse(args)
		if err != nil || v.Kind() != jsonscan.Object {
			if length {
				return nil, &sdk.Error{Code: sdk.CodeTruncatedToolCall, Message: "tool call arguments cut off"}
			}
			return nil, invalid("tool call arguments are not a JSON object")
		}
		if c.id == "" || c.name == "" {
			return nil, invalid("tool call without id or name")
		}
		out = append(out, abi.ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	return out, nil
}
