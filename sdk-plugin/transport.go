package sdk

import (
	"errors"

	"adhost/abi"
)

// TransportError maps a failed Call.HTTP, or a failed read of its Response,
// to the error an adapter returns: cancellation stays ErrCancelled; an
// *Error passes unchanged; the host's size bound (abi.ErrLimit) is
// RESPONSE_TOO_LARGE; a refused redirect or origin is PROVIDER_UNREACHABLE
// like in the SDK's own mapping, but not retryable (the endpoint is
// misconfigured: retrying cannot help); anything else is
// PROVIDER_UNREACHABLE (retryable) before the response started and
// INCOMPLETE_STREAM once it had (the stream broke off before its end).
// vendor prefixes the private message ("vendor: …").
func TransportError(vendor string, err error, started bool) error {
	if errors.Is(err, ErrCancelled) {
		return ErrCancelled
	}
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	newError := func(code, msg string) *Error {
		return &Error{Code: code, Message: vendor + ": " + msg}
	}
	var he *HTTPError
	if errors.As(err, &he) {
		switch he.Errno {
		case abi.ErrCancelled:
			return ErrCancelled
		case abi.ErrLimit:
			return newError(CodeResponseTooLarge, "response exceeds the host's size bound")
		case abi.ErrRedirect, abi.ErrDenied:
			return newError(CodeProviderUnreachable, "request refused by the host: "+he.Errno.Error())
		}
	}
	if started {
		return newError(CodeIncompleteStream, "stream broke off")
	}
	e := newError(CodeProviderUnreachable, "request failed")
	e.Retryable = true
	return e
}

// SafeToken reports whether s is a short identifier (1 to 64 ASCII
// letters, digits and underscores, as a vendor's enum values are), safe to
// put into an error's private message.
func SafeToken(s string) bool {
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
