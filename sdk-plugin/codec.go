package sdk

import (
	"encoding/json"
	"errors"
	"strconv"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// The per-call codec: op inputs decoded with jsonscan and results encoded
// by hand, without reflection. In a guest under wazero with
// close-on-context-done, encoding/json's reflection made a trivial turn
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

// Each decoder reads one object's members in one pass with Pick (the
// root's pass also validates the whole input; below it, nothing is
// validated twice). Names match exactly: abi's JSON names are exact and
// case-sensitive, and the host writes them with encoding/json.

// object picks keys from v into out: ok is false for null (no members),
// err is errType for a non-object.
func object(v jsonscan.Value, out []jsonscan.Value, keys ...string) (ok bool, err error) {
	switch v.Kind() {
	case jsonscan.Null:
		return false, nil
	case jsonscan.Object:
		return true, v.Pick(out, keys...)
	}
	return false, errType
}

// decodeCompleteInput decodes OpComplete's input into in.
func decodeCompleteInput(data []byte, in *abi.CompleteInput) error {
	var f [8]jsonscan.Value
	err := jsonscan.Pick(data, f[:], "model", "instructions", "messages", "tools",
		"maxOutputTokens", "outputSchema", "native", "step")
	if err == jsonscan.ErrType && data[skipSpace(data)] == 'n' {
		return nil // null (Pick validated it): nothing to set, as encoding/json
	}
	if err != nil {
		return err
	}
	if err := decodeString(f[0], &in.Model); err != nil {
		return fieldError("model", err)
	}
	if err := decodeString(f[1], &in.Instructions); err != nil {
		return fieldError("instructions", err)
	}
	if f[2].Exists() {
		if err := decodeArray(f[2], &in.Messages, decodeMessage); err != nil {
			return fieldError("messages", err)
		}
	}
	if f[3].Exists() {
		if err := decodeArray(f[3], &in.Tools, decodeToolDef); err != nil {
			return fieldError("tools", err)
		}
	}
	if err := decodeInt(f[4], &in.MaxOutputTokens); err != nil {
		return fieldError("maxOutputTokens", err)
	}
	decodeRaw(f[5], &in.OutputSchema)
	decodeRaw(f[6], &in.Native)
	if err := decodeInt(f[7], &in.Step); err != nil {
		return fieldError("step", err)
	}
	return nil
}

// skipSpace returns the index of the first non-whitespace byte of data,
// which holds one.
func skipSpace(data []byte) int {
	i := 0
	for i < len(data)-1 && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// decodeArray decodes a JSON array into a fresh slice (null: nil).
func decodeArray[T any](v jsonscan.Value, dst *[]T, elem func(jsonscan.Value, *T) error) error {
	switch v.Kind() {
	case jsonscan.Null:
		*dst = nil
		return nil
	case jsonscan.Array:
	default:
		return errType
	}
	out := make([]T, 0, 4)
	it := v.Iter()
	for it.Next() {
		out = append(out, *new(T))
		if err := elem(it.Value(), &out[len(out)-1]); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	*dst = out
	return nil
}

func decodeMessage(v jsonscan.Value, m *abi.Message) error {
	var f [5]jsonscan.Value
	if ok, err := object(v, f[:], "role", "content", "toolCalls", "toolCallId", "name"); !ok {
		return err
	}
	if err := decodeString(f[0], &m.Role); err != nil {
		return err
	}
	if err := decodeString(f[1], &m.Content); err != nil {
		return err
	}
	if f[2].Exists() {
		if err := decodeArray(f[2], &m.ToolCalls, decodeToolCall); err != nil {
			return err
		}
	}
	if err := decodeString(f[3], &m.ToolCallID); err != nil {
		return err
	}
	return decodeString(f[4], &m.Name)
}

func decodeToolCall(v jsonscan.Value, tc *abi.ToolCall) error {
	var f [3]jsonscan.Value
	if ok, err := object(v, f[:], "id", "name", "arguments"); !ok {
		return err
	}
	if err := decodeString(f[0], &tc.ID); err != nil {
		return err
	}
	if err := decodeString(f[1], &tc.Name); err != nil {
		return err
	}
	decodeRaw(f[2], &tc.Arguments)
	return nil
}

func decodeToolDef(v jsonscan.Value, td *abi.ToolDef) error {
	var f [3]jsonscan.Value
	if ok, err := object(v, f[:], "name", "description", "inputSchema"); !ok {
		return err
	}
	if err := decodeString(f[0], &td.Name); err != nil {
		return err
	}
	if err := decodeString(f[1], &td.Description); err != nil {
		return err
	}
	decodeRaw(f[2], &td.InputSchema)
	return nil
}

// decodeToolInvokeInput decodes OpToolInvoke's input into in.
func decodeToolInvokeInput(data []byte, in *abi.ToolInvokeInput) error {
	var f [3]jsonscan.Value
	err := jsonscan.Pick(data, f[:], "callId", "name", "arguments")
	if err == jsonscan.ErrType && data[skipSpace(data)] == 'n' {
		return nil // null (Pick validated it): nothing to set, as encoding/json
	}
	if err != nil {
		return err
	}
	if err := decodeString(f[0], &in.CallID); err != nil {
		return fieldError("callId", err)
	}
	if err := decodeString(f[1], &in.Name); err != nil {
		return fieldError("name", err)
	}
	decodeRaw(f[2], &in.Arguments)
	return nil
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

// decodeHTTPResponse reads http_head's abi.HTTPResponse JSON: an integer
// status and an optional object of string headers. Anything else is an
// error (the host never writes it).
func decodeHTTPResponse(data []byte) (status int, header map[string]string, err error) {
	var top [2]jsonscan.Value
	if err := jsonscan.Pick(data, top[:], "status", "headers"); err != nil {
		return 0, nil, err
	}
	if err := decodeInt(top[0], &status); err != nil {
		return 0, nil, fieldError("status", err)
	}
	header = make(map[string]string)
	if !top[1].Exists() || top[1].IsNull() {
		return status, header, nil
	}
	if top[1].Kind() != jsonscan.Object {
		return 0, nil, fieldError("headers", errType)
	}
	it := top[1].Iter()
	for it.Next() {
		k, err := it.Key().String()
		if err != nil {
			return 0, nil, fieldError("headers", err)
		}
		v, err := it.Value().String()
		if err != nil {
			return 0, nil, fieldError("headers", err)
		}
		header[k] = v
	}
	if err := it.Err(); err != nil {
		return 0, nil, fieldError("headers", err)
	}
	return status, header, nil
}
