package main

import (
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

// completionChoice is what a turn keeps of the first choice.
type completionChoice struct {
	content, refusal *string
	finish           *string
	calls            []*toolCall
}

// decodeCompletion reads body; ok is false for a body that is not a
// chat.completion the adapter can use (malformed JSON, a member of the
// wrong type, no choices). usage is the usage member (zero when absent).
func decodeCompletion(body []byte) (ch completionChoice, usage jsonscan.Value, ok bool) {
	var d jsonscan.Decoder
	d.Reset(body)
	if d.Peek() != jsonscan.Object || !d.Enter() {
		return ch, usage, false
	}
	seen := false // a choices member was read (the last one wins)
	for d.More() {
		switch string(d.Key()) {
		case "choices":
			c, n, good := decodeChoices(&d)
			if !good {
				return ch, usage, false
			}
			ch, seen = c, n > 0
		case "usage":
			usage = d.Value()
		default:
			d.Skip()
		}
	}
	if d.Finish() != nil || !seen {
		return ch, usage, false
	}
	return ch, usage, true
}

// decodeChoices reads the choices array (null: none) and returns its first
// element and the number of elements; every element is checked.
func decodeChoices(d *jsonscan.Decoder) (first completionChoice, n int, ok bool) {
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
		if !decodeChoice(d, &c) {
			return first, 0, false
		}
		if n == 0 {
			first = c
		}
		n++
	}
	return first, n, d.Err() == nil
}

func decodeChoice(d *jsonscan.Decoder, c *completionChoice) bool {
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
			if !decodeMessage(d, c) {
				return false
			}
		case "finish_reason":
			if !optString(d.Value(), &c.finish) {
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

func decodeMessage(d *jsonscan.Decoder, c *completionChoice) bool {
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
			if !optString(d.Value(), &c.content) {
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
// ignored stream: true.
func completeJSON(c *sdk.Call, resp *sdk.Response) (*abi.CompleteOutput, error) {
	b, err := resp.ReadAll(abi.MaxResponseBytes)
	if err != nil {
		return nil, transportError(err, true)
	}
	ch, usage, ok := decodeCompletion(b)
	if !ok || ch.finish == nil {
		return nil, invalid("completion body is not a chat.completion")
	}
	if ch.refusal != nil && *ch.refusal != "" {
		return nil, &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "model refused"}
	}
	// Replay it through the stream state so both paths share the rules.
	st := &turnStream{out: c, done: true, finish: *ch.finish, calls: ch.calls}
	if ch.content != nil && *ch.content != "" {
		st.text = []byte(*ch.content)
		if c.EmitText(*ch.content) {
			return nil, sdk.ErrCancelled
		}
	}
	if err := st.setUsage(usage.Raw()); err != nil {
		return nil, err
	}
	return st.result()
}
