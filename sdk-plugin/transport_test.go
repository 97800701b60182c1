package sdk_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

func TestTransportError(t *testing.T) {
	own := &sdk.Error{Code: sdk.CodeProviderRefusal, Message: "kept"}
	for _, tc := range []struct {
		name      string
		err       error
		started   bool
		code      string // "" for ErrCancelled
		retryable bool
		msg       string
	}{
		{name: "cancelled", err: sdk.ErrCancelled},
		{name: "host cancelled", err: &sdk.HTTPError{Errno: abi.ErrCancelled}, started: true},
		{name: "limit", err: &sdk.HTTPError{Errno: abi.ErrLimit}, started: true, code: sdk.CodeResponseTooLarge,
			msg: "v: response exceeds the host's size bound"},
		{name: "redirect", err: &sdk.HTTPError{Errno: abi.ErrRedirect}, code: sdk.CodeProviderUnreachable,
			msg: "v: request refused by the host: " + abi.ErrRedirect.Error()},
		{name: "denied", err: &sdk.HTTPError{Errno: abi.ErrDenied}, code: sdk.CodeProviderUnreachable,
			msg: "v: request refused by the host: " + abi.ErrDenied.Error()},
		{name: "network before", err: &sdk.HTTPError{Errno: abi.ErrNetwork}, code: sdk.CodeProviderUnreachable,
			retryable: true, msg: "v: request failed"},
		{name: "network after", err: &sdk.HTTPError{Errno: abi.ErrNetwork}, started: true, code: sdk.CodeIncompleteStream,
			msg: "v: stream broke off"},
		{name: "plain after", err: io.ErrUnexpectedEOF, started: true, code: sdk.CodeIncompleteStream, msg: "v: stream broke off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sdk.TransportError("v", tc.err, tc.started)
			if tc.code == "" {
				if err != sdk.ErrCancelled {
					t.Fatalf("TransportError = %v, want ErrCancelled", err)
				}
				return
			}
			var e *sdk.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Retryable != tc.retryable || e.Message != tc.msg {
				t.Fatalf("TransportError = %#v, want %s retryable=%v %q", err, tc.code, tc.retryable, tc.msg)
			}
		})
	}
	if err := sdk.TransportError("v", own, true); err != own {
		t.Errorf("an *sdk.Error changed: %v", err)
	}
}

func TestSafeToken(t *testing.T) {
	for _, s := range []string{"a", "overloaded_error", "RESOURCE_EXHAUSTED", "x9", strings.Repeat("a", 64)} {
		if !sdk.SafeToken(s) {
			t.Errorf("SafeToken(%q) = false", s)
		}
	}
	for _, s := range []string{"", strings.Repeat("a", 65), "a b", "a-b", "é", "a\n", "sk-secret"} {
		if sdk.SafeToken(s) {
			t.Errorf("SafeToken(%q) = true", s)
		}
	}
}
