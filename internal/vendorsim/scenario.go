package vendorsim

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Conformance scenario inputs (wire-core §16) and the markers the responder
// answers with.
const (
	ScenarioText         = "conformance:text"
	ScenarioStructured   = "conformance:structured"
	ScenarioTools        = "conformance:tools"
	ScenarioPrivateError = "conformance:private-error"
	ScenarioCancel       = "conformance:cancel"

	// SecretMarker is what the private-error scenario puts into the vendor's
	// error body; it must never reach a public event.
	SecretMarker = "conformance-secret-marker"
	// ConformanceTool is the tool the tools scenario calls.
	ConformanceTool = "conformance_lookup"
	// ConformanceToolCallID is the id of that call.
	ConformanceToolCallID = "call_conformance_1"
)

// Fault is a failure mode of the conformance responder. A request whose last
// user message is "vendorsim:<fault>" gets it, and so does every generation
// request when Options.Fault is set.
type Fault string

const (
	FaultNone          Fault = ""
	FaultRateLimit     Fault = "rate-limit"     // 429 with Retry-After: 2
	FaultUnauthorized  Fault = "unauthorized"   // 401
	FaultForbidden     Fault = "forbidden"      // 403
	FaultServerError   Fault = "server-error"   // 500
	FaultBadRequest    Fault = "bad-request"    // 400
	FaultStreamError   Fault = "stream-error"   // one chunk, then the vendor's in-stream error event
	FaultTruncated     Fault = "truncated"      // one chunk, then EOF without the terminal marker
	FaultOversize      Fault = "oversize"       // > 10,000,000 bytes of SSE, then a normal end
	FaultHold          Fault = "hold"           // one tool-argument fragment, then hold until cancelled
	FaultRefusal       Fault = "refusal"        // the vendor's content-filter / safety stop
	FaultLength        Fault = "length"         // text cut off at the token limit
	FaultTruncatedTool Fault = "truncated-tool" // a tool call whose arguments are cut off at the limit
	FaultUsage         Fault = "usage"          // text with full usage (cached and reasoning included)
)

// FaultPrefix introduces a fault in the last user message.
const FaultPrefix = "vendorsim:"

// OversizeBytes is how much FaultOversize streams: past the host's
// 10,000,000-byte bound on upstream SSE data.
const OversizeBytes = 10_500_000

// Answer is what the conformance responder decided for one prompt: a Reply
// or an HTTP error.
type Answer struct {
	Reply *Reply
	Error *HTTPError
}

// Respond is the default decision function of the conformance responder.
// fault, when not FaultNone, overrides the prompt.
func Respond(p *Prompt, fault Fault) Answer {
	if fault == FaultNone {
		if f, ok := strings.CutPrefix(strings.TrimSpace(p.LastUser), FaultPrefix); ok {
			fault = Fault(f)
		}
	}
	if fault != FaultNone {
		return faultAnswer(fault)
	}
	switch strings.TrimSpace(p.LastUser) {
	case ScenarioText:
		return Answer{Reply: &Reply{Chunks: []string{"Hello", " fixture"}}}
	case ScenarioStructured:
		return Answer{Reply: &Reply{Chunks: []string{`{"ok":`, `true}`}}}
	case ScenarioTools:
		for _, tr := range p.ToolResults {
			if tr.CallID != ConformanceToolCallID && tr.Name != ConformanceTool {
				continue
			}
			return Answer{Reply: &Reply{Chunks: []string{"tool receipt: ", receipt(tr.Content)}}}
		}
		return Answer{Reply: &Reply{ToolCalls: []ReplyToolCall{{
			ID: ConformanceToolCallID, Name: ConformanceTool, Args: []string{`{"val`, `ue":7}`},
		}}}}
	case ScenarioPrivateError:
		return Answer{Error: &HTTPError{Status: 500, Type: "server_error",
			Message: "upstream exploded: " + SecretMarker + " (private detail)"}}
	case ScenarioCancel:
		return faultAnswer(FaultHold)
	}
	return Answer{Reply: &Reply{
		Chunks: []string{"Hello", " from", " vendorsim"},
		Usage:  &Usage{Input: Int64(12), Output: Int64(3)},
	}}
}

// receipt renders the receipt field of a tool output such as {"receipt":7}.
func receipt(content string) string {
	var v struct {
		Receipt json.RawMessage `json:"receipt"`
	}
	if json.Unmarshal([]byte(content), &v) != nil || len(v.Receipt) == 0 {
		return "missing"
	}
	if n, err := strconv.ParseInt(string(v.Receipt), 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return string(v.Receipt)
}

func faultAnswer(f Fault) Answer {
	switch f {
	case FaultRateLimit:
		return Answer{Error: &HTTPError{Status: 429, Message: "Rate limit reached for requests", RetryAfter: "2"}}
	case FaultUnauthorized:
		return Answer{Error: &HTTPError{Status: 401, Message: "Incorrect API key provided"}}
	case FaultForbidden:
		return Answer{Error: &HTTPError{Status: 403, Message: "Permission denied"}}
	case FaultServerError:
		return Answer{Error: &HTTPError{Status: 500, Message: "The server had an error while processing your request"}}
	case FaultBadRequest:
		return Answer{Error: &HTTPError{Status: 400, Message: "Invalid request"}}
	case FaultStreamError:
		return Answer{Reply: &Reply{Chunks: []string{"partial"}, StreamError: "The server had an error while processing your request"}}
	case FaultTruncated:
		return Answer{Reply: &Reply{Chunks: []string{"partial"}, Truncate: true}}
	case FaultOversize:
		return Answer{Reply: &Reply{Chunks: []string{"big"}, PadBytes: OversizeBytes}}
	case FaultHold:
		return Answer{Reply: &Reply{ToolCalls: []ReplyToolCall{{
			ID: ConformanceToolCallID, Name: ConformanceTool, Args: []string{`{"val`, `ue":7}`},
		}}, Hold: true}}
	case FaultRefusal:
		return Answer{Reply: &Reply{Finish: FinishRefusal}}
	case FaultLength:
		return Answer{Reply: &Reply{Chunks: []string{"cut"}, Finish: FinishLength}}
	case FaultTruncatedTool:
		return Answer{Reply: &Reply{ToolCalls: []ReplyToolCall{{
			ID: "call_cut", Name: ConformanceTool, Args: []string{`{"val`},
		}}, Finish: FinishLength}}
	case FaultUsage:
		return Answer{Reply: &Reply{
			Chunks: []string{"counted"},
			Usage:  &Usage{Input: Int64(100), Output: Int64(40), CachedInput: Int64(64), Reasoning: Int64(16)},
		}}
	}
	return Answer{Error: &HTTPError{Status: 400, Message: "unknown vendorsim fault " + string(f)}}
}
