package abi

// ABI v1: "pull input, push output".
//
// Rules that keep the boundary small:
//
//  1. Only i32/i64 cross it; bytes are (ptr, len) in guest linear memory.
//  2. The host never allocates in guest memory. It writes into guest memory
//     only into a buffer the guest passed to the current host call
//     (buf, cap); such calls return the full length of the data. When the
//     data does not fit (len > cap, including cap = 0) nothing is written and
//     nothing is consumed: the guest grows its buffer and calls again.
//  3. An out-of-range pointer traps the call; the host then discards the
//     instance.
//  4. One instance serves one call at a time; there is no host→guest
//     re-entrancy.

// Version is the major ABI version this package describes. It is selected by
// the marker export (ExportMarkerV1), never by calling the guest.
const Version = 1

// ContractVersion is the adapter contract version a manifest must declare
// (wire-extensions §10.1). It is separate from the ABI major and from the
// plugin's own SemVer.
const ContractVersion = "1.0"

// Guest exports.
const (
	// ExportInitialize is the reactor start function: signature () -> ().
	// Go's -buildmode=c-shared and clang's -mexec-model=reactor produce it.
	// wazero does not run it on instantiation; the host calls it exactly once
	// per instance, before any other export.
	ExportInitialize = "_initialize"

	// ExportMarkerV1 is the major-version marker: a function () -> () that is
	// never called. The host inspects exports before instantiating and refuses
	// a module with no marker it knows, or with markers of several majors.
	ExportMarkerV1 = "plugin_abi_v1"

	// ExportCall is the single entry point: signature (op i32) -> (status i32).
	// The guest reads the op's input with HostInput, sets its result or error
	// JSON with HostOutput (last call wins) and returns a Status. The host
	// calls it only after ExportInitialize returned, never concurrently on one
	// instance, and never re-entrantly from inside a host function.
	ExportCall = "plugin_call"

	// ExportMarkerPrefix is the prefix every marker export shares. A module
	// exporting a name with this prefix that the host does not know is refused
	// with "unsupported ABI major".
	ExportMarkerPrefix = "plugin_abi_v"
)

// HostModule is the import module name of every host function.
const HostModule = "llmhost"

// Host functions of ABI v1. The table is additive: a later minor adds names,
// never changes a signature. A guest that imports a name the host's table for
// its major does not hold is refused at load; a guest that imports a name its
// manifest does not permit (HostHTTP* without network, HostKV* without kv) is
// refused at load too.
const (
	// HostInput: (buf i32, cap i32) -> (len i32). Copies the current op's input
	// JSON into buf when it fits and returns its full length. Only valid during
	// ExportCall; 0 for ops without input.
	HostInput = "input"

	// HostOutput: (ptr i32, len i32) -> (). Copies the op's result JSON (status
	// StatusOK) or ErrorOutput JSON (status StatusError). The last call wins.
	// Larger than MaxOutputBytes traps the call with a limit error.
	HostOutput = "output"

	// HostConfig: (buf i32, cap i32) -> (len i32). The calling provider
	// instance's validated, non-secret settings as a JSON object ("{}" when
	// none). It varies per call: one pooled instance may serve several provider
	// instances of the same extension.
	HostConfig = "config"

	// HostEmit: (kind i32, ptr i32, len i32) -> (cancelled i32). Streams one
	// item to the run now (see Emit*). Returns 1 when the run was cancelled:
	// the guest should stop and return StatusCancelled. Items emitted after
	// cancellation are dropped. Only valid during ExportCall of OpComplete or
	// OpToolInvoke.
	HostEmit = "emit"

	// HostHTTPStart: (meta i32, metaLen i32, body i32, bodyLen i32) -> (handle i32).
	// Starts an outgoing HTTP request described by HTTPRequest JSON at meta
	// with the raw body at body. Returns a handle > 0 or a negative Errno. The
	// host enforces the origin policy, strips credential headers supplied by
	// the guest and injects the configured credential itself; it never follows
	// redirects. The call returns once the response headers arrived.
	HostHTTPStart = "http_start"

	// HostHTTPHead: (handle i32, buf i32, cap i32) -> (len i32). HTTPResponse
	// JSON (status and headers) of a started request, or a negative Errno.
	HostHTTPHead = "http_head"

	// HostHTTPRead: (handle i32, buf i32, cap i32) -> (i64). Reads raw body
	// bytes into buf: the result is eof<<32 | n, or a negative Errno. n may be
	// smaller than cap; eof is 1 when the body is finished after these bytes.
	// A non-streamed body larger than MaxResponseBytes yields ErrLimit.
	HostHTTPRead = "http_read"

	// HostHTTPNextEvent: (handle i32, buf i32, cap i32) -> (i64). Returns the
	// next complete Server-Sent Event of the response body, framed by the host
	// as EventFrame (name, '\n', data). The result is eof<<32 | n, or a
	// negative Errno. eof = 1 with n = 0 means the stream ended with no further
	// event; whether it ended cleanly is the guest's judgement (vendors mark
	// the end in-band). When n > cap nothing was consumed and the guest must
	// retry with a buffer of at least n bytes. Comments and events without
	// data are skipped by the host. More than MaxStreamBytes of data in one
	// response yields ErrLimit.
	HostHTTPNextEvent = "http_next_event"

	// HostHTTPClose: (handle i32) -> (). Releases a request handle and aborts
	// the request if it is still open. Closing an unknown handle is a no-op.
	// Handles left open are closed by the host when the call returns.
	HostHTTPClose = "http_close"

	// HostCancelled: () -> (i32). 1 when the run (or probe) was cancelled.
	HostCancelled = "cancelled"

	// HostLog: (level i32, ptr i32, len i32) -> (). A log line for the host's
	// logger, tagged with extension and run. Rate-limited and size-capped; the
	// host logs it only at or above its configured level, never to a client.
	HostLog = "log"

	// HostLogEnabled: (level i32) -> (i32). 1 when HostLog at level would be
	// kept, so guests can skip formatting.
	HostLogEnabled = "log_enabled"

	// HostKVGet, HostKVPut, HostKVDelete, HostKVList: a small
	// per-extension, per-subject key/value namespace for tool extensions
	// whose manifest sets kv = true; the host refuses the imports to any
	// other module. The subject is the run's, chosen by the host: a guest
	// names keys only within it. Keys are 1..MaxKVKeyBytes bytes of UTF-8,
	// values at most MaxKVValueBytes; a subject holds at most MaxKVKeys
	// keys and MaxKVSubjectBytes of keys and values together (a put past a
	// bound is ErrLimit and changes nothing). Outside a tool call with a
	// subject, or on a host without a store, every kv call is ErrDenied.
	//   kv_get: (key i32, keyLen i32, buf i32, cap i32) -> (len i32)  (ErrNotFound when absent; buffer rule)
	//   kv_put: (key i32, keyLen i32, val i32, valLen i32) -> (errno i32)  (0: stored)
	//   kv_delete: (key i32, keyLen i32) -> (errno i32)  (0: absent now, ErrNotFound: was absent)
	//   kv_list: (buf i32, cap i32) -> (len i32)  (a JSON array of the subject's keys in byte order; buffer rule)
	HostKVGet    = "kv_get"
	HostKVPut    = "kv_put"
	HostKVDelete = "kv_delete"
	HostKVList   = "kv_list"
)

// Op selects what ExportCall does. Ops start at 1; 0 is never valid.
type Op int32

const (
	// OpInfo: no input; output Info. Called once per new instance to check
	// the module against its pin.
	OpInfo Op = iota + 1
	// OpComplete: input CompleteInput; output CompleteOutput. One model turn.
	OpComplete
	// OpInspect: no input; output InspectOutput. A read-only discovery probe
	// that never generates.
	OpInspect
	// OpToolList: no input; output ToolList.
	OpToolList
	// OpToolInvoke: input ToolInvokeInput; output ToolInvokeOutput.
	OpToolInvoke
	// OpEmbed: input EmbedInput; output EmbedOutput. For embedder extensions
	// (retrieval, a later issue).
	OpEmbed
)

// String returns the op's name for logs.
func (o Op) String() string {
	switch o {
	case OpInfo:
		return "info"
	case OpComplete:
		return "complete"
	case OpInspect:
		return "inspect"
	case OpToolList:
		return "tool_list"
	case OpToolInvoke:
		return "tool_invoke"
	case OpEmbed:
		return "embed"
	}
	return "unknown"
}

// Status is ExportCall's result.
type Status int32

const (
	// StatusOK: the output holds the op's result JSON.
	StatusOK Status = 0
	// StatusError: the output holds ErrorOutput JSON.
	StatusError Status = 1
	// StatusCancelled: the guest observed cancellation and stopped.
	StatusCancelled Status = 2
)

// EmitKind is the first argument of HostEmit.
type EmitKind int32

const (
	// EmitText: payload is a visible text delta, raw UTF-8 (not JSON). Empty
	// payloads are ignored. Needs capability textStreaming.
	EmitText EmitKind = iota + 1
	// EmitProgress: payload is empty. Real work happened (reasoning, tool
	// progress). Never emit on timers or pings.
	EmitProgress
	// EmitToolCallDelta: payload is ignored. Tool-call arguments arrived;
	// counts as progress.
	EmitToolCallDelta
	// EmitUsage: payload is Usage JSON, the usage of the current turn so far
	// (last one wins). A usage in CompleteOutput takes precedence.
	EmitUsage
)

// Errno is a negative result of a host function.
type Errno int32

const (
	// ErrDenied: the request's origin (or address) is not permitted.
	ErrDenied Errno = -1
	// ErrBadRequest: malformed meta JSON, bad URL, bad method, bad pointer.
	ErrBadRequest Errno = -2
	// ErrNetwork: connection, TLS or read failure.
	ErrNetwork Errno = -3
	// ErrCancelled: the run or probe was cancelled.
	ErrCancelled Errno = -4
	// ErrLimit: a size or count limit was hit (open handles, body size,
	// stream size, redirect refused counts as ErrDenied).
	ErrLimit Errno = -5
	// ErrBadHandle: unknown or closed handle.
	ErrBadHandle Errno = -6
	// ErrNotFound: the key does not exist (kv_get).
	ErrNotFound Errno = -7
	// ErrRedirect: the server answered with a redirect; the host never follows
	// one.
	ErrRedirect Errno = -8
	// ErrStore: the host's store failed (kv_*); nothing is known to have
	// changed.
	ErrStore Errno = -9
)

func (e Errno) Error() string {
	switch e {
	case ErrDenied:
		return "denied"
	case ErrBadRequest:
		return "bad request"
	case ErrNetwork:
		return "network error"
	case ErrCancelled:
		return "cancelled"
	case ErrLimit:
		return "limit exceeded"
	case ErrBadHandle:
		return "bad handle"
	case ErrNotFound:
		return "not found"
	case ErrRedirect:
		return "redirect refused"
	case ErrStore:
		return "store failure"
	}
	return "unknown error"
}

// LogLevel is HostLog's first argument.
type LogLevel int32

const (
	LogDebug LogLevel = iota + 1
	LogInfo
	LogWarn
	LogError
)

// Limits of the boundary. The host enforces them; guests may rely on them.
const (
	// MaxOutputBytes bounds one HostOutput payload (a provider turn result is
	// bounded to 2,000,000 bytes of JSON by wire-extensions §10.3; tool
	// outputs to 1,000,000 bytes, checked by the runtime).
	MaxOutputBytes = 2_000_000
	// MaxResponseBytes bounds a non-streamed upstream response body.
	MaxResponseBytes = 2_000_000
	// MaxStreamBytes bounds the cumulative SSE data of one upstream response.
	MaxStreamBytes = 10_000_000
	// MaxHTTPHandles bounds the open requests of one call.
	MaxHTTPHandles = 8
	// MaxRequestBytes bounds one outgoing request body.
	MaxRequestBytes = 8_000_000
	// MaxEmitBytes bounds one HostEmit payload.
	MaxEmitBytes = 1_000_000
	// MaxKVKeyBytes, MaxKVValueBytes, MaxKVKeys and MaxKVSubjectBytes bound
	// the kv namespace of one extension and subject (HostKVPut).
	MaxKVKeyBytes     = 128
	MaxKVValueBytes   = 4096
	MaxKVKeys         = 100
	MaxKVSubjectBytes = 64 << 10
)

// CustomSectionManifest is the name of the wasm custom section that holds
// the extension's manifest (the TOML text of manifests/<id>.toml). The build
// appends it, so the module's sha256 pins code and declared permissions
// together.
const CustomSectionManifest = "adhost.manifest"

// PackEOF builds an i64 result of HostHTTPRead and HostHTTPNextEvent.
func PackEOF(n uint32, eof bool) int64 {
	v := int64(n)
	if eof {
		v |= 1 << 32
	}
	return v
}

// UnpackEOF splits a non-negative i64 result of HostHTTPRead or
// HostHTTPNextEvent.
func UnpackEOF(v int64) (n uint32, eof bool) {
	return uint32(v), v>>32&1 == 1
}
