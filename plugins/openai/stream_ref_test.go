package main

// The first implementation of the stream parser, walking each chunk with
// jsonscan iterators (several passes per chunk). It is kept as the reference
// the single-pass parser in stream.go is checked against (FuzzStreamParity).

import (
	"bytes"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// refMaxToolCallIndex bounds the tool_calls index a stream may use: the engine
// refuses more than 32 calls a step anyway (TOOL_LIMIT), and a hostile index
// must not make the adapter allocate.
const refMaxToolCallIndex = 127

// toolCall is one tool call being assembled from stream fragments.
type refToolCall struct {
	id, name string
	args     []byte
}

// refTurnStream follows one Chat Completions stream: data-only SSE of
// chat.completion.chunk objects ending with "data: [DONE]"
// (https://platform.openai.com/docs/api-reference/chat-streaming). It is
// fed one event at a time and never decodes with reflection: each chunk is
// validated once and walked with jsonscan.
type refTurnStream struct {
	out emitter

	text   []byte
	calls  []*refToolCall
	finish string // finish_reason as sent ("" until one arrives)
	done   bool   // [DONE] seen
	usage  *abi.Usage

	buf []byte // scratch for unescaped strings
}

var refDoneMarker = []byte("[DONE]")

// refErrCancelled is returned by handle when the host reported cancellation.
var refErrCancelled = sdk.ErrCancelled

func refInvalid(msg string) *sdk.Error {
	return &sdk.Error{Code: sdk.CodeInvalidProviderResponse, Message: msg}
}

// handle processes one SSE event. After [DONE] further events are ignored.
func (s *refTurnStream) handle(name, data []byte) error {
	if s.done {
		return nil
	}
	if string(name) == "error" {
		// Some OpenAI-compatible servers name their error events.
		return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error event"}
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, refDoneMarker) {
		s.done = true
		return nil
	}
	root, err := jsonscan.Parse(data)
	if err != nil || root.Kind() != jsonscan.Object {
		return refInvalid("stream chunk is not a JSON object")
	}
	var choices, usage jsonscan.Value
	for it := root.Iter(); it.Next(); {
		k := it.Key()
		switch {
		case k.Equal("choices"):
			choices = it.Value()
		case k.Equal("usage"):
			usage = it.Value()
		case k.Equal("error"):
			if !it.Value().IsNull() {
				return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error object"}
			}
		case k.Equal("object"):
			if it.Value().Equal("error") {
				return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error chunk"}
			}
		}
	}
	if choices.Exists() && !choices.IsNull() {
		if choices.Kind() != jsonscan.Array {
			return refInvalid("choices is not an array")
		}
		for it := choices.Iter(); it.Next(); {
			if err := s.choice(it.Value()); err != nil {
				return err
			}
		}
	}
	if usage.Exists() && !usage.IsNull() {
		if usage.Kind() != jsonscan.Object {
			return refInvalid("usage is not an object")
		}
		s.usage = refMapUsage(usage)
	}
	return nil
}

// choice handles one element of choices. Only choice 0 exists (the adapter
// never asks for n > 1); others are ignored.
func (s *refTurnStream) choice(c jsonscan.Value) error {
	if c.Kind() != jsonscan.Object {
		return refInvalid("choice is not an object")
	}
	var delta, finish jsonscan.Value
	for it := c.Iter(); it.Next(); {
		k := it.Key()
		switch {
		case k.Equal("index"):
			if n, err := it.Value().Int(); err == nil && n != 0 {
				return nil
			}
		case k.Equal("delta"):
			delta = it.Value()
		case k.Equal("finish_reason"):
			finish = it.Value()
		}
	}
	if finish.Kind() == jsonscan.String {
		f, _ := finish.String()
		s.finish = f
	}
	if !delta.Exists() || delta.IsNull() {
		return nil
	}
	if delta.Kind() != jsonscan.Object {
		return refInvalid("delta is not an object")
	}
	for it := delta.Iter(); it.Next(); {
		k, v := it.Key(), it.Value()
		switch {
		case k.Equal("content"):
			if v.Kind() != jsonscan.String {
				continue // null on role and tool-call chunks
			}
			var err error
			if s.buf, err = v.AppendString(s.buf[:0]); err != nil {
				return refInvalid("bad content string")
			}
			if len(s.buf) == 0 {
				continue
			}
			s.text = append(s.text, s.buf...)
			if s.out.EmitTextBytes(s.buf) {
				return refErrCancelled
			}
		case k.Equal("refusal"):
			if v.Kind() == jsonscan.String && len(v.Raw()) > 2 {
				return &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "model refused"}
			}
		case k.Equal("reasoning_content"), k.Equal("reasoning"):
			// Reasoning text of OpenAI-compatible reasoning servers (vLLM,
			// DeepSeek, OpenRouter): real work, never visible text.
			if v.Kind() == jsonscan.String && len(v.Raw()) > 2 {
				if s.out.Progress() {
					return refErrCancelled
				}
			}
		case k.Equal("tool_calls"):
			if v.IsNull() {
				continue
			}
			if v.Kind() != jsonscan.Array {
				return refInvalid("tool_calls is not an array")
			}
			for tc := v.Iter(); tc.Next(); {
				if err := s.toolDelta(tc.Value()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// toolDelta merges one tool_calls fragment: the first of a call carries
// index, id, type and function.name; later ones index and a piece of
// function.arguments.
func (s *refTurnStream) toolDelta(d jsonscan.Value) error {
	if d.Kind() != jsonscan.Object {
		return refInvalid("tool call delta is not an object")
	}
	idx := int64(-1)
	var id, fn jsonscan.Value
	for it := d.Iter(); it.Next(); {
		k := it.Key()
		switch {
		case k.Equal("index"):
			n, err := it.Value().Int()
			if err != nil || n < 0 || n > refMaxToolCallIndex {
				return refInvalid("bad tool call index")
			}
			idx = n
		case k.Equal("id"):
			id = it.Value()
		case k.Equal("function"):
			fn = it.Value()
		}
	}
	if idx < 0 {
		// Some compatible servers omit the index and send whole calls: a new
		// id starts a new call, anything else continues the last one.
		idx = int64(len(s.calls))
		if len(s.calls) > 0 && (id.Kind() != jsonscan.String || id.Equal(s.calls[len(s.calls)-1].id)) {
			idx--
		}
		if idx > refMaxToolCallIndex {
			return refInvalid("too many tool calls")
		}
	}
	for int64(len(s.calls)) <= idx {
		s.calls = append(s.calls, &refToolCall{})
	}
	call := s.calls[idx]
	if id.Kind() == jsonscan.String {
		v, err := id.String()
		if err != nil {
			return refInvalid("bad tool call id")
		}
		switch {
		case call.id == "":
			call.id = v
		case v != "" && v != call.id:
			return refInvalid("tool call id changed mid-call")
		}
	}
	if fn.Exists() && !fn.IsNull() {
		if fn.Kind() != jsonscan.Object {
			return refInvalid("tool call function is not an object")
		}
		for it := fn.Iter(); it.Next(); {
			k, v := it.Key(), it.Value()
			switch {
			case k.Equal("name"):
				if v.Kind() != jsonscan.String {
					continue
				}
				name, err := v.String()
				if err != nil {
					return refInvalid("bad tool name")
				}
				switch {
				case call.name == "":
					call.name = name
				case name != "" && name != call.name:
					return refInvalid("tool name changed mid-call")
				}
			case k.Equal("arguments"):
				switch v.Kind() {
				case jsonscan.String:
					var err error
					if call.args, err = v.AppendString(call.args); err != nil {
						return refInvalid("bad arguments string")
					}
				case jsonscan.Object:
					// A few compatible servers send the arguments object itself.
					call.args = append(call.args, v.Raw()...)
				case jsonscan.Null:
				default:
					return refInvalid("arguments is not a string")
				}
			}
		}
	}
	if s.out.ToolCallDelta() {
		return refErrCancelled
	}
	return nil
}

// refMapUsage maps OpenAI usage to abi.Usage without inventing anything: a
// field the server did not send (or sent as a non-integer or negative
// number) stays unknown.
func refMapUsage(u jsonscan.Value) *abi.Usage {
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
func (s *refTurnStream) result() (*abi.CompleteOutput, error) {
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
	calls, err := refFinishCalls(s.calls, s.finish == "length")
	if err != nil {
		return nil, err
	}
	out.ToolCalls = calls
	return out, nil
}

// refFinishCalls checks assembled tool calls: each needs an id, a name and
// arguments that form a JSON object ("" counts as {}). Arguments cut off by
// the token limit are TRUNCATED_TOOL_CALL; otherwise broken ones are an
// invalid response.
func refFinishCalls(calls []*refToolCall, length bool) ([]abi.ToolCall, error) {
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
			return nil, refInvalid("tool call arguments are not a JSON object")
		}
		if c.id == "" || c.name == "" {
			return nil, refInvalid("tool call without id or name")
		}
		out = append(out, abi.ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	return out, nil
}
