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
	if plan, usage, errv, ok := quickChunk(data); ok {
		// The common chunk: scalar members, then a single-choice array of
		// the common shape, then usage/error (see quickChunk).
		if errv != nil && !isNull(errv) {
			return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error object"}
		}
		if err := s.apply(&plan); err != nil {
			return err
		}
		return s.setUsage(usage)
	}
	choices, usage, errv, object, ok, slow := topLevel(data)
	if slow {
		choices, usage, errv, object, ok = topLevelSlow(data)
	}
	if !ok {
		return invalid("stream chunk is not a JSON object")
	}
	failed := errv != nil && !isNull(errv)
	if failed {
		return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error object"}
	}
	if string(object) == `"error"` {
		// vLLM's streamed error: {"object":"error","message":…,"code":…}.
		return &sdk.Error{Code: sdk.CodeProviderFailed, Message: "stream error chunk"}
	}
	if choices != nil && !isNull(choices) {
		if plan, n, ok := parseFastChoices(choices); ok && isBlank(choices[n:]) {
			if err := s.apply(&plan); err != nil {
				return err
			}
			choices = nil
		}
	}
	if choices != nil && !isNull(choices) {
		var cs skim
		cs.reset(choices)
		if !cs.enter('[') {
			return invalid("choices is not an array")
		}
		for first := true; cs.next(']', &first); {
			if err := s.choice(&cs); err != nil {
				return err
			}
		}
		if cs.bad || !cs.end() {
			return invalid("choices is malformed")
		}
	}
	return s.setUsage(usage)
}

// setUsage maps a usage member (nil or null: none in this chunk).
func (s *turnStream) setUsage(usage []byte) error {
	if usage == nil || isNull(usage) {
		return nil
	}
	v, err := jsonscan.Parse(usage)
	if err != nil || v.Kind() != jsonscan.Object {
		return invalid("usage is not an object")
	}
	s.usage = mapUsage(v)
	return nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

var choicesKey = []byte(`"choices":`)

// quickChunk reads the usual chunk without looking at most of its bytes:
// in the sandbox even a tight loop costs ~50 ns a byte, and the top level
// of a chunk (id, object, created, model, system_fingerprint …) is two
// thirds of it and of no use to the adapter. It applies when the chunk is
// an object whose first '[' opens the value of a "choices" key, with no
// '{' or '[' before it — so every member before choices is a scalar, which
// is all the adapter would skip anyway — and the choices array has the
// common shape (parseFastChoices). The members after the array (usage,
// error …) are read in full with skim. ok is false, with nothing changed,
// for any other chunk: the caller then reads it all (topLevel).
//
// What it does not read are those leading scalar members: a chunk broken
// there is read as if it were not (nothing in them reaches the host), and a
// scalar "error" member or "object":"error" before choices goes unnoticed —
// errors come as {"error":{…}} or without choices, and take the full way.
// (Looking for them costs more than the rest of the chunk: in the sandbox a
// bytes.Index over the prefix took ~6 µs of the ~30.)
func quickChunk(d []byte) (plan fastPlan, usage, errv []byte, ok bool) {
	if len(d) < 2 || d[0] != '{' {
		return plan, nil, nil, false
	}
	p := bytes.IndexByte(d, '[')
	if p < len(choicesKey)+1 || !bytes.Equal(d[p-len(choicesKey):p], choicesKey) ||
		bytes.IndexByte(d[1:p], '{') >= 0 {
		return plan, nil, nil, false
	}
	if k := p - len(choicesKey) - 1; d[k] != '{' && d[k] != ',' {
		return plan, nil, nil, false // the key must start a member
	}

	plan, n, ok := parseFastChoices(d[p:])
	if !ok {
		return plan, nil, nil, false
	}
	tail := d[p+n:]
	usage, errv, ok, slow := tailMembers(tail)
	if slow {
		usage, errv, ok = skimTail(tail)
	}
	return plan, usage, errv, ok
}

// skimTail reads the members after a chunk's choices array (tail starts
// just after its ']') to the end of the chunk: the spans of usage and
// error, and ok = false for a malformed tail or a second choices member
// (the last one would win: the caller then reads the chunk in full).
func skimTail(tail []byte) (usage, errv []byte, ok bool) {
	var sc skim
	sc.reset(tail)
	for first := false; sc.next('}', &first); {
		switch string(sc.key()) {
		case "choices":
			return nil, nil, false // a duplicate: the last one would win
		case "usage":
			usage = sc.value()
		case "error":
			errv = sc.value()
		default:
			sc.skip(0)
		}
	}
	if sc.bad || !sc.end() {
		return nil, nil, false
	}
	return usage, errv, true
}

// tailMembers is skimTail in one loop without a call per token, for the
// usual tail of scalar members: "usage":null from OpenAI, but all of
// id, model, object … from servers that write keys in sorted order, where
// skim's calls per token made the tail cost more than the choices. It
// checks what skim checks (member syntax, number grammar, literals, the
// end of input) and returns what skimTail would; slow reports a tail it
// leaves to skimTail: one with a backslash anywhere, or a nested value.
func tailMembers(t []byte) (usage, errv []byte, ok, slow bool) {
	// One look for escapes over the whole tail (vendors send none there)
	// rather than one per string: each memchr call has a fixed cost.
	if bytes.IndexByte(t, '\\') >= 0 {
		return nil, nil, false, true
	}
	i, n := 0, len(t)
	for {
		for i < n && isSpace(t[i]) {
			i++
		}
		if i >= n {
			return nil, nil, false, false
		}
		if t[i] == '}' {
			i++
			break
		}
		if t[i] != ',' {
			return nil, nil, false, false
		}
		i++
		for i < n && isSpace(t[i]) {
			i++
		}
		// The key.
		if i >= n || t[i] != '"' {
			return nil, nil, false, false
		}
		ks := i + 1
		j := bytes.IndexByte(t[ks:], '"')
		if j < 0 {
			return nil, nil, false, false
		}
		key := t[ks : ks+j]
		if string(key) == "choices" {
			return nil, nil, false, false // a duplicate: the last one would win
		}
		i = ks + j + 1
		for i < n && isSpace(t[i]) {
			i++
		}
		if i >= n || t[i] != ':' {
			return nil, nil, false, false
		}
		i++
		for i < n && isSpace(t[i]) {
			i++
		}
		if i >= n {
			return nil, nil, false, false
		}
		// The value.
		vs := i
		switch c := t[i]; {
		case c == '"':
			j := bytes.IndexByte(t[i+1:], '"')
			if j < 0 {
				return nil, nil, false, false
			}
			i += j + 2
		case c == 'n' || c == 't' || c == 'f':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if n-i < len(lit) || string(t[i:i+len(lit)]) != lit {
				return nil, nil, false, false
			}
			i += len(lit)
		case c == '-' || isDigit(c):
			if i = numberEnd(t, i); i < 0 {
				return nil, nil, false, false
			}
		case c == '{' || c == '[':
			return nil, nil, false, true
		default:
			return nil, nil, false, false
		}
		switch string(key) {
		case "usage":
			usage = t[vs:i]
		case "error":
			errv = t[vs:i]
		}
	}
	for i < n && isSpace(t[i]) {
		i++
	}
	if i != n {
		return nil, nil, false, false
	}
	return usage, errv, true, false
}

// numberEnd returns the end of the number that starts at d[i] per the JSON
// grammar (as skim.number reads it), or -1.
func numberEnd(d []byte, i int) int {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	return i
}

// topLevelSlow is topLevel for the inputs it leaves to skim.
func topLevelSlow(data []byte) (choices, usage, errv, object []byte, ok bool) {
	var sc skim
	sc.reset(data)
	if !sc.enter('{') {
		return nil, nil, nil, nil, false
	}
	for first := true; sc.next('}', &first); {
		switch string(sc.key()) {
		case "choices":
			choices = sc.value()
		case "usage":
			usage = sc.value()
		case "error":
			if v := sc.value(); v != nil && !isNull(v) {
				errv = v
			}
		case "object":
			if v := sc.value(); string(v) == `"error"` {
				object = v
			}
		default:
			sc.skip(0)
		}
	}
	return choices, usage, errv, object, !sc.bad && sc.end()
}

func isNull(span []byte) bool { return string(span) == "null" }

func isString(span []byte) bool { return len(span) > 0 && span[0] == '"' }

// choice reads and applies the element of choices at c's position. Only
// choice 0 exists (the adapter never asks for n > 1); others are ignored.
func (s *turnStream) choice(c *skim) error {
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
		b, ok := appendDecoded(s.buf[:0], finish)
		if !ok {
			return invalid("bad finish_reason")
		}
		s.buf = b
		if string(b) != s.finish {
			s.finish = finishName(b)
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
			b, ok := appendDecoded(s.buf[:0], v)
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
		b, ok := appendDecoded(s.buf[:0], id)
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
				b, ok := appendDecoded(s.buf[:0], v)
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
					if call.args, ok = appendDecoded(call.args, v); !ok {
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
	b := &usageBlock{}
	for it := u.Iter(); it.Next(); {
		k, v := it.Key(), it.Value()
		switch {
		case k.Equal("prompt_tokens"):
			b.u.InputTokens = b.count(0, v)
		case k.Equal("completion_tokens"):
			b.u.OutputTokens = b.count(1, v)
		case k.Equal("prompt_tokens_details"):
			if c, err := v.Get("cached_tokens"); err == nil {
				b.u.CachedInputTokens = b.count(2, c)
			}
		case k.Equal("completion_tokens_details"):
			if r, err := v.Get("reasoning_tokens"); err == nil {
				b.u.ReasoningTokens = b.count(3, r)
			}
		}
	}
	return &b.u
}

// usageBlock is a turn's usage with the storage of its counts: one
// allocation where a pointer per count made up to five (each costs about a
// microsecond in the sandbox).
type usageBlock struct {
	u abi.Usage
	n [4]int64
}

// count stores v in slot i and points to it: nil (unknown) for a value that
// is not a non-negative integer.
func (b *usageBlock) count(i int, v jsonscan.Value) *int64 {
	n, err := v.Int()
	if err != nil || n < 0 {
		return nil
	}
	b.n[i] = n
	return &b.n[i]
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

// Kinds of the delta members fastChoices records.
const (
	itemContent = iota + 1
	itemRefusal
	itemReasoning
)

// fastPlan is what parseFastChoices found: the finish_reason and the
// delta members to apply, in order.
type fastPlan struct {
	finish []byte
	items  [3]struct {
		kind int
		span []byte
	}
	n int
}

// parseFastChoices reads a choices array of the common shape — one element
// of scalar members (index 0, finish_reason, logprobs null …) and a delta
// of scalar members (role, content, refusal, reasoning) — in one loop
// without a function call per token (see quickChunk for why). It returns
// the plan and the length of the array, or ok = false for anything else
// (tool calls, a second choice, nested values, escaped keys, duplicates …),
// which choice then reads in full. It has no effect: apply does.
func parseFastChoices(d []byte) (plan fastPlan, end int, ok bool) {
	i, n := 0, len(d)
	// Whitespace is rare inside vendor chunks; each skip is an inline loop.
	for i < n && isSpace(d[i]) {
		i++
	}
	if i >= n || d[i] != '[' {
		return plan, 0, false
	}
	i++
	for i < n && isSpace(d[i]) {
		i++
	}
	if i >= n || d[i] != '{' {
		return plan, 0, false
	}
	i++
	inDelta, first := false, true
	for {
		for i < n && isSpace(d[i]) {
			i++
		}
		if i >= n {
			return plan, 0, false
		}
		if d[i] == '}' && first {
			i++
			first = false
			if inDelta {
				inDelta = false
				goto closed
			}
			break // {} as the choice
		}
		first = false
		if d[i] != '"' {
			return plan, 0, false
		}
		{
			ks := i + 1
			j := bytes.IndexByte(d[ks:], '"')
			if j < 0 {
				return plan, 0, false
			}
			key := d[ks : ks+j]
			i = ks + j + 1
			for i < n && isSpace(d[i]) {
				i++
			}
			if i >= n || d[i] != ':' {
				return plan, 0, false
			}
			i++
			for i < n && isSpace(d[i]) {
				i++
			}
			if i >= n {
				return plan, 0, false
			}
			if !inDelta && string(key) == "delta" {
				if d[i] != '{' {
					return plan, 0, false
				}
				i++
				inDelta, first = true, true
				continue
			}
			vs := i
			switch c := d[i]; {
			case c == '"':
				if i = skipString(d, i+1); i < 0 {
					return plan, 0, false
				}
			case c == 'n' && n-i >= 4 && string(d[i:i+4]) == "null":
				i += 4
			case c == 't' && n-i >= 4 && string(d[i:i+4]) == "true":
				i += 4
			case c == 'f' && n-i >= 5 && string(d[i:i+5]) == "false":
				i += 5
			case c == '-' || isDigit(c):
				for i < n && (isDigit(d[i]) || d[i] == '-' || d[i] == '+' || d[i] == '.' || d[i] == 'e' || d[i] == 'E') {
					i++
				}
			default:
				return plan, 0, false // nested value: tool_calls, logprobs content …
			}
			v := d[vs:i]
			if inDelta {
				kind := 0
				switch string(key) {
				case "content":
					kind = itemContent
				case "refusal":
					kind = itemRefusal
				case "reasoning_content", "reasoning":
					kind = itemReasoning
				case "tool_calls":
					if !isNull(v) {
						return plan, 0, false
					}
				}
				if kind != 0 && v[0] == '"' {
					for k := 0; k < plan.n; k++ {
						if plan.items[k].kind == kind {
							return plan, 0, false // duplicate member: leave it to the full reader
						}
					}
					if plan.n == len(plan.items) {
						return plan, 0, false
					}
					plan.items[plan.n].kind, plan.items[plan.n].span = kind, v
					plan.n++
				}
			} else {
				switch string(key) {
				case "index":
					if string(v) != "0" {
						return plan, 0, false
					}
				case "finish_reason":
					if plan.finish != nil {
						return plan, 0, false
					}
					plan.finish = v
				}
			}
		}
	closed:
		for i < n && isSpace(d[i]) {
			i++
		}
		if i >= n {
			return plan, 0, false
		}
		switch d[i] {
		case ',':
			i++
			continue
		case '}':
			i++
			if inDelta {
				inDelta = false
				goto closed
			}
		default:
			return plan, 0, false
		}
		break
	}
	for i < n && isSpace(d[i]) {
		i++
	}
	if i >= n || d[i] != ']' {
		return plan, 0, false
	}
	return plan, i + 1, true
}

// apply applies a fastPlan as choice would.
func (s *turnStream) apply(plan *fastPlan) error {
	finish := plan.finish
	if finish != nil && finish[0] == '"' {
		b, ok := appendDecoded(s.buf[:0], finish)
		if !ok {
			return invalid("bad finish_reason")
		}
		s.buf = b
		if string(b) != s.finish {
			s.finish = finishName(b)
		}
	}
	for _, it := range plan.items[:plan.n] {
		switch it.kind {
		case itemContent:
			b, ok := appendDecoded(s.buf[:0], it.span)
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
		case itemRefusal:
			if len(it.span) > 2 {
				return &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "model refused"}
			}
		case itemReasoning:
			if len(it.span) > 2 && s.out.Progress() {
				return errCancelled
			}
		}
	}
	return nil
}

// finishName returns finish_reason b as a string, without allocating for
// the names OpenAI sends (one per turn, in the sandbox ~1 µs each).
func finishName(b []byte) string {
	switch string(b) {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	case "function_call":
		return "function_call"
	}
	return string(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
