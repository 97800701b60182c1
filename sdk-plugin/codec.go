package sdk

import (
	"encoding/json"
	"errors"
	"strconv"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// The per-call codec: op inputs decoded with jsonscan and results encoded
// by hand, without reflection. In a guest under wazero (measured with
// close-on-context-done), encoding/json's reflection made a trivial turn
// cost ~200 µs of guest CPU; this path validates the input once and then
// only slices it. The decoders are given a buffer that belongs to the call
// (readInput allocates it once per call): strings without escapes and raw
// members are views of it, so a turn's input costs one allocation rather
// than one per string (an allocation costs ~1 µs in the sandbox).
//
// Decoding follows encoding/json (v1) into the abi types: unknown members
// are ignored, the last of duplicate members wins, null leaves a field
// unset (a json.RawMessage field keeps the literal null, as encoding/json
// does), and a member of the wrong type is an error. Member names match
// exactly (abi: "Field names are exact and case-sensitive"), where
// encoding/json would also accept another case. Encoding produces what
// json.Marshal would, except that '<', '>', '&', U+2028 and U+2029 are not
// escaped and NaN or infinite usage costs are left out rather than failing
// the call (as in EmitUsage). Tests compare both with encoding/json.

var errType = errors.New("wrong JSON type")

// fieldError names the member whose value did not decode.
func fieldError(name string, err error) error {
	return errors.New(name + ": " + err.Error())
}

// decodeString, decodeInt and decodeRaw leave dst unchanged for an absent
// member (the zero Value) or null, as encoding/json does.
func decodeString(v jsonscan.Value, dst *string) error {
	switch v.Kind() {
	case 0, jsonscan.Null:
		return nil
	case jsonscan.String:
		s, err := v.UnsafeString() // data is the call's own copy: see readInput
		*dst = s
		return err
	}
	return errType
}

func decodeInt(v jsonscan.Value, dst *int) error {
	if !v.Exists() || v.IsNull() {
		return nil
	}
	n, err := v.Int()
	if err != nil {
		return err
	}
	if int64(int(n)) != n {
		return jsonscan.ErrRange
	}
	*dst = int(n)
	return nil
}

func decodeBool(v jsonscan.Value, dst *bool) error {
	if !v.Exists() || v.IsNull() {
		return nil
	}
	x, err := v.Bool()
	if err != nil {
		return err
	}
	*dst = x
	return nil
}

// decodeRaw sets dst to the value's bytes, a view of the call's own copy
// of the input (see readInput), with its capacity cut so that an append
// cannot overwrite what follows.
func decodeRaw(v jsonscan.Value, dst *json.RawMessage) {
	if !v.Exists() {
		return
	}
	r := v.Raw()
	*dst = json.RawMessage(r[:len(r):len(r)])
}

// Each decoder reads its object's members as a jsonscan.Decoder meets
// them: the whole input is read and validated in one pass, nested values
// included (Pick at the root followed by Iter and Pick below it scanned the
// messages, most of a long conversation's bytes, once per level). Names
// match exactly: abi's JSON names are exact and case-sensitive, and the
// host writes them with encoding/json. A member that appears twice is
// decoded twice, the last one winning, as encoding/json does.

// object enters the object that is d's next value: ok is false for null
// (consumed: no members), err is errType for another kind.
func object(d *jsonscan.Decoder) (ok bool, err error) {
	switch d.Peek() {
	case jsonscan.Object:
		return d.Enter(), nil
	case jsonscan.Null:
		d.Skip()
		return false, d.Err()
	}
	d.Skip()
	if err := d.Err(); err != nil {
		return false, err
	}
	return false, errType
}

// root enters the object of a whole input: ok is false, with a nil error,
// for a valid null input (nothing to set, as encoding/json).
func root(d *jsonscan.Decoder, data []byte) (ok bool, err error) {
	d.Reset(data)
	if d.Peek() == jsonscan.Object {
		return d.Enter(), nil
	}
	null := d.Peek() == jsonscan.Null
	d.Skip()
	if err := d.Finish(); err != nil {
		return false, err
	}
	if null {
		return false, nil
	}
	return false, jsonscan.ErrType
}

// decodeCompleteInput decodes OpComplete's input into in.
func decodeCompleteInput(data []byte, in *abi.CompleteInput) error {
	var d jsonscan.Decoder
	if ok, err := root(&d, data); !ok {
		return err
	}
	for d.More() {
		var err error
		var field string // the member, for an error
		switch string(d.Key()) {
		case "model":
			field, err = "model", decodeString(d.Value(), &in.Model)
		case "instructions":
			field, err = "instructions", decodeString(d.Value(), &in.Instructions)
		case "messages":
			field, err = "messages", decodeMessages(&d, &in.Messages)
		case "tools":
			field, err = "tools", decodeToolDefs(&d, &in.Tools)
		case "maxOutputTokens":
			field, err = "maxOutputTokens", decodeInt(d.Value(), &in.MaxOutputTokens)
		case "outputSchema":
			decodeRaw(d.Value(), &in.OutputSchema)
		case "native":
			decodeRaw(d.Value(), &in.Native)
		case "step":
			field, err = "step", decodeInt(d.Value(), &in.Step)
		case "buffered":
			field, err = "buffered", decodeBool(d.Value(), &in.Buffered)
		default:
			d.Skip()
		}
		if err != nil {
			if e := d.Err(); e != nil {
				return e
			}
			return fieldError(field, err)
		}
	}
	return d.Finish()
}

// array enters the array that is d's next value: ok is false for null
// (consumed), err is errType for another kind. The loops over elements
// are written out for each element type: a decoder passed as a function
// value would make the Decoder escape to the heap.
func array(d *jsonscan.Decoder) (ok bool, err error) {
	switch d.Peek() {
	case jsonscan.Array:
		return d.Enter(), nil
	case jsonscan.Null:
		d.Skip()
		return false, d.Err()
	}
	d.Skip()
	if err := d.Err(); err != nil {
		return false, err
	}
	return false, errType
}

// decodeMessages, decodeToolCalls and decodeToolDefs decode the array that
// is d's next value into a fresh slice (null: nil).
func decodeMessages(d *jsonscan.Decoder, dst *[]abi.Message) error {
	ok, err := array(d)
	if !ok {
		*dst = nil
		return err
	}
	out := make([]abi.Message, 0, 4)
	for d.More() {
		out = append(out, abi.Message{})
		if err := decodeMessage(d, &out[len(out)-1]); err != nil {
			return err
		}
	}
	*dst = out
	return d.Err()
}

func decodeToolCalls(d *jsonscan.Decoder, dst *[]abi.ToolCall) error {
	ok, err := array(d)
	if !ok {
		*dst = nil
		return err
	}
	out := make([]abi.ToolCall, 0, 4)
	for d.More() {
		out = append(out, abi.ToolCall{})
		if err := decodeToolCall(d, &out[len(out)-1]); err != nil {
			return err
		}
	}
	*dst = out
	return d.Err()
}

func decodeToolDefs(d *jsonscan.Decoder, dst *[]abi.ToolDef) error {
	ok, err := array(d)
	if !ok {
		*dst = nil
		return err
	}
	out := make([]abi.ToolDef, 0, 4)
	for d.More() {
		out = append(out, abi.ToolDef{})
		if err := decodeToolDef(d, &out[len(out)-1]); err != nil {
			return err
		}
	}
	*dst = out
	return d.Err()
}

func decodeMessage(d *jsonscan.Decoder, m *abi.Message) error {
	if ok, err := object(d); !ok {
		return err
	}
	for d.More() {
		var err error
		switch string(d.Key()) {
		case "role":
			err = decodeString(d.Value(), &m.Role)
		case "content":
			err = decodeString(d.Value(), &m.Content)
		case "toolCalls":
			err = decodeToolCalls(d, &m.ToolCalls)
		case "toolCallId":
			err = decodeString(d.Value(), &m.ToolCallID)
		case "name":
			err = decodeString(d.Value(), &m.Name)
		case "parts":
			err = decodeParts(d, &m.Parts)
		default:
			d.Skip()
		}
		if err != nil {
			return err
		}
	}
	return d.Err()
}

// decodeParts decodes a user turn's attached parts (null: nil).
func decodeParts(d *jsonscan.Decoder, dst *[]abi.Part) error {
	ok, err := array(d)
	if !ok {
		*dst = nil
		return err
	}
	var out []abi.Part
	for d.More() {
		out = append(out, abi.Part{})
		p := &out[len(out)-1]
		if ok, err := object(d); !ok {
			if err != nil {
				return err
			}
			continue
		}
		for d.More() {
			var err error
			switch string(d.Key()) {
			case "type":
				err = decodeString(d.Value(), &p.Type)
			case "text":
				err = decodeString(d.Value(), &p.Text)
			case "mediaType":
				err = decodeString(d.Value(), &p.MediaType)
			case "data":
				err = decodeString(d.Value(), &p.Data)
			case "name":
				err = decodeString(d.Value(), &p.Name)
			default:
				d.Skip()
			}
			if err != nil {
				return err
			}
		}
		if err := d.Err(); err != nil {
			return err
		}
	}
	*dst = out
	return d.Err()
}

func decodeToolCall(d *jsonscan.Decoder, tc *abi.ToolCall) error {
	if ok, err := object(d); !ok {
		return err
	}
	for d.More() {
		var err error
		switch string(d.Key()) {
		case "id":
			err = decodeString(d.Value(), &tc.ID)
		case "name":
			err = decodeString(d.Value(), &tc.Name)
		case "arguments":
			decodeRaw(d.Value(), &tc.Arguments)
		default:
			d.Skip()
		}
		if err != nil {
			return err
		}
	}
	return d.Err()
}

func decodeToolDef(d *jsonscan.Decoder, td *abi.ToolDef) error {
	if ok, err := object(d); !ok {
		return err
	}
	for d.More() {
		var err error
		switch string(d.Key()) {
		case "name":
			err = decodeString(d.Value(), &td.Name)
		case "description":
			err = decodeString(d.Value(), &td.Description)
		case "inputSchema":
			decodeRaw(d.Value(), &td.InputSchema)
		default:
			d.Skip()
		}
		if err != nil {
			return err
		}
	}
	return d.Err()
}

// decodeToolInvokeInput decodes OpToolInvoke's input into in.
func decodeToolInvokeInput(data []byte, in *abi.ToolInvokeInput) error {
	var d jsonscan.Decoder
	if ok, err := root(&d, data); !ok {
		return err
	}
	for d.More() {
		var err error
		var field string // the member, for an error
		switch string(d.Key()) {
		case "callId":
			field, err = "callId", decodeString(d.Value(), &in.CallID)
		case "name":
			field, err = "name", decodeString(d.Value(), &in.Name)
		case "arguments":
			decodeRaw(d.Value(), &in.Arguments)
		default:
			d.Skip()
		}
		if err != nil {
			if e := d.Err(); e != nil {
				return e
			}
			return fieldError(field, err)
		}
	}
	return d.Finish()
}

// appendRawField appends a json.RawMessage as encoding/json does: nil is
// null, anything else must be one valid JSON value and is compacted.
func appendRawField(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	return jsonscan.AppendCompact(dst, raw)
}

// appendCompleteOutput appends o as CompleteOutput JSON (fields in the
// struct's order, omitempty as tagged).
func appendCompleteOutput(dst []byte, o *abi.CompleteOutput) ([]byte, error) {
	var err error
	dst = append(dst, `{"text":`...)
	dst = jsonscan.AppendQuote(dst, o.Text)
	if len(o.ToolCalls) > 0 {
		dst = append(dst, `,"toolCalls":[`...)
		for i := range o.ToolCalls {
			tc := &o.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = jsonscan.AppendQuote(dst, tc.ID)
			dst = append(dst, `,"name":`...)
			dst = jsonscan.AppendQuote(dst, tc.Name)
			dst = append(dst, `,"arguments":`...)
			if dst, err = appendRawField(dst, tc.Arguments); err != nil {
				return dst, fieldError("toolCalls["+strconv.Itoa(i)+"].arguments", err)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if o.Usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = AppendUsage(dst, o.Usage)
	}
	if o.FinishReason != "" {
		dst = append(dst, `,"finishReason":`...)
		dst = jsonscan.AppendQuote(dst, o.FinishReason)
	}
	if len(o.Native) > 0 {
		dst = append(dst, `,"native":`...)
		if dst, err = jsonscan.AppendCompact(dst, o.Native); err != nil {
			return dst, fieldError("native", err)
		}
	}
	return append(dst, '}'), nil
}

// appendToolInvokeOutput appends ToolInvokeOutput JSON for a tool's output
// (nil is null).
func appendToolInvokeOutput(dst []byte, out json.RawMessage) ([]byte, error) {
	dst = append(dst, `{"output":`...)
	dst, err := appendRawField(dst, out)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendErrorOutput appends e as ErrorOutput JSON.
func appendErrorOutput(dst []byte, e *abi.ErrorOutput) []byte {
	dst = append(dst, `{"code":`...)
	dst = jsonscan.AppendQuote(dst, e.Code)
	if e.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = jsonscan.AppendQuote(dst, e.Message)
	}
	if e.Retryable {
		dst = append(dst, `,"retryable":true`...)
	}
	if e.Status != 0 {
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
	}
	if e.RetryAfterMs != 0 {
		dst = append(dst, `,"retryAfterMs":`...)
		dst = strconv.AppendInt(dst, e.RetryAfterMs, 10)
	}
	return append(dst, '}')
}

// appendInfo appends i as Info JSON.
func appendInfo(dst []byte, i *abi.Info) []byte {
	dst = append(dst, `{"id":`...)
	dst = jsonscan.AppendQuote(dst, i.ID)
	dst = append(dst, `,"version":`...)
	dst = jsonscan.AppendQuote(dst, i.Version)
	dst = append(dst, `,"kind":`...)
	dst = jsonscan.AppendQuote(dst, string(i.Kind))
	return append(dst, '}')
}

// appendInspectOutput appends o as InspectOutput JSON.
func appendInspectOutput(dst []byte, o *abi.InspectOutput) []byte {
	dst = append(dst, `{"code":`...)
	dst = jsonscan.AppendQuote(dst, o.Code)
	if len(o.Models) > 0 {
		dst = append(dst, `,"models":[`...)
		for i, m := range o.Models {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonscan.AppendQuote(dst, m)
		}
		dst = append(dst, ']')
	}
	if o.Complete {
		dst = append(dst, `,"complete":true`...)
	}
	return append(dst, '}')
}

// appendHTTPRequest writes req as the meta JSON of http_start: the shape
// encoding/json gives abi.HTTPRequest (header order aside: the host decodes
// the headers into a map), without reflection — a vendor turn starts at
// least one request, and reflection costs ~100 µs in a sandboxed guest.
func appendHTTPRequest(dst []byte, req *abi.HTTPRequest) []byte {
	dst = append(dst, `{"method":`...)
	dst = jsonscan.AppendQuote(dst, req.Method)
	dst = append(dst, `,"url":`...)
	dst = jsonscan.AppendQuote(dst, req.URL)
	if len(req.Headers) > 0 {
		dst = append(dst, `,"headers":{`...)
		sep := false
		for k, v := range req.Headers {
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			dst = jsonscan.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = jsonscan.AppendQuote(dst, v)
		}
		dst = append(dst, '}')
	}
	if req.Stream {
		dst = append(dst, `,"stream":true`...)
	}
	return append(dst, '}')
}

// decodeHTTPResponse reads http_head's abi.HTTPResponse JSON into the
// status and header, an empty map: an integer status and an optional
// object of string headers. Anything else is an error (the host never
// writes it).
//
// The header names and values are views of one private copy of data (the
// caller reuses data's buffer) rather than a string each: a streamed
// response has a handful of headers, and each allocation costs about a
// microsecond in the sandbox.
func decodeHTTPResponse(data []byte, header map[string]string) (status int, err error) {
	// The copy is never written to, so views of it stay valid for as long
	// as the strings are used.
	data = append([]byte(nil), data...)
	var d jsonscan.Decoder
	if ok, err := root(&d, data); !ok {
		if err == nil {
			err = jsonscan.ErrType // null is no response
		}
		return 0, err
	}
	for d.More() {
		switch string(d.Key()) {
		case "status":
			if err := decodeInt(d.Value(), &status); err != nil {
				return 0, fieldError("status", err)
			}
		case "headers":
			clear(header) // the last "headers" wins
			if err := decodeHeaders(&d, header); err != nil {
				return 0, fieldError("headers", err)
			}
		default:
			d.Skip()
		}
	}
	if err := d.Finish(); err != nil {
		return 0, err
	}
	return status, nil
}

// decodeHTTPStatus is decodeHTTPResponse for Send: it reads the status and
// validates the rest with one skip per member, returning the headers
// object (the last one, or nil when absent) for lookupHeader, which reads
// it only when asked. A headers member that is neither an object nor null
// is an error; the type of each header value is checked only by the lookup
// that reaches it.
func decodeHTTPStatus(data []byte) (status int, headers jsonscan.Value, err error) {
	var d jsonscan.Decoder
	if ok, err := root(&d, data); !ok {
		if err == nil {
			err = jsonscan.ErrType // null is no response
		}
		return 0, headers, err
	}
	for d.More() {
		switch string(d.Key()) {
		case "status":
			if err := decodeInt(d.Value(), &status); err != nil {
				return 0, headers, fieldError("status", err)
			}
		case "headers":
			switch v := d.Value(); v.Kind() {
			case jsonscan.Object, jsonscan.Null:
				headers = v
			case 0: // a syntax error: Finish reports it
			default:
				return 0, headers, fieldError("headers", errType)
			}
		default:
			d.Skip()
		}
	}
	if err := d.Finish(); err != nil {
		return 0, headers, err
	}
	return status, headers, nil
}

// lookupHeader returns a copy of the string value of member name in the
// headers object decodeHTTPStatus validated ("" when absent, null, or not a
// string; the last of duplicates wins, as decodeHTTPResponse's map does).
// A validated Value is walked with trusting skips, not scanned again.
func lookupHeader(headers jsonscan.Value, name string) string {
	var found jsonscan.Value
	for it := headers.Iter(); it.Next(); {
		if k := it.Key(); k.Equal(name) {
			found = it.Value()
		}
	}
	s, err := found.String()
	if err != nil {
		return ""
	}
	return s
}

// decodeHeaders reads the headers object that is d's next value (null:
// none) into header.
func decodeHeaders(d *jsonscan.Decoder, header map[string]string) error {
	if ok, err := object(d); !ok {
		return err
	}
	for d.More() {
		name := d.UnsafeKey()
		v, err := d.Value().UnsafeString()
		if err != nil {
			if e := d.Err(); e != nil {
				return e
			}
			return err
		}
		header[name] = v
	}
	return d.Err()
}
