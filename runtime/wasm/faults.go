package wasm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/sys"

	"adhost/abi"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm/checkpoint"
)

// fault is the class of a guest call that did not return: what the client
// is told (without guest text), while the operator's log gets the cause.
// Every class is a failure of the extension, never of the host, so none is
// INTERNAL_ERROR (wire-core §7.1 keeps that for the host's own faults):
//
//	class     provider                  tool
//	compute   PROVIDER_FAILED           TOOL_FAILED
//	memory    PROVIDER_FAILED           TOOL_FAILED
//	stack     PROVIDER_FAILED           TOOL_FAILED
//	trap      PROVIDER_FAILED           TOOL_FAILED
//	turn      TIMEOUT                   TOOL_FAILED
//	invalid   INVALID_PROVIDER_RESULT   TOOL_FAILED
//
// PROVIDER_FAILED (502, not retryable) is the provider-side failure of
// §7.2; a guest that broke the result contract — a malformed or oversized
// result, an ABI limit, an unknown status — is INVALID_PROVIDER_RESULT as
// wire-extensions §10.3 says. TIMEOUT (504) is §7.2's code for a separately
// bounded operation, which the operator's turn timeout is. A tool has one
// failure code, TOOL_FAILED, which a run reports as TOOL_OUTCOME_UNCERTAIN
// (§12.3). None of them is retryable: the same input meets the same limit.
type fault uint8

const (
	faultNone    fault = iota
	faultCompute       // the compute watchdog stopped the guest
	faultMemory        // a trap with linear memory at its limit
	faultStack         // the call stack passed its bound
	faultTrap          // any other trap, or the guest exited
	faultTurn          // the operator's wall-clock bound on one call
	faultInvalid       // an ABI limit or contract violation the host trapped on
)

func (f fault) String() string {
	switch f {
	case faultCompute:
		return "compute limit"
	case faultMemory:
		return "memory limit"
	case faultStack:
		return "stack limit"
	case faultTrap:
		return "trap"
	case faultTurn:
		return "turn timeout"
	case faultInvalid:
		return "invalid result"
	}
	return "none"
}

// Causes the host traps a guest with.
var (
	errTurnTimeout = errors.New("turn timeout: the call ran past the extension's wall-clock bound")
	errTextLimit   = fmt.Errorf("more than %d bytes of text streamed in one call", maxStreamedText)
	errEmitLimit   = fmt.Errorf("more than %d bytes emitted in one call", maxEmittedBytes)
	errViolation   = errors.New("ABI contract violation in emit")
)

// faultMessages are the public messages of the classes, per kind of
// extension. They name the class and nothing the guest chose.
var faultMessages = [2][faultInvalid + 1]string{
	{
		faultCompute: "The provider extension exceeded its compute limit.",
		faultMemory:  "The provider extension exceeded its memory limit.",
		faultStack:   "The provider extension exceeded its stack limit.",
		faultTrap:    "The provider extension trapped.",
		faultTurn:    "The provider extension exceeded its time limit for a model turn.",
		faultInvalid: protocol.Message(protocol.CodeInvalidProviderResult),
	},
	{
		faultCompute: "The tool extension exceeded its compute limit.",
		faultMemory:  "The tool extension exceeded its memory limit.",
		faultStack:   "The tool extension exceeded its stack limit.",
		faultTrap:    "The tool extension trapped.",
		faultTurn:    "The tool extension exceeded its time limit.",
		faultInvalid: "The tool extension returned an invalid result.",
	},
}

// faultError is the public error of a fault; cause stays private.
func faultError(kind abi.Kind, f fault, cause error) *protocol.Error {
	tool := 0
	code := protocol.CodeProviderFailed
	switch {
	case kind == abi.KindTool:
		tool, code = 1, protocol.CodeToolFailed
	case f == faultTurn:
		code = protocol.CodeTimeout
	case f == faultInvalid:
		code = protocol.CodeInvalidProviderResult
	}
	e := protocol.Errorf(code, "%s", faultMessages[tool][f])
	e.Retryable = false
	e.Err = cause
	return e
}

// classifyTrap names the cause and class of a call that ended in err
// without a cancellation, a watchdog stop or a turn timeout.
func classifyTrap(inst *instance, cs *callState, err error) (error, fault) {
	if cs.trap != nil {
		// The host trapped the guest itself.
		switch {
		case errors.Is(cs.trap, errOutputTooLarge), errors.Is(cs.trap, errEmitTooLarge),
			errors.Is(cs.trap, errTextLimit), errors.Is(cs.trap, errEmitLimit), errors.Is(cs.trap, errViolation):
			return cs.trap, faultInvalid
		}
		return cs.trap, faultTrap
	}
	line := firstLine(err.Error())
	var ee *sys.ExitError
	switch {
	case stackOverflow(inst, line):
		return fmt.Errorf("guest passed the stack limit: %s", line), faultStack
	case memoryFull(inst):
		if errors.As(err, &ee) {
			line = fmt.Sprintf("exit code %d", ee.ExitCode())
		}
		return fmt.Errorf("guest failed with linear memory at its limit (%d of %d bytes): %s", inst.mem.Size(), memoryCap(inst), line), faultMemory
	case errors.As(err, &ee):
		return fmt.Errorf("guest exited with code %d", ee.ExitCode()), faultTrap
	}
	return fmt.Errorf("guest trapped: %s", line), faultTrap
}

// stackOverflow reports a trap of the call stack's bound: the checkpoint
// rewriter's depth limit (checkpoint.MaxDepth), or wazero's own ("stack
// overflow", past its ~50 MB native stack), which a frame with a deep
// operand stack can still reach.
func stackOverflow(inst *instance, line string) bool {
	if inst != nil && inst.depth != nil && uint32(inst.depth.Get()) > checkpoint.MaxDepth {
		return true // what checkpoint.StackLimited reads, without the lookup
	}
	return strings.Contains(line, "stack overflow")
}

// memoryFull reports whether an instance's linear memory is so close to
// its cap that a failed growth is the likely cause of a trap: a Go guest
// that cannot grow its heap exits (runtime: out of memory), and a raw
// module usually traps on the -1 of memory.grow. Within an eighth of the
// cap (at most 8 MiB: a Go heap grows in 4 MiB arenas) counts.
func memoryFull(inst *instance) bool {
	capBytes := memoryCap(inst)
	if capBytes == 0 {
		return false
	}
	slack := min(capBytes/8, 8<<20)
	return uint64(inst.mem.Size())+slack >= capBytes
}

// memoryCap is the most linear memory the instance may have: the host's
// limit, or the module's own declared maximum when lower.
func memoryCap(inst *instance) uint64 {
	capBytes := uint64(inst.x.memLimit)
	if pages, ok := inst.mem.Definition().Max(); ok {
		capBytes = min(capBytes, uint64(pages)<<16)
	}
	return capBytes
}
