package main

import (
	"encoding/json"
	"math"
	"strings"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// emitter is what a turn streams to the host: *sdk.Call in production, a
// recorder in tests. Each method reports whether the run was cancelled.
type emitter interface {
	EmitTextBytes(b []byte) (cancelled bool)
	ToolCallDelta() (cancelled bool)
	Progress() (cancelled bool)
}

// Content block kinds of a message.
const (
	blockOther = iota // thinking, redacted_thinking, server tools, unknown
	blockText
	blockTool
)

type block struct {
	kind     int
	id, name string
	args     []byte // accumulated input_json_delta fragments (tool_use)
	stopped  bool
}

// turnStream follows one Messages API event stream
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming):
//
//	message_start, (content_block_start, content_block_delta*, content_block_stop)*,
//	message_delta+, message_stop — with ping and error events anywhere.
//
// It is fed one event at a time and never decodes with reflection: each
// event is scanned once with jsonscan.
type turnStream struct {
	out emitter

	text   strings.Builder
	blocks []*block // by content block index

	started, stopped bool
	stopReason       string

	// Usage as reported; nil = not reported.
	inputTokens, cacheRead, cacheCreation, outputTokens *int64

	buf  []byte // scratch for unescaping strings
	name []byte // scratch for an event's type

	// Per-event scratch, kept here so the hot path does not allocate.
	fields [nFields]jsonscan.Value
	delta  [3]jsonscan.Value
}

// Members of an event that handle reads, in one pass (jsonscan.Pick).
const (
	fType = iota
	fIndex
	fDelta
	fBlock
	fMessage
	fUsage
	fError
	nFields
)

var eventKeys = [nFields]string{"type", "index", "delta", "content_block", "message", "usage", "error"}

// handle processes one event. It returns done once message_stop arrived.
func (s *turnStream) handle(name, data []byte) (done bool, err error) {
	if s.stopped {
		return true, nil // events after message_stop are ignored
	}
	// One pass validates the event and finds every member handle needs.
	f := &s.fields
	if err := jsonscan.Pick(data, f[:], eventKeys[:]...); err != nil {
		return false, errInvalidResponse("event is not a JSON object")
	}
	ev := name
	if len(ev) == 0 || string(ev) == "message" { // no event: line; the data names its type
		s.name, _ = f[fType].AppendString(s.name[:0])
		ev = s.name
	}
	switch string(ev) {
	case "ping":
		return false, nil // keep-alive: never progress
	case "message_start":
		s.started = true
		if u, err := f[fMessage].Get("usage"); err == nil {
			s.readUsage(u)
		}
		// The output_tokens of message_start is a running count, not the
		// turn's: only message_delta's cumulative count is reported.
		s.outputTokens = nil
		return false, nil
	case "content_block_start":
		return false, s.blockStart(f[fIndex], f[fBlock])
	case "content_block_delta":
		return false, s.blockDelta(f[fIndex], f[fDelta])
	case "content_block_stop":
		b, err := s.block(f[fIndex])
		if err != nil {
			return false, err
		}
		b.stopped = true
		return false, nil
	case "message_delta":
		if !s.started {
			return false, errInvalidResponse("message_delta before message_start")
		}
		if r, err := f[fDelta].Get("stop_reason"); err == nil && r.Kind() == jsonscan.String {
			s.stopReason, _ = r.String()
		}
		if f[fUsage].Kind() == jsonscan.Object {
			s.readUsage(f[fUsage])
		}
		return false, nil
	case "message_stop":
		if !s.started {
			return false, errInvalidResponse("message_stop before message_start")
		}
		s.stopped = true
		return true, nil
	case "error":
		t, _ := f[fError].Get("type")
		typ, _ := t.String()
		return false, streamError(typ)
	}
	// Anthropic may add event types; its versioning policy asks clients to
	// ignore the ones they do not know.
	return false, nil
}

// block returns the content block an index value names.
func (s *turnStream) block(v jsonscan.Value) (*block, error) {
	if !v.Exists() {
		return nil, errInvalidResponse("content block event without index")
	}
	i, err := v.Int()
	if err != nil || i < 0 || i >= int64(len(s.blocks)) || s.blocks[i] == nil {
		return nil, errInvalidResponse("content block event for an unknown index")
	}
	return s.blocks[i], nil
}

// maxBlocks bounds the content blocks of one message (the host bounds the
// stream's bytes; this bounds the index table).
const maxBlocks = 4096

func (s *turnStream) blockStart(v, cb jsonscan.Value) error {
	if !s.started {
		return errInvalidResponse("content_block_start before message_start")
	}
	if !v.Exists() {
		return errInvalidResponse("content_block_start without index")
	}
	i, err := v.Int()
	if err != nil || i < 0 || i >= maxBlocks {
		return errInvalidResponse("content_block_start with a bad index")
	}
	for int64(len(s.blocks)) <= i {
		s.blocks = append(s.blocks, nil)
	}
	if s.blocks[i] != nil {
		return errInvalidResponse("content block index repeated")
	}
	if cb.Kind() != jsonscan.Object {
		return errInvalidResponse("content_block_start without content_block")
	}
	b := &block{}
	s.blocks[i] = b
	t, _ := cb.Get("type")
	switch {
	case t.Equal("text"):
		b.kind = blockText
		// The block opens empty in practice; emit any initial text anyway.
		if tv, err := cb.Get("text"); err == nil && tv.Kind() == jsonscan.String {
			return s.emitText(tv)
		}
	case t.Equal("tool_use"):
		b.kind = blockTool
		id, _ := cb.Get("id")
		nm, _ := cb.Get("name")
		b.id, _ = id.String()
		b.name, _ = nm.String()
		if b.id == "" || b.name == "" {
			return errInvalidResponse("tool_use block without id or name")
		}
	}
	return nil
}

func (s *turnStream) blockDelta(index, d jsonscan.Value) error {
	b, err := s.block(index)
	if err != nil {
		return err
	}
	if b.stopped {
		return errInvalidResponse("delta after content_block_stop")
	}
	if d.Kind() != jsonscan.Object {
		return errInvalidResponse("content_block_delta without delta")
	}
	g := &s.delta
	if err := d.Pick(g[:], "type", "text", "partial_json"); err != nil {
		return errInvalidResponse("malformed delta")
	}
	typ, text, partial := g[0], g[1], g[2]
	switch {
	case typ.Equal("text_delta"):
		if b.kind != blockText {
			return errInvalidResponse("text_delta on a non-text block")
		}
		if text.Kind() != jsonscan.String {
			return errInvalidResponse("text_delta without text")
		}
		return s.emitText(text)
	case typ.Equal("input_json_delta"):
		if b.kind != blockTool {
			return errInvalidResponse("input_json_delta on a non-tool block")
		}
		if partial.Kind() != jsonscan.String {
			return errInvalidResponse("input_json_delta without partial_json")
		}
		n := len(b.args)
		if b.args, err = partial.AppendString(b.args); err != nil {
			return errInvalidResponse("bad partial_json")
		}
		if len(b.args) > n && s.out.ToolCallDelta() {
			return errCancelled
		}
	case typ.Equal("thinking_delta"):
		// Extended thinking: real work, never visible text.
		if s.out.Progress() {
			return errCancelled
		}
	}
	// signature_delta, citations_delta and future delta types carry nothing
	// the host shows.
	return nil
}

func (s *turnStream) emitText(v jsonscan.Value) error {
	var err error
	s.buf, err = v.AppendString(s.buf[:0])
	if err != nil {
		return errInvalidResponse("bad text")
	}
	if len(s.buf) == 0 {
		return nil
	}
	s.text.Write(s.buf)
	if s.out.EmitTextBytes(s.buf) {
		return errCancelled
	}
	return nil
}

// readUsage takes the usage counters present in u (message_start's
// message.usage or message_delta's usage, whose counts are cumulative).
func (s *turnStream) readUsage(u jsonscan.Value) {
	it := u.Iter()
	for it.Next() {
		k, v := it.Key(), it.Value()
		var dst **int64
		switch {
		case k.Equal("input_tokens"):
			dst = &s.inputTokens
		case k.Equal("cache_read_input_tokens"):
			dst = &s.cacheRead
		case k.Equal("cache_creation_input_tokens"):
			dst = &s.cacheCreation
		case k.Equal("output_tokens"):
			dst = &s.outputTokens
		default:
			continue
		}
		if n, err := v.Int(); err == nil && n >= 0 {
			*dst = &n
		}
	}
}

// usage maps what Anthropic reported to the host's Usage
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance):
// Anthropic's input_tokens counts only the tokens after the last cache
// breakpoint, so total input = input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens; cachedInputTokens is the cache read part.
// Output tokens come from message_delta's cumulative count. Nothing is
// invented: an absent counter stays absent.
func (s *turnStream) usage() *abi.Usage {
	var u abi.Usage
	set := false
	if s.inputTokens != nil {
		total, ok := *s.inputTokens, true
		for _, p := range []*int64{s.cacheRead, s.cacheCreation} {
			if p != nil {
				if total > math.MaxInt64-*p {
					ok = false // not a count anyone reported: leave it out
					break
				}
				total += *p
			}
		}
		if ok {
			u.InputTokens = &total
			set = true
		}
	}
	if u.InputTokens != nil {
		u.CachedInputTokens = s.cacheRead
		u.CacheCreationInputTokens = s.cacheCreation
	}
	if s.outputTokens != nil {
		u.OutputTokens = s.outputTokens
		set = true
	}
	if !set {
		return nil
	}
	return &u
}

// result builds the turn's output once the stream ended. A stream without
// message_stop is INCOMPLETE_STREAM, never a success.
func (s *turnStream) result() (*abi.CompleteOutput, error) {
	if !s.stopped {
		return nil, errIncomplete()
	}
	out := &abi.CompleteOutput{Text: s.text.String(), Usage: s.usage()}
	truncated := false
	for _, b := range s.blocks {
		if b == nil || b.kind != blockTool {
			continue
		}
		args := b.args
		if len(args) == 0 {
			args = []byte("{}") // a tool called without input
		}
		v, err := jsonscan.Parse(args)
		if err != nil || v.Kind() != jsonscan.Object || !b.stopped {
			truncated = true
			continue
		}
		out.ToolCalls = append(out.ToolCalls, abi.ToolCall{ID: b.id, Name: b.name, Arguments: json.RawMessage(args)})
	}
	switch s.stopReason {
	case "max_tokens", "model_context_window_exceeded":
		if truncated {
			return nil, errTruncatedToolCall()
		}
		out.FinishReason = "length"
	case "pause_turn":
		// Only server tools pause a turn, and the adapter offers none:
		// continuing it is not something this adapter can do honestly.
		return nil, errProviderFailed("turn paused")
	case "refusal":
		// Streaming classifiers stopped the model: a refusal, even if some
		// text was already streamed.
		return nil, errRefusal()
	default:
		// end_turn, stop_sequence, tool_use; unknown reasons are treated as
		// a normal stop.
		if truncated {
			return nil, errInvalidResponse("tool_use input is not a complete JSON object")
		}
		out.FinishReason = "stop"
	}
	return out, nil
}
