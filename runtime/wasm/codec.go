package wasm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// The complete op's input is encoded and its output decoded on every model
// turn. encoding/json's reflection costs a few microseconds per turn there,
// a noticeable share of a short fixture run, so both directions have a
// hand-written fast path:
//
//   - appendCompleteInput writes exactly the bytes json.Marshal writes
//     (same field order and omitempty rules, same string escaping including
//     HTML escaping, RawMessage fields compacted and HTML-escaped), so the
//     guest sees the same input either way; a test compares the two.
//   - decodeCompleteOutput decodes the common shape of a result directly
//     and hands anything it is not certain about — escapes, unknown or
//     differently cased keys, tool calls, odd numbers, malformed JSON — to
//     decodeStrict. The fast path never rejects: every error, and so every
//     INVALID_PROVIDER_RESULT, is still decided by encoding/json with
//     DisallowUnknownFields.

// appendCompleteInput appends the JSON of in, byte for byte what
// json.Marshal(in) returns.
func appendCompleteInput(b []byte, in *abi.CompleteInput) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = appendJSONString(b, in.Model)
	if in.Instructions != "" {
		b = append(b, `,"instructions":`...)
		b = appendJSONString(b, in.Instructions)
	}
	b = append(b, `,"messages":`...)
	if in.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range in.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendMessage(b, &in.Messages[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if len(in.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range in.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			d := &in.Tools[i]
			b = append(b, `{"name":`...)
			b = appendJSONString(b, d.Name)
			b = append(b, `,"description":`...)
			b = appendJSONString(b, d.Description)
			b = append(b, `,"inputSchema":`...)
			if b, err = appendRawJSON(b, d.InputSchema); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"maxOutputTokens":`...)
	b = strconv.AppendInt(b, int64(in.MaxOutputTokens), 10)
	if len(in.OutputSchema) > 0 {
		b = append(b, `,"outputSchema":`...)
		if b, err = appendRawJSON(b, in.OutputSchema); err != nil {
			return nil, err
		}
	}
	if len(in.Native) > 0 {
		b = append(b, `,"native":`...)
		if b, err = appendRawJSON(b, in.Native); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, int64(in.Step), 10)
	if in.Buffered {
		b = append(b, `,"buffered":true`...)
	}
	return append(b, '}'), nil
}

func appendMessage(b []byte, m *abi.Message) ([]byte, error) {
	var err error
	b = append(b, `{"role":`...)
	b = appendJSONString(b, m.Role)
	b = append(b, `,"content":`...)
	b = appendJSONString(b, m.Content)
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"toolCalls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			c := &m.ToolCalls[i]
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.ID)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, c.Name)
			b = append(b, `,"arguments":`...)
			if b, err = appendRawJSON(b, c.Arguments); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"toolCallId":`...)
		b = appendJSONString(b, m.ToolCallID)
	}
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, m.Name)
	}
	if len(m.Parts) > 0 {
		b = append(b, `,"parts":[`...)
		for i := range m.Parts {
			if i > 0 {
				b = append(b, ',')
			}
			p := &m.Parts[i]
			b = append(b, `{"type":`...)
			b = appendJSONString(b, p.Type)
			for _, f := range [...]struct{ name, v string }{
				{`,"text":`, p.Text}, {`,"mediaType":`, p.MediaType}, {`,"data":`, p.Data}, {`,"name":`, p.Name},
			} {
				if f.v != "" {
					b = append(b, f.name...)
					b = appendJSONString(b, f.v)
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendRawJSON appends a json.RawMessage the way json.Marshal does: null
// when empty, otherwise validated, compacted and HTML-escaped.
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(b, "null"...), nil
	}
	var c bytes.Buffer
	c.Grow(len(raw))
	if err := json.Compact(&c, raw); err != nil {
		return nil, err
	}
	var e bytes.Buffer
	e.Grow(c.Len())
	json.HTMLEscape(&e, c.Bytes())
	return append(b, e.Bytes()...), nil
}

// appendJSONString appends s exactly as json.Marshal encodes a string
// (HTML escaping on), so the input a guest reads is what the reflective
// encoder would have written.
func appendJSONString(b []byte, s string) []byte { return protocol.AppendJSONString(b, s, true) }

// decodeCompleteOutput decodes b into co with the semantics of
// decodeStrict (one JSON object, unknown fields and trailing data
// refused). The fast path covers results made of "text", "finishReason",
// "native" and a "usage" of plain integers, with exactly cased keys and
// strings without escapes; anything else is decoded by decodeStrict.
func decodeCompleteOutput(b []byte, co *abi.CompleteOutput) error {
	if fastCompleteOutput(b, co) {
		return nil
	}
	*co = abi.CompleteOutput{}
	return decodeStrict(b, co)
}

// fastCompleteOutput reports whether it decoded b completely. When it
// returns false, co may be partly filled and b is left to decodeStrict.
// Repeated keys go to the slow path too: encoding/json merges a repeated
// object into the one decoded before.
func fastCompleteOutput(b []byte, co *abi.CompleteOutput) bool {
	s := jsonCursor{b: b}
	return s.object(func(key []byte) int {
		switch string(key) {
		case "text":
			if v, ok := s.plainString(); ok {
				co.Text = string(v)
				return 0
			}
		case "finishReason":
			if v, ok := s.plainString(); ok {
				co.FinishReason = string(v)
				return 1
			}
		case "usage":
			if s.usage(co) {
				return 2
			}
		case "native":
			if v, ok := s.container(); ok {
				co.Native = append(json.RawMessage(nil), v...)
				return 3
			}
		}
		return -1
	}) && s.end()
}

// jsonCursor is a forward-only reader for fastCompleteOutput.
type jsonCursor struct {
	b []byte
	i int
}

func (s *jsonCursor) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after whitespace) when it is next.
func (s *jsonCursor) byte(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object whose members member decodes: given a key, it
// reads the value and returns the member's slot (0–3), or -1 to refuse the
// key or its value. A repeated slot is refused too: encoding/json merges a
// repeated object into the one decoded before, which the slow path does.
func (s *jsonCursor) object(member func(key []byte) int) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	var seen [4]bool
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		k := member(key)
		if k < 0 || seen[k] {
			return false
		}
		seen[k] = true
		if !s.byte(',') {
			return s.byte('}')
		}
	}
}

// end reports whether only whitespace is left.
func (s *jsonCursor) end() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

// plainString reads a string without escapes or control characters whose
// bytes are valid UTF-8: its decoded value is its raw content.
func (s *jsonCursor) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	return nil, false
}

// container returns the next value's bytes when it is a valid JSON object
// or array (other values, null included, go to the slow path).
func (s *jsonCursor) container() ([]byte, bool) {
	s.skipSpace()
	start := s.i
	if start >= len(s.b) || (s.b[start] != '{' && s.b[start] != '[') {
		return nil, false
	}
	depth := 0
	inString := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case inString && c == '\\':
			s.i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
		if depth == 0 {
			v := s.b[start:min(s.i, len(s.b))]
			return v, json.Valid(v)
		}
	}
	return nil, false
}

// usage reads a usage object of integer token counts (costs and anything
// else go to the slow path).
func (s *jsonCursor) usage(co *abi.CompleteOutput) bool {
	if !s.byte('{') {
		return false
	}
	u := new(abi.Usage)
	co.Usage = u
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		var dst **int64
		switch string(key) {
		case "inputTokens":
			dst = &u.InputTokens
		case "outputTokens":
			dst = &u.OutputTokens
		case "cachedInputTokens":
			dst = &u.CachedInputTokens
		case "reasoningTokens":
			dst = &u.ReasoningTokens
		case "cacheCreationInputTokens":
			dst = &u.CacheCreationInputTokens
		default:
			return false
		}
		if *dst != nil {
			return false // repeated key
		}
		n, ok := s.int64()
		if !ok {
			return false
		}
		*dst = &n
		if s.byte(',') {
			continue
		}
		return s.byte('}')
	}
}

// int64 reads an integer literal in canonical JSON form (optional minus,
// no leading zeros, no fraction or exponent) that fits in an int64.
func (s *jsonCursor) int64() (int64, bool) {
	s.skipSpace()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || s.i-digits > 18 || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return n, err == nil
}

// appendHTTPHead appends http_head's abi.HTTPResponse JSON for a response:
// byte for byte what json.Marshal writes for the status and a map of the
// lower-cased header names to their first values (keys sorted, HTML
// escaping on, an empty map omitted). It runs once per upstream response;
// the map and the reflective encoder cost a few microseconds and a dozen
// allocations there. Header names the transport produced are ASCII tokens,
// so the fast path sorts and lower-cases them in place; any other name, or
// two names equal once lower-cased, takes the encoding/json path.
func appendHTTPHead(b []byte, status int, h http.Header) []byte {
	var arr [32]string
	keys := arr[:0]
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		if !plainHeaderName(k) {
			return appendHTTPHeadSlow(b, status, h)
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareLowerASCII)
	for i := 1; i < len(keys); i++ {
		if compareLowerASCII(keys[i-1], keys[i]) == 0 {
			return appendHTTPHeadSlow(b, status, h)
		}
	}
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	if len(keys) > 0 {
		b = append(b, `,"headers":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			for j := 0; j < len(k); j++ {
				b = append(b, lowerASCII(k[j]))
			}
			b = append(b, '"', ':')
			b = appendJSONString(b, h[k][0])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendHTTPHeadSlow is the reference encoding of appendHTTPHead.
func appendHTTPHeadSlow(b []byte, status int, h http.Header) []byte {
	r := abi.HTTPResponse{Status: status, Headers: map[string]string{}}
	for k, v := range h {
		if len(v) > 0 {
			r.Headers[strings.ToLower(k)] = v[0]
		}
	}
	j, _ := json.Marshal(r)
	return append(b, j...)
}

// plainHeaderName reports whether k is printable ASCII that a JSON string
// holds unescaped once lower-cased (no quote, backslash or HTML-escaped
// byte), so that lower-casing byte by byte is strings.ToLower.
func plainHeaderName(k string) bool {
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// compareLowerASCII compares the ASCII lower-case forms of a and b.
func compareLowerASCII(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := lowerASCII(a[i]), lowerASCII(b[i]); x != y {
			return int(x) - int(y)
		}
	}
	return len(a) - len(b)
}

// startRequest is http_start's meta (abi.HTTPRequest) as the host uses it:
// the headers as a list, which the host only walks. Its slice is reused
// across the requests of an instance.
type startRequest struct {
	method, url string
	headers     []headerField
	stream      bool
}

type headerField struct{ name, value string }

// maxFastHeaders bounds the headers decodeHTTPRequest's fast path takes
// (it checks for repeated names pairwise); more go to encoding/json.
const maxFastHeaders = 16

// decodeHTTPRequest decodes http_start's meta into req with the semantics
// of decodeStrict into abi.HTTPRequest (a repeated header name keeps its
// last value, as in the map). Like decodeCompleteOutput it has a fast path
// for the shape guests send — exactly cased keys, each once, strings
// without escapes, a literal stream flag — and leaves everything else,
// every error included, to encoding/json.
func decodeHTTPRequest(b []byte, req *startRequest) error {
	hs := req.headers[:0]
	if cap(hs) > maxFastHeaders {
		hs = nil // grown by a request with many headers: not kept
	}
	*req = startRequest{headers: hs}
	if fastHTTPRequest(b, req) {
		return nil
	}
	*req = startRequest{headers: hs}
	var r abi.HTTPRequest
	if err := decodeStrict(b, &r); err != nil {
		return err
	}
	req.method, req.url, req.stream = r.Method, r.URL, r.Stream
	for k, v := range r.Headers {
		req.headers = append(req.headers, headerField{k, v})
	}
	return nil
}

func fastHTTPRequest(b []byte, req *startRequest) bool {
	s := jsonCursor{b: b}
	return s.object(func(key []byte) int {
		switch string(key) {
		case "method":
			if v, ok := s.plainString(); ok {
				req.method = internMethod(v)
				return 0
			}
		case "url":
			if v, ok := s.plainString(); ok {
				req.url = string(v)
				return 1
			}
		case "headers":
			if s.headerObject(req) {
				return 2
			}
		case "stream":
			switch {
			case s.literal("true"):
				req.stream = true
				return 3
			case s.literal("false"):
				req.stream = false
				return 3
			}
		}
		return -1
	}) && s.end()
}

// headerObject reads an object of plain string values with distinct names.
func (s *jsonCursor) headerObject(req *startRequest) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		name, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		value, ok := s.plainString()
		if !ok || len(req.headers) == maxFastHeaders {
			return false
		}
		for _, h := range req.headers {
			if h.name == string(name) {
				return false // repeated: the map keeps the last value
			}
		}
		req.headers = append(req.headers, headerField{string(name), string(value)})
		if s.byte(',') {
			continue
		}
		return s.byte('}')
	}
}

// literal consumes lit (after whitespace) when it is the next token.
func (s *jsonCursor) literal(lit string) bool {
	s.skipSpace()
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	if j := s.i + len(lit); j < len(s.b) {
		switch s.b[j] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	s.i += len(lit)
	return true
}

// internMethod returns the method as a constant string when it is one of
// the usual ones, sparing an allocation.
func internMethod(v []byte) string {
	switch string(v) {
	case http.MethodPost:
		return http.MethodPost
	case http.MethodGet:
		return http.MethodGet
	}
	return string(v)
}
