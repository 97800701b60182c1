package main

import (
	"strconv"
	"strings"
	"time"

	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// Errors are *sdk.Error with a wire code (wire-core §7.2). Their messages
// are for the plugin's own tests and the host's debug logs; the host never
// shows them to a client (it uses the code's fixed public message), and they
// never carry the vendor's error body, which may echo prompts or secrets.

var errCancelled = sdk.ErrCancelled

func newError(code, msg string) *sdk.Error {
	return &sdk.Error{Code: code, Message: "gemini: " + msg}
}

func errInvalidResponse(msg string) error {
	return newError("INVALID_PROVIDER_RESPONSE", msg)
}

func errIncomplete() error {
	return newError("INCOMPLETE_STREAM", "stream ended without a finishReason")
}

// errRefusal is a safety block (a content-filter finishReason or a
// promptFeedback.blockReason): a stable public PROVIDER_REFUSAL, never the
// vendor's ratings.
func errRefusal() error {
	return newError("PROVIDER_REFUSAL", "blocked by the vendor's safety filters")
}

func errProviderFailed(msg string) error {
	return newError("PROVIDER_FAILED", msg)
}

// streamError maps an error that interrupts a stream: Gemini sends a
// google.rpc.Status ({"error":{"code","message","status"}}) as a data line.
// RESOURCE_EXHAUSTED/429 is RATE_LIMITED and UNAVAILABLE/503 (the model is
// overloaded) PROVIDER_ERROR retryable, as the same statuses are over HTTP;
// any other is PROVIDER_FAILED (the provider reported a stream failure).
func streamError(code int, status string) error {
	switch {
	case code == 429 || status == "RESOURCE_EXHAUSTED":
		e := newError("RATE_LIMITED", "stream error RESOURCE_EXHAUSTED")
		e.Retryable = true
		return e
	case code == 503 || status == "UNAVAILABLE":
		e := newError("PROVIDER_ERROR", "stream error UNAVAILABLE")
		e.Retryable, e.Status = true, 503
		return e
	}
	if !sdk.SafeToken(status) {
		status = "unknown"
	}
	return newError("PROVIDER_FAILED", "stream error "+status)
}

// statusError maps a non-2xx response
// (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes):
//   - 429 RESOURCE_EXHAUSTED → RATE_LIMITED, retryable, with the delay of a
//     google.rpc.RetryInfo detail (or a Retry-After header from a gateway);
//   - 401/403, and 400 whose ErrorInfo reason is API_KEY_INVALID (what
//     Gemini answers for a bad key) → PROVIDER_AUTH;
//   - 5xx → PROVIDER_ERROR retryable; other statuses → PROVIDER_ERROR.
//
// body is read only for those machine-readable details; its message never
// reaches the error.
func statusError(status int, header map[string]string, body []byte) error {
	switch {
	case status == 429:
		e := newError("RATE_LIMITED", "HTTP 429")
		e.Retryable, e.Status = true, status
		e.RetryAfterMs = retryInfoMs(body)
		if e.RetryAfterMs == 0 {
			e.RetryAfterMs = sdk.RetryAfterMs(header["retry-after"], time.Now())
		}
		return e
	case status == 401 || status == 403 || (status == 400 && errorReason(body) == "API_KEY_INVALID"):
		e := newError("PROVIDER_AUTH", "HTTP "+strconv.Itoa(status))
		e.Status = status
		return e
	}
	e := newError("PROVIDER_ERROR", "HTTP "+strconv.Itoa(status))
	e.Status, e.Retryable = status, status >= 500
	return e
}

// errorReason returns the reason of the first google.rpc.ErrorInfo detail
// of an error body ("" when none).
func errorReason(body []byte) string {
	details, err := jsonscan.Get(body, "error.details")
	if err != nil {
		return ""
	}
	it := details.Iter()
	for it.Next() {
		d := it.Value()
		if t, err := d.Get("@type"); err == nil && t.Equal("type.googleapis.com/google.rpc.ErrorInfo") {
			r, _ := d.Get("reason")
			s, _ := r.String()
			return s
		}
	}
	return ""
}

// retryInfoMs returns the retryDelay of a google.rpc.RetryInfo detail (a
// google.protobuf.Duration in JSON: "27s", "1.5s") in milliseconds, 0 when
// none.
func retryInfoMs(body []byte) int64 {
	details, err := jsonscan.Get(body, "error.details")
	if err != nil {
		return 0
	}
	it := details.Iter()
	for it.Next() {
		d := it.Value()
		if t, err := d.Get("@type"); err != nil || !t.Equal("type.googleapis.com/google.rpc.RetryInfo") {
			continue
		}
		v, _ := d.Get("retryDelay")
		s, err := v.String()
		if err != nil || !strings.HasSuffix(s, "s") {
			return 0
		}
		secs, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
		if err != nil || secs < 0 || secs > sdk.MaxRetryAfter.Seconds() {
			return 0
		}
		return int64(secs * 1000)
	}
	return 0
}

// transportError maps a failed HTTP call or stream read of the host
// (sdk.TransportError); started reports that the response had begun.
func transportError(err error, started bool) error {
	return sdk.TransportError("gemini", err, started)
}
