package protocol

import "encoding/json"

// ErrorBody returns the HTTP error body of wire-core §7.1,
// {"error":{"code":…,"message":…,"retryable":…[,"outcome":"uncertain"]}},
// as compact JSON. The private cause e.Err is never included. A nil e is
// INTERNAL_ERROR.
func ErrorBody(e *Error) []byte {
	if e == nil {
		e = New(CodeInternalError)
	}
	b, err := json.Marshal(struct {
		Error ErrorInfo `json:"error"`
	}{e.Info()})
	if err != nil { // unreachable: ErrorInfo holds only strings and a bool
		return []byte(`{"error":{"code":"INTERNAL_ERROR","message":"An internal error occurred.","retryable":false}}`)
	}
	return b
}
