package abi

// The process capability of ABI v1 (additive, like the http_* functions).
//
// A local CLI adapter stays a sandboxed guest: it builds the command line
// and parses what the CLI prints. The host owns the process itself — which
// binary (the one host.toml binds to the provider instance, checked against
// its sha256 before every start), its environment (built only from
// host.toml), its working directory (the instance's account directory) and
// its whole process group, which it kills when the call ends however it
// ends. A guest imports these functions only when its manifest declares a
// [process] table; otherwise it is refused at load.
const (
	// HostProcStart: (meta i32, metaLen i32, stdin i32, stdinLen i32) -> (handle i32).
	// Starts the binary named by ProcessStart JSON at meta with the raw
	// stdin bytes (stdin is closed after them; empty: no input). Returns a
	// handle > 0 or a negative Errno: ErrDenied for a binary the instance is
	// not bound to (or a name that is not a binary id), a binary whose digest
	// no longer matches its pin, ErrBadRequest for malformed meta or
	// arguments, ErrLimit past MaxProcesses, ErrCancelled.
	HostProcStart = "proc_start"

	// HostProcReadLine: (handle i32, buf i32, cap i32) -> (i64). The next
	// line of the process's stdout without its line ending ("\n" or
	// "\r\n"): eof<<32 | n, or a negative Errno. eof = 1 with n = 0 means
	// stdout ended; a last line without a newline is returned first. When
	// n > cap nothing was consumed: retry with a buffer of at least n bytes.
	// A line longer than MaxProcessLineBytes, or more than
	// MaxProcessStdoutBytes of stdout in all, yields ErrLimit and the
	// process is killed.
	HostProcReadLine = "proc_read_line"

	// HostProcRead: (handle i32, buf i32, cap i32) -> (i64). Raw stdout
	// bytes: eof<<32 | n, or a negative Errno. Do not mix with
	// HostProcReadLine on one handle (ErrBadRequest).
	HostProcRead = "proc_read"

	// HostProcStderr: (handle i32, buf i32, cap i32) -> (len i32). The
	// process's stderr captured so far, at most MaxProcessStderrBytes (the
	// rest is discarded), or a negative Errno. Stderr is for the adapter's
	// own classification; the host never shows it to a client.
	HostProcStderr = "proc_stderr"

	// HostProcWait: (handle i32) -> (i32). Waits for the process to exit
	// and returns its exit code (0..255; 128+n for a process ended by
	// signal n), or a negative Errno (ErrCancelled when the call was
	// cancelled meanwhile: the host then kills the process group).
	HostProcWait = "proc_wait"

	// HostProcClose: (handle i32) -> (). Kills the process group if it is
	// still running (SIGTERM, then SIGKILL after a grace period), reaps it
	// and releases the handle. Closing an unknown handle is a no-op.
	// Processes left open are closed by the host when the call returns.
	HostProcClose = "proc_close"
)

// ProcessStart is HostProcStart's meta JSON.
type ProcessStart struct {
	// Binary is the binary id the instance is bound to (host.toml
	// [[binaries]] id, declared in the manifest's process.binaries). Never a
	// path: the host resolves it.
	Binary string `json:"binary"`
	// Args are the arguments after the program name, passed as they are
	// (no shell). At most MaxProcessArgs, each valid UTF-8 without NUL.
	Args []string `json:"args"`
}

// Limits of the process capability.
const (
	// MaxProcesses bounds the open processes of one call (and so of one
	// instance, which serves one call at a time).
	MaxProcesses = 4
	// MaxProcessArgs bounds len(ProcessStart.Args); MaxProcessArgBytes
	// bounds their total size.
	MaxProcessArgs     = 256
	MaxProcessArgBytes = 256 << 10
	// MaxProcessStdinBytes bounds the stdin bytes of HostProcStart.
	MaxProcessStdinBytes = 8_000_000
	// MaxProcessLineBytes bounds one stdout line of HostProcReadLine.
	MaxProcessLineBytes = 4 << 20
	// MaxProcessStdoutBytes bounds the stdout of one process.
	MaxProcessStdoutBytes = 32_000_000
	// MaxProcessStderrBytes bounds the stderr the host keeps per process.
	MaxProcessStderrBytes = 64 << 10
)
