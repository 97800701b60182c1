package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// emitter is what a turn streams to the host: *sdk.Call in production, a
// recorder in tests. Each method reports whether the run was cancelled.
type emitter interface {
	EmitTextBytes(b []byte) (cancelled bool)
	ToolCallDelta() (cancelled bool)
	Progress() (cancelled bool)
}

// turnStream follows one streamGenerateContent?alt=sse response: every SSE
// data is a GenerateContentResponse
// (https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse).
// Gemini's stream has no terminal event: it is complete when a chunk carried
// the candidate's finishReason, and a stream that ends without one is
// INCOMPLETE_STREAM. A non-streamed generateContent answer is the same
// object once.
//
// Each chunk is scanned once with jsonscan; nothing is decoded with
// reflection on this path.
type turnStream struct {
	out  emitter
	step int

	text  strings.Builder
	calls []abi.ToolCall
	// sigs are the thought signatures of the calls, by call id.
	sigs map[string]string

	finish string // the candidate's finishReason, "" until one arrived

	// The latest usageMetadata; nil fields were not reported.
	usageSeen                                  bool
	prompt, candidates, cached, thoughts, tool *int64

	buf []byte

	// Per-chunk scratch, kept here so the hot path does not allocate.
	fields [4]jsonscan.Value
	cand   [2]jsonscan.Value
	part   [4]jsonscan.Value
}

// maxCalls bounds the function calls of one turn (the host rejects more
// than 32; this only bounds memory).
const maxCalls = 1024

// handle processes one chunk.
func (s *turnStream) handle(data []byte) error {
	// One pass validates the chunk and finds the members handle needs.
	f := &s.fields
	if err := jsonscan.Pick(data, f[:], "candidates", "usageMetadata", "promptFeedback", "error"); err != nil {
		return errInvalidResponse("chunk is not a JSON object")
	}
	if e := f[3]; e.Exists() {
		// An error that interrupts the stream (google.rpc.Status).
		code, _ := e.Get("code")
		status, _ := e.Get("status")
		n, _ := code.Int()
		st, _ := status.String()
		return streamError(int(n), st)
	}
	if pf := f[2]; pf.Exists() {
		if br, err := pf.Get("blockReason"); err == nil && br.Kind() == jsonscan.String && !br.Equal("BLOCK_REASON_UNSPECIFIED") {
			return errRefusal()
		}
	}
	if f[0].Exists() {
		if err := s.candidate(f[0]); err != nil {
			return err
		}
	}
	if f[1].Kind() == jsonscan.Object {
		s.readUsage(f[1])
	}
	return nil
}

func (s *turnStream) candidate(v jsonscan.Value) error {
	if v.Kind() != jsonscan.Array {
		return errInvalidResponse("candidates is not an array")
	}
	// candidateCount is never set, so there is one candidate (index 0).
	// Each level is read in one pass (Iter, Pick) rather than with a Get
	// per field, which would rescan the same bytes.
	cands := v.Iter()
	if !cands.Next() {
		if cands.Err() != nil {
			return errInvalidResponse("malformed candidates")
		}
		return nil
	}
	g := &s.cand
	if err := cands.Value().Pick(g[:], "content", "finishReason"); err != nil {
		return errInvalidResponse("bad candidate")
	}
	if content := g[0]; content.Exists() {
		parts, err := content.Get("parts")
		if err != nil && err != jsonscan.ErrNotFound {
			return errInvalidResponse("bad content")
		}
		if err == nil {
			if err := s.parts(parts); err != nil {
				return err
			}
		}
	}
	if fr := g[1]; fr.Kind() == jsonscan.String && !fr.Equal("FINISH_REASON_UNSPECIFIED") {
		s.finish, _ = fr.String()
	}
	return nil
}

func (s *turnStream) parts(parts jsonscan.Value) error {
	if parts.Kind() != jsonscan.Array {
		return errInvalidResponse("parts is not an array")
	}
	it := parts.Iter()
	pf := &s.part
	for it.Next() {
		if err := it.Value().Pick(pf[:], "text", "functionCall", "thoughtSignature", "thought"); err != nil {
			return errInvalidResponse("part is not an object")
		}
		text, fc, sig := pf[0], pf[1], pf[2]
		thought, _ := pf[3].Bool()
		switch {
		case fc.Exists():
			if err := s.functionCall(fc, sig); err != nil {
				return err
			}
		case text.Kind() != jsonscan.String:
			// inline data, code execution … carry no visible text
		case thought:
			// A thought summary: real reasoning work, never visible text.
			if s.out.Progress() {
				return errCancelled
			}
		default:
			var err error
			if s.buf, err = text.AppendString(s.buf[:0]); err != nil {
				return errInvalidResponse("bad text")
			}
			if len(s.buf) == 0 {
				continue
			}
			s.text.Write(s.buf)
			if s.out.EmitTextBytes(s.buf) {
				return errCancelled
			}
		}
	}
	if it.Err() != nil {
		return errInvalidResponse("malformed parts")
	}
	return nil
}

// functionCall records one call. Gemini sends each call whole (name and
// args object) in one part and gives no call id, so the adapter makes
// stable, run-unique ids from the step and the call's position:
// "call_<step>_<n>".
func (s *turnStream) functionCall(fc, sig jsonscan.Value) error {
	if len(s.calls) >= maxCalls {
		return errInvalidResponse("too many function calls")
	}
	nm, _ := fc.Get("name")
	name, err := nm.String()
	if err != nil || name == "" {
		return errInvalidResponse("functionCall without name")
	}
	args := []byte("{}")
	if a, err := fc.Get("args"); err == nil {
		if a.Kind() != jsonscan.Object {
			if !a.IsNull() {
				return errInvalidResponse("functionCall args is not an object")
			}
		} else {
			args = append([]byte(nil), a.Raw()...)
		}
	}
	id := "call_" + strconv.Itoa(s.step) + "_" + strconv.Itoa(len(s.calls))
	s.calls = append(s.calls, abi.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)})
	if sig.Kind() == jsonscan.String {
		if v, err := sig.String(); err == nil && v != "" {
			if s.sigs == nil {
				s.sigs = map[string]string{}
			}
			s.sigs[id] = v
		}
	}
	if s.out.ToolCallDelta() {
		return errCancelled
	}
	return nil
}

// readUsage keeps the latest usageMetadata. Each chunk's metadata is a
// snapshot of the whole response so far, so it replaces the previous one.
func (s *turnStream) readUsage(u jsonscan.Value) {
	s.usageSeen = true
	s.prompt, s.candidates, s.cached, s.thoughts, s.tool = nil, nil, nil, nil, nil
	it := u.Iter()
	for it.Next() {
		k, v := it.Key(), it.Value()
		var dst **int64
		switch {
		case k.Equal("promptTokenCount"):
			dst = &s.prompt
		case k.Equal("candidatesTokenCount"):
			dst = &s.candidates
		case k.Equal("cachedContentTokenCount"):
			dst = &s.cached
		case k.Equal("thoughtsTokenCount"):
			dst = &s.thoughts
		case k.Equal("toolUsePromptTokenCount"):
			dst = &s.tool
		default:
			continue
		}
		if n, err := v.Int(); err == nil && n >= 0 {
			*dst = &n
		}
	}
}

// usage maps usageMetadata to the host's Usage
// (https://ai.google.dev/api/generate-content#UsageMetadata):
//   - inputTokens = promptTokenCount (which already includes cached content)
//   - toolUsePromptTokenCount (input the model read from tool use);
//   - cachedInputTokens = cachedContentTokenCount (a subset of the prompt);
//   - outputTokens = candidatesTokenCount + thoughtsTokenCount: Gemini's
//     candidates count excludes thinking, which is billed as output, and the
//     host's outputTokens includes reasoning;
//   - reasoningTokens = thoughtsTokenCount.
//
// Gemini's JSON omits zero counters, so once usageMetadata reported the
// candidates or thoughts count, the other one missing means 0. A counter
// never reported stays absent.
func (s *turnStream) usage() *abi.Usage {
	if !s.usageSeen {
		return nil
	}
	var u abi.Usage
	set := false
	if s.prompt != nil {
		if in, ok := sum(s.prompt, s.tool); ok {
			u.InputTokens = &in
			u.CachedInputTokens = s.cached
			set = true
		}
	}
	if s.candidates != nil || s.thoughts != nil {
		if out, ok := sum(s.candidates, s.thoughts); ok {
			u.OutputTokens = &out
			u.ReasoningTokens = s.thoughts
			set = true
		}
	}
	if !set {
		return nil
	}
	return &u
}

// result builds the turn's output once the stream ended.
func (s *turnStream) result() (*abi.CompleteOutput, error) {
	if s.finish == "" {
		return nil, errIncomplete()
	}
	out := &abi.CompleteOutput{Text: s.text.String(), ToolCalls: s.calls, Usage: s.usage()}
	switch s.finish {
	case "STOP":
		out.FinishReason = "stop"
	case "MAX_TOKENS":
		out.FinishReason = "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		// Content filters: a stable public refusal, never the vendor's
		// ratings or message.
		return nil, errRefusal()
	default:
		// MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
		// MISSING_THOUGHT_SIGNATURE, LANGUAGE, OTHER, NO_IMAGE … and any
		// reason added later: the model did not finish its turn.
		reason := s.finish
		if !sdk.SafeToken(reason) {
			reason = "unknown"
		}
		return nil, errProviderFailed("finishReason " + reason)
	}
	if len(s.sigs) > 0 {
		out.Native = nativeState(s.sigs) // Complete adds the earlier turns' signatures
	}
	return out, nil
}

// sum adds the reported counters (nil ones count 0); ok is false when the
// sum overflows, which no real count does: the field is then left out.
func sum(a, b *int64) (int64, bool) {
	var x, y int64
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	if x > math.MaxInt64-y {
		return 0, false
	}
	return x + y, true
}
