package main

import (
	"strconv"
	"time"

	sdk "adhost/sdk-plugin"
)

// Errors are *sdk.Error with a wire code (wire-core §7.2). Their messages
// are for the plugin's own tests and the host's debug logs; the host never
// shows them to a client (it uses the code's fixed public message), and they
// never carry the vendor's error body, which may echo prompts or secrets.

var errCancelled = sdk.ErrCancelled

func newError(code, msg string) *sdk.Error {
	return &sdk.Error{Code: code, Message: "anthropic: " + msg}
}

func errInvalidResponse(msg string) error {
	return newError("INVALID_PROVIDER_RESPONSE", msg)
}

func errIncomplete() error {
	return newError("INCOMPLETE_STREAM", "stream ended without message_stop")
}

func errTruncatedToolCall() error {
	return newError("TRUNCATED_TOOL_CALL", "tool_use input cut off at max_tokens")
}

func errRefusal() error {
	return newError("PROVIDER_REFUSAL", "stop_reason refusal")
}

func errProviderFailed(msg string) error {
	return newError("PROVIDER_FAILED", msg)
}

// streamError maps an in-stream error event
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events,
// types: https://docs.anthropic.com/en/api/errors). Anthropic documents that
// an overloaded_error in a stream "would normally correspond to an HTTP 529
// in a non-streaming context", so it is mapped like that 529: PROVIDER_ERROR,
// retryable. rate_limit_error is RATE_LIMITED like a 429. Every other error
// event is PROVIDER_FAILED (the provider reported a stream failure; not
// retryable).
func streamError(typ string) error {
	switch typ {
	case "overloaded_error":
		e := newError("PROVIDER_ERROR", "stream error overloaded_error")
		e.Retryable, e.Status = true, 529
		return e
	case "rate_limit_error":
		e := newError("RATE_LIMITED", "stream error rate_limit_error")
		e.Retryable = true
		return e
	}
	if !sdk.SafeToken(typ) {
		typ = "unknown"
	}
	return newError("PROVIDER_FAILED", "stream error "+typ)
}

// statusError maps a non-2xx response (https://docs.anthropic.com/en/api/errors):
// 429 → RATE_LIMITED (retryable, with Retry-After); 401/403 → PROVIDER_AUTH;
// 5xx and 529 (overloaded) → PROVIDER_ERROR retryable; other statuses →
// PROVIDER_ERROR, not retryable. The body is never read into the error.
func statusError(status int, header map[string]string) error {
	switch {
	case status == 429:
		e := newError("RATE_LIMITED", "HTTP 429")
		e.Retryable, e.Status = true, status
		e.RetryAfterMs = retryAfterMs(header["retry-after"], time.Now())
		return e
	case status == 401 || status == 403:
		e := newError("PROVIDER_AUTH", "HTTP "+strconv.Itoa(status))
		e.Status = status
		return e
	}
	e := newError("PROVIDER_ERROR", "HTTP "+strconv.Itoa(status))
	e.Status, e.Retryable = status, status >= 500
	return e
}

// retryAfterMs parses Retry-After (sdk.RetryAfterMs).
var retryAfterMs = sdk.RetryAfterMs

// transportError maps a failed HTTP call or stream read of the host
// (sdk.TransportError); started reports that the response had begun.
func transportError(err error, started bool) error {
	return sdk.TransportError("anthropic", err, started)
}
