package sdk

import (
	"encoding/json"
	"io"

	"adhost/abi"
)

// ProcessHost is the process part of the host functions (abi.HostProc*),
// with (ptr, len) pairs as slices and the buffer rule of Host. It is a
// separate interface so that a module that never starts a process links
// (and so imports) none of them: the host refuses those imports without a
// [process] table in the manifest.
type ProcessHost interface {
	ProcStart(meta, stdin []byte) int32
	ProcReadLine(handle int32, buf []byte) int64
	ProcRead(handle int32, buf []byte) int64
	ProcStderr(handle int32, buf []byte) int32
	ProcWait(handle int32) int32
	ProcClose(handle int32)
}

// ProcessError is a refused or failed process operation; Errno is the
// host's answer (abi.ErrDenied for a binary the instance is not bound to
// or whose digest no longer matches, abi.ErrLimit past a bound,
// abi.ErrCancelled when the call was cancelled).
type ProcessError struct{ Errno abi.Errno }

func (e *ProcessError) Error() string { return "sdk: process: " + e.Errno.Error() }

// Is makes errors.Is(err, ErrCancelled) hold for a cancelled operation.
func (e *ProcessError) Is(target error) bool {
	return target == ErrCancelled && e.Errno == abi.ErrCancelled
}

// Process is a process the host started for the call. It is valid only
// during the call; the host kills and reaps whatever the call leaves open.
type Process struct {
	ph  ProcessHost
	h   int32
	buf []byte
}

// StartProcess asks the host to start the binary the provider instance is
// bound to — binary is its id from the manifest's process.binaries, never a
// path — with args (no shell: each is passed as is) and stdin (closed after
// these bytes). The host checks the binary's digest, builds its whole
// environment from host.toml and runs it in the instance's account
// directory.
func (c *Call) StartProcess(binary string, args []string, stdin []byte) (*Process, error) {
	ph, ok := c.h.(ProcessHost)
	if !ok {
		return nil, &ProcessError{Errno: abi.ErrDenied}
	}
	if args == nil {
		args = []string{}
	}
	meta, err := json.Marshal(abi.ProcessStart{Binary: binary, Args: args})
	if err != nil {
		return nil, &ProcessError{Errno: abi.ErrBadRequest}
	}
	h := ph.ProcStart(meta, stdin)
	if h <= 0 {
		if h == 0 {
			h = int32(abi.ErrBadHandle)
		}
		return nil, &ProcessError{Errno: abi.Errno(h)}
	}
	return &Process{ph: ph, h: h, buf: make([]byte, 16<<10)}, nil
}

// ReadLine returns the next stdout line without its line ending, or io.EOF
// once stdout ended. The slice is valid until the next ReadLine.
func (p *Process) ReadLine() ([]byte, error) {
	for {
		r := p.ph.ProcReadLine(p.h, p.buf)
		if r < 0 {
			return nil, &ProcessError{Errno: abi.Errno(r)}
		}
		n, eof := abi.UnpackEOF(r)
		if eof && n == 0 {
			return nil, io.EOF
		}
		if int(n) > len(p.buf) {
			p.buf = make([]byte, n)
			continue
		}
		return p.buf[:n], nil
	}
}

// Read reads raw stdout bytes (not to be mixed with ReadLine).
func (p *Process) Read(b []byte) (int, error) {
	r := p.ph.ProcRead(p.h, b)
	if r < 0 {
		return 0, &ProcessError{Errno: abi.Errno(r)}
	}
	n, eof := abi.UnpackEOF(r)
	if eof {
		return int(n), io.EOF
	}
	return int(n), nil
}

// Stderr returns the stderr captured so far (at most
// abi.MaxProcessStderrBytes). It is the adapter's to classify a failure;
// the host never shows it to a client, and neither should an error message.
func (p *Process) Stderr() []byte {
	return fetch(func(buf []byte) int32 { return p.ph.ProcStderr(p.h, buf) }, nil)
}

// Wait waits for the process to exit and returns its exit code (128+n
// for a process ended by signal n).
func (p *Process) Wait() (int, error) {
	r := p.ph.ProcWait(p.h)
	if r < 0 {
		return 0, &ProcessError{Errno: abi.Errno(r)}
	}
	return int(r), nil
}

// Close kills the process group if it still runs and releases the handle.
func (p *Process) Close() { p.ph.ProcClose(p.h) }
