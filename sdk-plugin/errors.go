package sdk

import (
	"errors"
	"fmt"
	"strconv"

	"adhost/abi"
)

// Error is an error a plugin reports deliberately, with one of the provider
// or tool codes of wire-core §7.2 (PROVIDER_AUTH, RATE_LIMITED,
// PROVIDER_ERROR, PROVIDER_UNREACHABLE, PROVIDER_FAILED, PROVIDER_REFUSAL,
// INVALID_PROVIDER_RESPONSE, RESPONSE_TOO_LARGE, INCOMPLETE_STREAM,
// TRUNCATED_TOOL_CALL, AUTH_REQUIRED, TOOL_FAILED …). It becomes the
// abi.ErrorOutput of a StatusError result.
//
// Message is private: the host never forwards it to a client or a log line
// (the public message is fixed per code), so it may describe the upstream
// failure for the plugin's own tests. It still must not hold secrets.
type Error struct {
	Code      string
	Message   string
	Retryable bool
	// Status is the upstream HTTP status when the error came from one.
	Status int
	// RetryAfterMs is the upstream Retry-After in milliseconds, when known.
	RetryAfterMs int64
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Errorf returns an *Error with code and a formatted private message.
// Retryable is set for the codes whose condition is transient
// (RATE_LIMITED, PROVIDER_UNREACHABLE).
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: defaultRetryable(code)}
}

func defaultRetryable(code string) bool {
	return code == CodeRateLimited || code == CodeProviderUnreachable
}

// Codes a plugin reports most often (wire-core §7.2).
const (
	CodeProviderAuth            = "PROVIDER_AUTH"
	CodeRateLimited             = "RATE_LIMITED"
	CodeProviderError           = "PROVIDER_ERROR"
	CodeProviderUnreachable     = "PROVIDER_UNREACHABLE"
	CodeProviderFailed          = "PROVIDER_FAILED"
	CodeProviderRefusal         = "PROVIDER_REFUSAL"
	CodeInvalidProviderResponse = "INVALID_PROVIDER_RESPONSE"
	CodeResponseTooLarge        = "RESPONSE_TOO_LARGE"
	CodeIncompleteStream        = "INCOMPLETE_STREAM"
	CodeTruncatedToolCall       = "TRUNCATED_TOOL_CALL"
	CodeAuthRequired            = "AUTH_REQUIRED"
	CodeToolFailed              = "TOOL_FAILED"
	CodeInternalError           = "INTERNAL_ERROR"

	// Inspection codes (wire-extensions §7) for InspectOutput.Code.
	InspectCatalogAvailable     = "CATALOG_AVAILABLE"
	InspectAuthRequired         = "AUTH_REQUIRED"
	InspectAuthRejected         = "AUTH_REJECTED"
	InspectRateLimited          = "RATE_LIMITED"
	InspectProviderUnreachable  = "PROVIDER_UNREACHABLE"
	InspectInvalidResponse      = "INVALID_DISCOVERY_RESPONSE"
	InspectDiscoveryFailed      = "DISCOVERY_FAILED"
	InspectAccessDenied         = "ACCESS_DENIED"
	InspectDiscoveryUnsupported = "DISCOVERY_UNSUPPORTED"
)

// ErrCancelled is what a plugin returns when it stops because the call was
// cancelled (EmitText returned true, Cancelled() is true, or an HTTP call
// failed with abi.ErrCancelled). The result is abi.StatusCancelled.
var ErrCancelled = errors.New("sdk: cancelled")

// HTTPError is a host function's refusal or failure of an HTTP request.
type HTTPError struct {
	Errno abi.Errno
}

func (e *HTTPError) Error() string { return "sdk: http: " + e.Errno.Error() }

// Is makes errors.Is(err, ErrCancelled) true for a request the host aborted
// because the run was cancelled.
func (e *HTTPError) Is(target error) bool {
	return target == ErrCancelled && e.Errno == abi.ErrCancelled
}

// code maps a host refusal to the provider code a plugin would report for
// it when it returns the error unchanged.
func (e *HTTPError) code() string {
	switch e.Errno {
	case abi.ErrNetwork, abi.ErrDenied, abi.ErrRedirect:
		return CodeProviderUnreachable
	case abi.ErrLimit:
		return CodeResponseTooLarge
	}
	return CodeInternalError
}

// ResponseError maps a non-2xx upstream response to the provider error of
// wire-core §7.2: 401/403 → PROVIDER_AUTH, 429 → RATE_LIMITED (with
// Retry-After in seconds when the header has it), any other status →
// PROVIDER_ERROR, retryable when ≥ 500. It does not read the body: adapters
// that recognise vendor error bodies (a refusal, an overloaded code) check
// them first.
func ResponseError(r *Response) *Error {
	e := &Error{Status: r.Status, Message: "upstream status " + strconv.Itoa(r.Status)}
	switch {
	case r.Status == 401 || r.Status == 403:
		e.Code = CodeProviderAuth
	case r.Status == 429:
		e.Code, e.Retryable = CodeRateLimited, true
		if s, err := strconv.ParseInt(r.Get("retry-after"), 10, 64); err == nil && s >= 0 && s < 1<<31 {
			e.RetryAfterMs = s * 1000
		}
	default:
		e.Code, e.Retryable = CodeProviderError, r.Status >= 500
	}
	return e
}

// errorOutput turns a plugin's error into what the host receives. cancelled
// reports StatusCancelled: ErrCancelled in the chain, or any error once the
// call was cancelled. plain is the code for errors that carry none.
func errorOutput(c *Call, err error, plain string) (out abi.ErrorOutput, cancelled bool) {
	if errors.Is(err, ErrCancelled) || c.Cancelled() {
		return out, true
	}
	var pe *Error
	if errors.As(err, &pe) {
		code := pe.Code
		if code == "" {
			code = plain
		}
		return abi.ErrorOutput{Code: code, Message: pe.Message, Retryable: pe.Retryable,
			Status: pe.Status, RetryAfterMs: pe.RetryAfterMs}, false
	}
	var he *HTTPError
	if errors.As(err, &he) && plain != CodeToolFailed {
		code := he.code()
		return abi.ErrorOutput{Code: code, Message: err.Error(), Retryable: defaultRetryable(code)}, false
	}
	return abi.ErrorOutput{Code: plain, Message: err.Error()}, false
}
