package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"adhost/abi"
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
	if !safeToken(typ) {
		typ = "unknown"
	}
	return newError("PROVIDER_FAILED", "stream error "+typ)
}

// safeToken reports whether s is a short identifier (a vendor enum), safe
// to put into a debug message.
func safeToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
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

// maxRetryAfter bounds a Retry-After the adapter passes on.
const maxRetryAfter = 24 * time.Hour

// retryAfterMs parses Retry-After (RFC 9110 §10.2.3: delay-seconds or an
// HTTP-date) into milliseconds; 0 when absent or unusable.
func retryAfterMs(v string, now time.Time) int64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > maxRetryAfter.Seconds() {
			return 0
		}
		d = time.Duration(secs * float64(time.Second))
	} else if t, err := time.Parse(time.RFC1123, v); err == nil {
		d = t.Sub(now)
		if d < 0 {
			d = 0
		}
	} else {
		return 0
	}
	return min(d, maxRetryAfter).Milliseconds()
}

// transportError maps a failed HTTP call or stream read of the host:
// cancellation stays cancellation; the 10,000,000-byte stream bound (or the
// body bound) is RESPONSE_TOO_LARGE; a refused redirect or origin is
// PROVIDER_UNREACHABLE like in the SDK's own mapping, but not retryable
// (the endpoint is misconfigured: retrying cannot help); anything else is
// PROVIDER_UNREACHABLE (retryable) before the response started and
// INCOMPLETE_STREAM once it had (the stream broke off before its end).
func transportError(err error, started bool) error {
	if errors.Is(err, sdk.ErrCancelled) {
		return sdk.ErrCancelled
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		return se
	}
	var he *sdk.HTTPError
	if errors.As(err, &he) {
		switch he.Errno {
		case abi.ErrCancelled:
			return sdk.ErrCancelled
		case abi.ErrLimit:
			return newError(sdk.CodeResponseTooLarge, "response exceeds the host's size bound")
		case abi.ErrRedirect, abi.ErrDenied:
			return newError(sdk.CodeProviderUnreachable, "request refused by the host: "+he.Errno.Error())
		}
	}
	if started {
		return newError(sdk.CodeIncompleteStream, "stream broke off")
	}
	e := newError(sdk.CodeProviderUnreachable, "request failed")
	e.Retryable = true
	return e
}
