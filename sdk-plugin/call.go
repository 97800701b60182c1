package sdk

import (
	"encoding/json"
	"math"
	"strconv"
	"sync/atomic"
	"unsafe"

	"adhost/abi"
)

// Host is the set of raw host functions of ABI v1 (module "llmhost"), with
// (ptr, len) pairs as slices. In wasm it is implemented with //go:wasmimport;
// package sdktest implements it natively. Plugin code never calls it
// directly: Call wraps it.
//
// Functions that fill a buffer (Input, Config, HTTPHead, HTTPRead,
// HTTPNextEvent) use len(buf) as the capacity and follow the ABI buffer
// rule: they return the full length of the data, and when it exceeds
// len(buf) they write and consume nothing, so the caller grows its buffer
// and calls again.
type Host interface {
	// Input copies the current op's input JSON; see abi.HostInput.
	Input(buf []byte) int32
	// Output sets the op's result or error JSON; see abi.HostOutput.
	Output(p []byte)
	// Config copies the instance's settings JSON; see abi.HostConfig.
	Config(buf []byte) int32
	// Emit streams one item and reports whether the run is cancelled; see
	// abi.HostEmit. The host only reads p during the call.
	Emit(kind abi.EmitKind, p []byte) (cancelled bool)
	// HTTPStart returns a handle > 0 or a negative abi.Errno.
	HTTPStart(meta, body []byte) int32
	// HTTPHead returns the length of the abi.HTTPResponse JSON or a
	// negative abi.Errno.
	HTTPHead(handle int32, buf []byte) int32
	// HTTPRead returns abi.PackEOF(n, eof) or a negative abi.Errno.
	HTTPRead(handle int32, buf []byte) int64
	// HTTPNextEvent returns abi.PackEOF(n, eof) of the next event frame or
	// a negative abi.Errno.
	HTTPNextEvent(handle int32, buf []byte) int64
	// HTTPClose releases a handle; see abi.HostHTTPClose.
	HTTPClose(handle int32)
	// Cancelled reports cancellation of the run or probe.
	Cancelled() bool
	// Log and LogEnabled write to and query the host's logger.
	Log(level abi.LogLevel, msg []byte)
	LogEnabled(level abi.LogLevel) bool
}

// Call is the handle of one operation (one model turn, probe or tool call).
// It is valid only during the Complete, Inspect or Invoke that received it
// (the next operation reuses its memory) and must not be used from other
// goroutines concurrently.
type Call struct {
	h         Host
	cancelled bool // sticky once the host said so
	cfg       []byte
	cfgDone   bool
	open      []*Response // HTTP responses not yet closed
	// cleanup closes open responses when the call returns. It is set by HTTP
	// only, so a module that never calls HTTP does not link (and so does not
	// import) any http_* host function: the host refuses those imports
	// without a network grant.
	cleanup func(*Call)
	scratch []byte // head JSON, usage JSON
	meta    []byte // HTTP request meta JSON, reused across requests and calls
	head    []byte // the head JSON of the call's first response of Send, reused across calls

	// resp and openBuf serve the call's first response and its open list
	// without allocating (most calls make one request; each allocation
	// costs about a microsecond in the sandbox). Like the Call, they are
	// reset when the next operation starts.
	resp    Response
	openBuf [2]*Response
	// header is resp's Header map, cleared and refilled by the next call's
	// first response rather than built anew (a map costs two allocations
	// and its growth).
	header map[string]string
}

// NewCall returns a Call backed by h. Dispatch gives each operation a
// fresh Call (recycling the previous one's memory once it returned);
// sdktest uses NewCall to test helpers that take a *Call.
func NewCall(h Host) *Call { return &Call{h: h} }

// Config returns the instance's validated, non-secret settings as a JSON
// object ("{}" when none). It is read from the host once per call; the
// returned bytes must not be modified.
func (c *Call) Config() []byte {
	if !c.cfgDone {
		c.cfg = readConfig(c.h)
		c.cfgDone = true
	}
	return c.cfg
}

// configBuf is the buffer the settings are read into, and lastConfig the
// bytes Config returned last. A pooled instance serves many calls, almost
// always with the same settings: reading them into a reused buffer and
// handing out the previous (never modified) copy when they are unchanged
// saves an allocation per call, and lets an adapter that caches its parsed
// settings compare cheaply.
var (
	configBuf  atomic.Pointer[[]byte]
	lastConfig atomic.Pointer[[]byte]
)

// emptyConfig is what Config returns when the instance has no settings.
var emptyConfig = []byte("{}")

// readConfig reads the instance's settings from h (see Config).
func readConfig(h Host) []byte {
	p := takeBuf(&configBuf, 512)
	b := fetch(h.Config, *p)
	cfg := emptyConfig
	if len(b) > 0 {
		if last := lastConfig.Load(); last != nil && string(*last) == string(b) {
			cfg = *last
		} else {
			fresh := append([]byte(nil), b...)
			lastConfig.Store(&fresh)
			cfg = fresh
		}
	}
	keepBuf(&configBuf, p, b)
	return cfg
}

// DecodeConfig decodes the settings into v with encoding/json.
func (c *Call) DecodeConfig(v any) error { return json.Unmarshal(c.Config(), v) }

// EmitText streams a visible text delta and reports whether the run is
// cancelled (then stop and return ErrCancelled). An empty delta emits
// nothing. The host copies s during the call, so s is not copied here.
func (c *Call) EmitText(s string) (cancelled bool) {
	if s == "" {
		return c.Cancelled()
	}
	return c.emit(abi.EmitText, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// EmitTextBytes is EmitText for a delta held in a reused buffer (as
// produced by jsonscan.Value.AppendString); b may be reused after it returns.
func (c *Call) EmitTextBytes(b []byte) (cancelled bool) {
	if len(b) == 0 {
		return c.Cancelled()
	}
	return c.emit(abi.EmitText, b)
}

// Progress reports real work that produced no visible text (reasoning, a
// finished batch). Never call it on timers or pings: the run's idle clock
// trusts it.
func (c *Call) Progress() (cancelled bool) { return c.emit(abi.EmitProgress, nil) }

// ToolCallDelta reports that tool-call arguments arrived (counts as
// progress).
func (c *Call) ToolCallDelta() (cancelled bool) { return c.emit(abi.EmitToolCallDelta, nil) }

// EmitUsage reports the turn's usage so far (last one wins; a Usage in the
// returned CompleteOutput takes precedence). Only measured values belong in
// it. NaN and infinite costs are left out (they are not JSON).
func (c *Call) EmitUsage(u abi.Usage) (cancelled bool) {
	c.scratch = AppendUsage(c.scratch[:0], &u)
	return c.emit(abi.EmitUsage, c.scratch)
}

func (c *Call) emit(kind abi.EmitKind, p []byte) bool {
	if c.h.Emit(kind, p) {
		c.cancelled = true
	}
	return c.cancelled
}

// Cancelled reports whether the run (or probe) was cancelled. Once it is, it
// stays so; the guest should stop promptly and return ErrCancelled.
func (c *Call) Cancelled() bool {
	if !c.cancelled && c.h.Cancelled() {
		c.cancelled = true
	}
	return c.cancelled
}

// Log sends a line to the host's logger (tagged with the extension and run;
// rate-limited and size-capped by the host, never shown to clients). Never
// log secrets, prompts or upstream bodies.
func (c *Call) Log(level abi.LogLevel, msg string) {
	c.h.Log(level, unsafe.Slice(unsafe.StringData(msg), len(msg)))
}

// LogEnabled reports whether Log at level would be kept, so callers can skip
// formatting.
func (c *Call) LogEnabled(level abi.LogLevel) bool { return c.h.LogEnabled(level) }

// finish runs the call's cleanup when the operation returns.
func (c *Call) finish() {
	if c.cleanup != nil {
		c.cleanup(c)
	}
}

// closeAll closes responses the plugin left open (the host would close them
// too; doing it here keeps sdktest honest about leaks).
func (c *Call) closeAll() {
	for _, r := range c.open {
		r.Close()
	}
	c.open = nil
}

// fetch reads a host buffer with the ABI rule: when the data does not fit,
// grow to its full length and ask again. A negative length (not expected
// from input or config) reads as empty.
func fetch(get func([]byte) int32, buf []byte) []byte {
	for {
		n := get(buf)
		if n < 0 {
			return nil
		}
		if int(n) <= len(buf) {
			return buf[:n]
		}
		buf = make([]byte, n)
	}
}

// AppendUsage appends u as abi.Usage JSON without reflection (EmitUsage may
// run once per streamed event when a vendor reports running usage). Fields
// come in abi.Usage's order, as encoding/json writes them.
//
// It is written out field by field: the closures it used to share the
// separator logic cost a call and a captured-variable indirection per
// field in the sandbox, for an object written every turn.
func AppendUsage(dst []byte, u *abi.Usage) []byte {
	dst = append(dst, '{')
	sep := false
	if u.InputTokens != nil {
		dst = appendName(dst, "inputTokens", sep)
		dst, sep = strconv.AppendInt(dst, *u.InputTokens, 10), true
	}
	if u.OutputTokens != nil {
		dst = appendName(dst, "outputTokens", sep)
		dst, sep = strconv.AppendInt(dst, *u.OutputTokens, 10), true
	}
	if u.CachedInputTokens != nil {
		dst = appendName(dst, "cachedInputTokens", sep)
		dst, sep = strconv.AppendInt(dst, *u.CachedInputTokens, 10), true
	}
	if u.ReasoningTokens != nil {
		dst = appendName(dst, "reasoningTokens", sep)
		dst, sep = strconv.AppendInt(dst, *u.ReasoningTokens, 10), true
	}
	if v := u.CostUSD; v != nil && !isNaNOrInf(*v) {
		dst = appendName(dst, "costUsd", sep)
		dst, sep = appendFloat(dst, *v), true
	}
	if v := u.APIEquivalentCostUSD; v != nil && !isNaNOrInf(*v) {
		dst = appendName(dst, "apiEquivalentCostUsd", sep)
		dst, sep = appendFloat(dst, *v), true
	}
	if u.CacheCreationInputTokens != nil {
		dst = appendName(dst, "cacheCreationInputTokens", sep)
		dst = strconv.AppendInt(dst, *u.CacheCreationInputTokens, 10)
	}
	return append(dst, '}')
}

func appendName(dst []byte, name string, sep bool) []byte {
	if sep {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

func isNaNOrInf(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// appendFloat formats f as encoding/json does (ES6 number formatting).
func appendFloat(dst []byte, f float64) []byte {
	abs := f
	if abs < 0 {
		abs = -abs
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
