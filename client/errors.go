package client

import (
	"errors"
	"fmt"

	"adhost/runtime/protocol"
)

// Error is every error the client returns (except errors returned by a
// caller's own Stream callback, which are passed through unchanged).
//
// Code is the wire code: either what the host sent (HTTP error body or a
// run.failed/run.cancelled event; unknown codes are preserved) or one of the
// client-only codes. Status is the HTTP status for HTTP errors and 0 for
// errors raised from a stream or by the client itself. Err is the underlying
// cause of a transport failure (for errors.Is with context.Canceled and the
// like); it is never part of a wire message.
type Error struct {
	Code      protocol.Code
	Message   string
	Retryable bool
	// Outcome is "uncertain" when effects may have happened, else "".
	Outcome string
	Status  int
	Err     error
}

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Message
	if e.Status != 0 {
		s = fmt.Sprintf("%s (HTTP %d)", s, e.Status)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the Code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) protocol.Code {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func newError(code protocol.Code, msg string) *Error {
	return &Error{Code: code, Message: msg}
}

func invalidStream(format string, args ...any) *Error {
	return newError(protocol.CodeInvalidStream, "invalid event stream: "+fmt.Sprintf(format, args...))
}

func invalidResponse(format string, args ...any) *Error {
	return newError(protocol.CodeInvalidResponse, "invalid response: "+fmt.Sprintf(format, args...))
}
