package main

import (
	"io"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// A non-streamed chat.completion is read in one validating pass with
// jsonscan rather than with encoding/json: in the sandbox reflection made
// decoding a short answer cost more guest CPU than the whole rest of the
// turn. Members are matched exactly (OpenAI writes them in lower case);
// the usage object goes through mapUsage like a streamed one, so both
// paths share the rules. completion_ref_test.go keeps the encoding/json
// version this one is checked against.

// completionChoice is what a turn keeps of the first choice. content is
// appended to the buffer decodeCompletion was given (a turn reuses its
// text buffer), finish is one of finishName's constants for the usual
// reasons: a buffered turn allocates little besides its output.
type completionChoice struct {
	content    []byte
	hasContent bool // content was a string, not absent or null
	refusal    *string
	finish     string
	hasFinish  bool
	calls      []*toolCall
}

// decodeCompletion reads body; ok is false for a body that is not a
// chat.completion the adapter can use (malformed JSON, a member of the
// wrong type, no choices, a usage member that is neither an object nor
// null). usage is the usage member read as mapUsage reads it (nil when
// absent or null), decoded in the same pass: taking its span and mapping
// it afterwards scanned it three times (validation, mapUsage's Parse, its
// walk).
func decodeCompletion(body, text []byte) (ch completionChoice, usage *abi.Usage, ok bool) {
	var d jsonscan.Decoder
	d.Reset(body)
	if d.Peek() != jsonscan.Object || !d.Enter() {
		return ch, usage, false
	}
	seen := false // a choices member was read (the last one wins)
	for d.More() {
		switch string(d.Key()) {
		case "choices":
			c, n, good := decodeChoices(&d, text)
			if !good {
				return ch, usage, false
			}
			ch, seen = c, n > 0
		case "usage":
			u, good := decodeUsage(&d)
			if !good {
				return ch, nil, false
			}
			usage = u
		default:
			d.Skip()
		}
	}
	if d.Finish() != nil || !seen {
		return ch, usage, false
	}
	return ch, usage, true
}

// decodeUsage reads the usage object that is d's next value with
// mapUsage's rules (nil for null; false for another kind or bad syntax).
func decodeUsage(d *jsonscan.Decoder) (*abi.Usage, bool) {
	switch d.Peek() {
	case jsonscan.Null:
		d.Skip()
		return nil, d.Err() == nil
	case jsonscan.Object:
		d.Enter()
	default:
		return nil, false
	}
	b := &usageBlock{}
	for d.More() {
		switch string(d.Key()) {
		case "prompt_tokens":
			b.u.InputTokens = b.count(0, d.Value())
		case "completion_tokens":
			b.u.OutputTokens = b.count(1, d.Value())
		case "prompt_tokens_details":
			if v, ok := memberValue(d, "cached_tokens"); ok {
				b.u.CachedInputTokens = b.count(2, v)
			}
		case "completion_tokens_details":
			if v, ok := memberValue(d, "reasoning_tokens"); ok {
				b.u.ReasoningTokens = b.count(3, v)
			}
		default:
			d.Skip()
		}
	}
	return &b.u, d.Err() == nil
}

// memberValue reads d's next value and returns its member name (the last
// of duplicates, as jsonscan's Get); ok is false when the value is not an
// object or has no such member.
func memberValue(d *jsonscan.Decoder, name string) (v jsonscan.Value, ok bool) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return v, false
	}
	d.Enter()
	for d.More() {
		if string(d.Key()) == name {
			v, ok = d.Value(), true
		} else {
			d.Skip()
		}
	}
	return v, ok
}

// decodeChoices reads the choices array (null: none) and returns its first
// element and the number of elements; every element is checked.
func decodeChoices(d *jsonscan.Decoder, text []byte) (first completionChoice, n int, ok bool) {
	switch d.Peek() {
	case jsonscan.Null:
		d.Skip()
		return first, 0, d.Err() == nil
	case jsonscan.Array:
	default:
		return first, 0, false
	}
	d.Enter()
	for d.More() {
		var c completionChoice
		buf := text
		if n > 0 {
			buf = nil // only the first choice is kept: the others are only checked
		}
		if !decodeChoice(d, &c, buf) {
			return first, 0, false
		}
		if n == 0 {
			first = c
		}
		n++
	}
	return first, n, d.Err() == nil
}

func decodeChoice(d *jsonscan.Decoder, c *completionChoice, text []byte) bool {
	switch d.Peek() {
	case jsonscan.Null: // a zero choice, as encoding/json reads it
		d.Skip()
		return d.Err() == nil
	case jsonscan.Object:
		d.Enter()
	default:
		return false
	}
	for d.More() {
		switch string(d.Key()) {
		case "message":
			if !decodeMessage(d, c, text) {
				return false
			}
		case "finish_reason":
			switch v := d.Value(); v.Kind() {
			case jsonscan.Null:
				c.finish, c.hasFinish = "", false
			case jsonscan.String:
				var tmp [32]byte
				b, err := v.AppendString(tmp[:0])
				if err != nil {
					return false
				}
				c.finish, c.hasFinish = finishName(b), true
			default:
				return false
			}
		case "index":
			if v := d.Value(); !v.IsNull() {
				if _, err := v.Int(); err != nil {
					return false
				}
			}
		default:
			d.Skip()
		}
	}
	return d.Err() == nil
}

func decodeMessage(d *jsonscan.Decoder, c *completionChoice, text []byte) bool {
	switch d.Peek() {
	case jsonscan.Null:
		d.Skip()
		return d.Err() == nil
	case jsonscan.Object:
		d.Enter()
	default:
		return false
	}
	for d.More() {
		switch string(d.Key()) {
		case "content":
			switch v := d.Value(); v.Kind() {
			case jsonscan.Null:
				c.content, c.hasContent = nil, false
			case jsonscan.String:
				b, err := v.AppendString(text[:0])
				if err != nil {
					return false
				}
				c.content, c.hasContent = b, true
			default:
				return false
			}
		case "refusal":
			if !optString(d.Value(), &c.refusal) {
				return false
			}
		case "tool_calls":
			if !decodeCompletionCalls(d, &c.calls) {
				return false
			}
		default:
			d.Skip()
		}
	}
	return d.Err() == nil
}

func decodeCompletionCalls(d *jsonscan.Decoder, dst *[]*toolCall) bool {
	switch d.Peek() {
	case jsonscan.Null:
		d.Skip()
		*dst = nil
		return d.Err() == nil
	case jsonscan.Array:
		d.Enter()
	default:
		return false
	}
	var calls []*toolCall
	for d.More() {
		tc := &toolCall{}
		switch d.Peek() {
		case jsonscan.Null:
			d.Skip()
		case jsonscan.Object:
			d.Enter()
			for d.More() {
				switch string(d.Key()) {
				case "id":
					if !plainString(d.Value(), &tc.id) {
						return false
					}
				case "function":
					if !decodeFunction(d, tc) {
						return false
					}
				default:
					d.Skip()
				}
			}
		default:
			return false
		}
		calls = append(calls, tc)
	}
	*dst = calls
	return d.Err() == nil
}

func decodeFunction(d *jsonscan.Decoder, tc *toolCall) bool {
	switch d.Peek() {
	case jsonscan.Null:
		d.Skip()
		return d.Err() == nil
	case jsonscan.Object:
		d.Enter()
	default:
		return false
	}
	for d.More() {
		switch string(d.Key()) {
		case "name":
			if !plainString(d.Value(), &tc.name) {
				return false
			}
		case "arguments":
			v := d.Value()
			if v.Kind() == jsonscan.String {
				// Chat Completions sends the arguments as a JSON string.
				s, err := v.AppendString([]byte{})
				if err != nil {
					return false
				}
				tc.args = s
			} else if v.Exists() {
				tc.args = append([]byte(nil), v.Raw()...)
			}
		default:
			d.Skip()
		}
	}
	return d.Err() == nil
}

// optString sets *dst from a string value (null: nil); false for another
// kind or a syntax error.
func optString(v jsonscan.Value, dst **string) bool {
	switch v.Kind() {
	case jsonscan.Null:
		*dst = nil
		return true
	case jsonscan.String:
		s, err := v.String()
		if err != nil {
			return false
		}
		*dst = &s
		return true
	}
	return false
}

// plainString sets *dst from a string value; null leaves it unchanged.
func plainString(v jsonscan.Value, dst *string) bool {
	switch v.Kind() {
	case jsonscan.Null:
		return true
	case jsonscan.String:
		s, err := v.String()
		if err != nil {
			return false
		}
		*dst = s
		return true
	}
	return false
}

// completeJSON reads a turn answered with one chat.completion object: a
// buffered turn (abi.CompleteInput.Buffered), or a compatible server that
// ignored stream: true. The body and the text go into the spare stream
// state's buffers, kept for the next turn.
//
// A buffered turn emits nothing: nobody reads its deltas, and the host
// streams the output's text itself, once, when a turn streamed none
// (runtime's loop). Emitting it cost an emit call, the host's scan and
// hash of the text, and a second hash to check the output against it.
// The compatible server's answer to a streamed turn is still emitted, as
// one delta.
func completeJSON(c *sdk.Call, resp *sdk.Response, buffered bool) (*abi.CompleteOutput, error) {
	st := spareStream.Swap(nil)
	if st == nil {
		st = new(turnStream)
	}
	out, err := st.completeJSON(c, resp, buffered)
	keepStream(st)
	return out, err
}

func (st *turnStream) completeJSON(c *sdk.Call, resp *sdk.Response, buffered bool) (*abi.CompleteOutput, error) {
	b, err := readBody(resp, st.buf[:0], abi.MaxResponseBytes)
	st.buf = b[:0]
	if err != nil {
		return nil, transportError(err, true)
	}
	ch, usage, ok := decodeCompletion(b, st.text[:0])
	if !ok || !ch.hasFinish {
		return nil, invalid("completion body is not a chat.completion")
	}
	if ch.refusal != nil && *ch.refusal != "" {
		return nil, &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "model refused"}
	}
	// Replay it through the stream state so both paths share the rules.
	*st = turnStream{out: c, done: true, finish: ch.finish, calls: ch.calls, text: ch.content, buf: st.buf, usage: usage}
	if !buffered && len(st.text) > 0 && c.EmitTextBytes(st.text) {
		return nil, sdk.ErrCancelled
	}
	return st.result()
}

// readBody is sdk.Response.ReadAll appending to dst (a buffer kept across
// turns): a fresh 4 KB buffer per turn was most of a buffered turn's
// garbage.
func readBody(resp *sdk.Response, dst []byte, limit int) ([]byte, error) {
	b := dst[:0]
	if cap(b) < 4096 {
		b = make([]byte, 0, 4096)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := resp.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return b, &sdk.Error{Code: sdk.CodeResponseTooLarge, Message: "upstream body exceeds the plugin's limit"}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
