package wasm

import (
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// TestFaultCodes: every class of guest fault is the extension's failure,
// with a message naming the class and the cause kept private.
func TestFaultCodes(t *testing.T) {
	cause := errors.New("private cause")
	for _, tc := range []struct {
		kind    abi.Kind
		f       fault
		code    protocol.Code
		message string
	}{
		{abi.KindProvider, faultCompute, protocol.CodeProviderFailed, "The provider extension exceeded its compute limit."},
		{abi.KindProvider, faultMemory, protocol.CodeProviderFailed, "The provider extension exceeded its memory limit."},
		{abi.KindProvider, faultStack, protocol.CodeProviderFailed, "The provider extension exceeded its stack limit."},
		{abi.KindProvider, faultTrap, protocol.CodeProviderFailed, "The provider extension trapped."},
		{abi.KindProvider, faultTurn, protocol.CodeTimeout, "The provider extension exceeded its time limit for a model turn."},
		{abi.KindProvider, faultInvalid, protocol.CodeInvalidProviderResult, protocol.Message(protocol.CodeInvalidProviderResult)},
		{abi.KindTool, faultCompute, protocol.CodeToolFailed, "The tool extension exceeded its compute limit."},
		{abi.KindTool, faultStack, protocol.CodeToolFailed, "The tool extension exceeded its stack limit."},
		{abi.KindTool, faultTurn, protocol.CodeToolFailed, "The tool extension exceeded its time limit."},
	} {
		t.Run(string(tc.kind)+" "+tc.f.String(), func(t *testing.T) {
			e := faultError(tc.kind, tc.f, cause)
			if e.Code != tc.code || e.Message != tc.message || e.Retryable || !errors.Is(e, cause) {
				t.Errorf("faultError = %s %q retryable=%v cause %v", e.Code, e.Message, e.Retryable, e.Err)
			}
			if protocol.HTTPStatus(e.Code) == 500 {
				t.Errorf("%s is the host's status", e.Code)
			}
		})
	}
}

// TestStackOverflowClass: wazero's own stack bound is the stack class.
func TestStackOverflowClass(t *testing.T) {
	err, f := classifyTrap(nil, &callState{}, errors.New("wasm error: stack overflow\nwasm stack trace:\n\tf()"))
	if f != faultStack || !strings.Contains(err.Error(), "stack limit") {
		t.Errorf("classifyTrap = %v, %v", err, f)
	}
}
