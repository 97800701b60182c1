package wasm

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"adhost/abi"
	"adhost/runtime/wasm/checkpoint"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFunc is one entry of the ABI v1 host table.
type hostFunc struct {
	params, results []api.ValueType
	network         bool // needs [network]
	kv              bool // needs kv = true (kv.go)
	process         bool // needs [process] (process.go)
	fn              api.GoModuleFunc
}

// hostTable is the llmhost table of ABI v1. A module importing a name not
// in it, or with another signature, is refused at load.
var hostTable = map[string]hostFunc{
	abi.HostInput:         {params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}, fn: hostInput},
	abi.HostOutput:        {params: []api.ValueType{i32, i32}, fn: hostOutput},
	abi.HostConfig:        {params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}, fn: hostConfig},
	abi.HostEmit:          {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i32}, fn: hostEmit},
	abi.HostHTTPStart:     {params: []api.ValueType{i32, i32, i32, i32}, results: []api.ValueType{i32}, network: true, fn: hostHTTPStart},
	abi.HostHTTPHead:      {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i32}, network: true, fn: hostHTTPHead},
	abi.HostHTTPRead:      {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i64}, network: true, fn: hostHTTPRead},
	abi.HostHTTPNextEvent: {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i64}, network: true, fn: hostHTTPNextEvent},
	abi.HostHTTPClose:     {params: []api.ValueType{i32}, network: true, fn: hostHTTPClose},
	abi.HostCancelled:     {results: []api.ValueType{i32}, fn: hostCancelled},
	abi.HostLog:           {params: []api.ValueType{i32, i32, i32}, fn: hostLog},
	abi.HostLogEnabled:    {params: []api.ValueType{i32}, results: []api.ValueType{i32}, fn: hostLogEnabled},
	abi.HostKVGet:         {params: []api.ValueType{i32, i32, i32, i32}, results: []api.ValueType{i32}, kv: true, fn: hostKVGet},
	abi.HostKVPut:         {params: []api.ValueType{i32, i32, i32, i32}, results: []api.ValueType{i32}, kv: true, fn: hostKVPut},
	abi.HostKVDelete:      {params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}, kv: true, fn: hostKVDelete},
	abi.HostKVList:        {params: []api.ValueType{i32, i32}, results: []api.ValueType{i32}, kv: true, fn: hostKVList},
}

func (x *Extension) instantiateHost(ctx context.Context) error {
	b := x.rt.NewHostModuleBuilder(abi.HostModule)
	for name, hf := range hostTable {
		if hf.fn == nil {
			continue
		}
		b.NewFunctionBuilder().WithGoModuleFunction(hf.fn, hf.params, hf.results).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return err
	}
	_, err := x.rt.NewHostModuleBuilder(checkpoint.Module).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostCheckpoint), nil, nil).Export(checkpoint.Name).
		Instantiate(ctx)
	return err
}

// hostCheckpoint is called by the instrumented guest every
// checkpoint.Interval loop iterations and function entries. Being Go code,
// it is where the scheduler can preempt the goroutine (a collection's
// stop-the-world waits for that); it stops a guest whose call was
// cancelled or whose compute watchdog fired. It is not a host call for the
// watchdog (no enter/exit): a guest that only loops keeps counting.
func hostCheckpoint(ctx context.Context, _ api.Module, _ []uint64) {
	cs := callOf(ctx)
	if cs == nil {
		return
	}
	if err := cs.ctx.Err(); err != nil {
		cs.trapWith(context.Cause(cs.ctx))
	}
}

// Memory helpers. Pointers and lengths are u32; an out-of-range range traps.

func guestBytes(cs *callState, mod api.Module, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		cs.trapWith(errBadPointer)
	}
	return b
}

// copyOut writes data into (buf, cap) when it fits and returns its full
// length; when it does not fit nothing is written (ABI rule 2).
func copyOut(cs *callState, mod api.Module, buf, capacity uint32, data []byte) uint64 {
	if capacity > 0 {
		if _, ok := mod.Memory().Read(buf, capacity); !ok {
			cs.trapWith(errBadPointer)
		}
	}
	if uint64(len(data)) <= uint64(capacity) && len(data) > 0 {
		mod.Memory().Write(buf, data)
	}
	return uint64(uint32(len(data)))
}

func errno(e abi.Errno) uint64 { return uint64(uint32(int32(e))) }

func errno64(e abi.Errno) uint64 { return uint64(int64(e)) }

// current returns the call state; a host function called outside a call
// (e.g. from a guest's init) traps.
func current(ctx context.Context) *callState {
	cs := callOf(ctx)
	if cs == nil {
		panic(errBadPointer)
	}
	return cs
}

func hostInput(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	stack[0] = copyOut(cs, mod, uint32(stack[0]), uint32(stack[1]), cs.input)
}

func hostConfig(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cfg := cs.config
	if len(cfg) == 0 {
		cfg = []byte("{}")
	}
	stack[0] = copyOut(cs, mod, uint32(stack[0]), uint32(stack[1]), cfg)
}

func hostOutput(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if n > abi.MaxOutputBytes {
		cs.trapWith(errOutputTooLarge)
	}
	data := guestBytes(cs, mod, ptr, n)
	if cs.leaked(data) {
		return // not delivered: the call fails (redact.go)
	}
	cs.output = append(cs.output[:0], data...)
}

func hostCancelled(ctx context.Context, _ api.Module, stack []uint64) {
	cs := current(ctx)
	stack[0] = 0
	if cs.cancelled() {
		stack[0] = 1
	}
}

// maxStreamedText bounds the visible text one turn may stream
// (wire-extensions §10.3).
const maxStreamedText = 2_000_000

// maxEmittedBytes bounds the payload bytes of every kind one call may emit.
// Whatever an adapter reports comes from its upstream, which may send at
// most 10,000,000 bytes of SSE data per response (wire-core §8.1).
const maxEmittedBytes = 10_000_000

// Output is bounded at the source: emit counts what a call streams and
// stops the guest (a trap, so the call ends at once) on the first emit past
// a bound or breaking the contract, before anything of it reaches the sink.
// A flood then fails as INVALID_PROVIDER_RESULT however fast the client
// reads, and the run's event queue, which holds at most what passed,
// reports OUTPUT_BUFFER_LIMIT only for a client that does not read.

func hostEmit(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	kind, ptr, n := abi.EmitKind(int32(uint32(stack[0]))), uint32(stack[1]), uint32(stack[2])
	if n > abi.MaxEmitBytes {
		cs.trapWith(errEmitTooLarge)
	}
	if cs.emitted += int(n); cs.emitted > maxEmittedBytes {
		cs.violate("more than %d bytes emitted", maxEmittedBytes)
		cs.trapWith(errEmitLimit)
	}
	payload := guestBytes(cs, mod, ptr, n)
	if cs.cancelled() {
		stack[0] = 1 // dropped: the run is over
		return
	}
	stack[0] = 0
	if cs.leaked(payload) {
		// Not delivered: the guest is stopped like for any other emit
		// contract violation (redact.go).
		cs.trapWith(errViolation)
	}
	switch cs.op {
	case abi.OpComplete:
		switch kind {
		case abi.EmitText:
			if len(payload) == 0 {
				return
			}
			if !cs.x.m.Capability("textStreaming") {
				cs.violate("text emitted without the textStreaming capability")
				cs.trapWith(errViolation)
			}
			if !utf8.Valid(payload) {
				cs.violate("emitted text is not valid UTF-8")
				cs.trapWith(errViolation)
			}
			if cs.streamed += len(payload); cs.streamed > maxStreamedText {
				cs.violate("more than %d bytes of text streamed", maxStreamedText)
				cs.trapWith(errTextLimit)
			}
			cs.streamedHash.Write(payload)
			cs.sink.Text(string(payload))
		case abi.EmitProgress, abi.EmitToolCallDelta:
			cs.sink.Progress()
		case abi.EmitUsage:
			var u abi.Usage
			if err := decodeStrict(payload, &u); err != nil || !validUsage(&u) {
				cs.violate("invalid usage emitted")
				cs.trapWith(errViolation)
			}
			cs.sink.Usage(u)
		default:
			cs.violate("unknown emit kind %d", kind)
			cs.trapWith(errViolation)
		}
	case abi.OpToolInvoke:
		switch kind {
		case abi.EmitProgress:
			if cs.onProg != nil {
				cs.onProg()
			}
		default:
			cs.violate("emit kind %d is not valid for a tool", kind)
			cs.trapWith(errViolation)
		}
	default:
		// Other ops do not stream: ignore.
	}
}

func hostLogEnabled(ctx context.Context, _ api.Module, stack []uint64) {
	cs := callOf(ctx)
	level := slogLevel(abi.LogLevel(int32(uint32(stack[0]))))
	stack[0] = 0
	if cs != nil && cs.x.log.Enabled(ctx, level) {
		stack[0] = 1
	}
}

// maxLogLine bounds one guest log line.
const maxLogLine = 4096

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	level := slogLevel(abi.LogLevel(int32(uint32(stack[0]))))
	msg := guestBytes(cs, mod, uint32(stack[1]), uint32(stack[2]))
	if !cs.x.log.Enabled(ctx, level) {
		return
	}
	if cs.leaks(msg) {
		return // dropped: it carries an injected credential (redact.go)
	}
	if len(msg) > maxLogLine {
		msg = msg[:maxLogLine]
	}
	if !cs.x.logRate.allow(len(msg)) {
		return
	}
	cs.x.log.Log(context.WithoutCancel(ctx), level, "guest log", "op", cs.op.String(),
		"guest", strings.ToValidUTF8(string(msg), "\uFFFD"))
}

func slogLevel(l abi.LogLevel) slog.Level {
	switch l {
	case abi.LogDebug:
		return slog.LevelDebug
	case abi.LogInfo:
		return slog.LevelInfo
	case abi.LogWarn:
		return slog.LevelWarn
	case abi.LogError:
		return slog.LevelError
	}
	return slog.LevelDebug
}

// guestWriter receives the guest's stdout and stderr. Plugin output may
// carry anything (panic traces, echoed data), so it is logged at debug level
// only, capped per write and rate-limited per extension; it never reaches a
// response.
type guestWriter struct {
	x      *Extension
	stream string
}

func (w *guestWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.x.log.Enabled(context.Background(), slog.LevelDebug) {
		return n, nil
	}
	if len(p) > maxLogLine {
		p = p[:maxLogLine]
	}
	if w.x.logRate.allow(len(p)) {
		w.x.log.Debug("guest output", "stream", w.stream,
			"text", strings.ToValidUTF8(strings.TrimRight(string(p), "\n"), "\uFFFD"))
	}
	return n, nil
}

// rateLimiter is a byte token bucket shared by an extension's log sources.
type rateLimiter struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
}

func newRateLimiter(rate, burst float64) *rateLimiter {
	return &rateLimiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (r *rateLimiter) allow(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	r.last = now
	if r.tokens < float64(n) {
		return false
	}
	r.tokens -= float64(n)
	return true
}

func validUsage(u *abi.Usage) bool {
	for _, p := range []*int64{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens, u.CacheCreationInputTokens} {
		if p != nil && *p < 0 {
			return false
		}
	}
	for _, p := range []*float64{u.CostUSD, u.APIEquivalentCostUSD} {
		if p != nil && *p < 0 {
			return false
		}
	}
	return true
}
