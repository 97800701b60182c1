package wasm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"adhost/abi"
)

// The process capability (abi.HostProc*): a local CLI adapter asks the
// host to run the binary its provider instance is bound to. The guest
// chooses the arguments and reads the output; the host chooses everything
// else — the file (resolved from host.toml, digest checked before every
// start), the environment (only what host.toml names), the working
// directory (the instance's account directory) — and owns the process
// group, which it kills and reaps when the guest closes the process, when
// the call ends (return, trap, cancellation, idle timeout, a client's
// disconnect, turn timeout) and before the extension closes.

// ProcessBinding binds an instance of a [process] extension to its pinned
// binary (host.toml [[binaries]] and the provider's binary and
// account_directory keys).
type ProcessBinding struct {
	// BinaryID is the [[binaries]] id; the manifest's process.binaries
	// must declare it, and it is the only name the guest may start.
	BinaryID string
	// Path is the binary's absolute path, and SHA256 its pinned digest
	// (lower-case hex).
	Path   string
	SHA256 string
	// Home is the instance's account directory: the process's HOME and
	// working directory. It must be private (0700); bind refuses another.
	Home string
	// PATH is the process's PATH; empty: DefaultProcessPATH.
	PATH string
	// Env are further variables, each resolved at start time (host.toml
	// secrets named by the manifest's process.env). Nothing else of the
	// host's environment reaches the process.
	Env map[string]func(context.Context) (string, error)
	// Grace is how long a process has to exit after SIGTERM before its
	// group is killed; zero: DefaultProcessGrace.
	Grace time.Duration
}

// DefaultProcessPATH is the PATH of a CLI process when host.toml names
// none: the system directories, nothing the host's user installed.
const DefaultProcessPATH = "/usr/local/bin:/usr/bin:/bin"

// DefaultProcessGrace is the SIGTERM-to-SIGKILL grace period.
const DefaultProcessGrace = 2 * time.Second

// ErrBinaryRefused wraps the reason a pinned binary may not be started
// (missing, digest mismatch, not a regular file).
var ErrBinaryRefused = errors.New("binary refused")

// procPolicy is the process side of one binding.
type procPolicy struct {
	x     *Extension
	b     ProcessBinding
	cache digestCache
}

func newProcPolicy(x *Extension, pb *ProcessBinding) (*procPolicy, error) {
	switch {
	case x.m.Process == nil:
		return nil, errors.New("a binary is bound but the manifest declares no [process]")
	case !slices.Contains(x.m.Process.Binaries, pb.BinaryID):
		return nil, fmt.Errorf("binary %q is not declared by the manifest's process.binaries (%s)",
			pb.BinaryID, strings.Join(x.m.Process.Binaries, ", "))
	case !filepath.IsAbs(pb.Path):
		return nil, fmt.Errorf("binary %q: path %q is not absolute", pb.BinaryID, pb.Path)
	case !filepath.IsAbs(pb.Home):
		return nil, fmt.Errorf("account directory %q is not absolute", pb.Home)
	}
	for name := range pb.Env {
		if !slices.Contains(x.m.Process.Env, name) {
			return nil, fmt.Errorf("variable %q is not declared by the manifest's process.env", name)
		}
	}
	if err := PrivateDir(pb.Home); err != nil {
		return nil, err
	}
	pp := &procPolicy{x: x, b: *pb}
	if pp.b.PATH == "" {
		pp.b.PATH = DefaultProcessPATH
	}
	if pp.b.Grace <= 0 {
		pp.b.Grace = DefaultProcessGrace
	}
	if _, err := pp.cache.verify(pp.b.Path, pp.b.SHA256); err != nil {
		return nil, err
	}
	return pp, nil
}

// PrivateDir refuses a path that is not a directory only its owner can
// access (mode 0700 or stricter): an account directory holds a CLI's
// session credentials.
func PrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("account directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("account directory %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("account directory %s has mode %#o, want 0700 (private)", dir, perm)
	}
	return nil
}

// digestCache remembers the file identity (device, inode, size, times) of
// the last file that matched its pin, so a large binary is hashed once,
// not per run, while a binary replaced or modified in place has another
// identity and is hashed again before it may start.
type digestCache struct {
	mu sync.Mutex
	ok fileID
}

// verify checks path against want and returns whether it had to hash.
func (c *digestCache) verify(path, want string) (hashed bool, err error) {
	id, err := statID(path)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrBinaryRefused, path, unwrapPath(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id.valid && id == c.ok {
		return false, nil
	}
	got, err := fileDigest(path)
	if err != nil {
		return true, fmt.Errorf("%w: %s: %v", ErrBinaryRefused, path, unwrapPath(err))
	}
	if got != want {
		c.ok = fileID{}
		return true, fmt.Errorf("%w: sha256 mismatch for %s: expected %s, actual %s", ErrBinaryRefused, path, want, got)
	}
	// The identity read after hashing must be the one read before, or the
	// file changed while it was hashed.
	if again, err := statID(path); err == nil && again == id {
		c.ok = id
	}
	return true, nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// proc is one started process.
type proc struct {
	id     int32
	cmd    *exec.Cmd
	pgid   int
	grace  time.Duration
	stdout *os.File
	rd     *bufio.Reader
	mode   byte // 0 unread, 'l' lines, 'r' raw
	read   int64
	line   []byte // a line too large for the guest's buffer, kept until asked again
	has    bool
	red    *redactor

	errMu   sync.Mutex
	stderr  []byte
	errDone chan struct{} // closed when stderr reached its end

	done     chan struct{} // closed once the leader was reaped
	exitCode int
	stopOnce sync.Once
	stopped  chan struct{} // closed once the group was killed and reaped
}

// procTable holds the open processes of one call (abi.MaxProcesses).
type procTable struct {
	open []*proc
	next int32
}

func (cs *callState) proc(id int32) *proc {
	for _, p := range cs.procs.open {
		if p.id == id {
			return p
		}
	}
	return nil
}

// closeProcs stops every process the call left open. The group is killed
// off the call's goroutine (a CLI ignoring SIGTERM takes the grace
// period); Extension.Close waits for it.
func (cs *callState) closeProcs() {
	for _, p := range cs.procs.open {
		go p.stop()
	}
	cs.procs.open = cs.procs.open[:0]
}

// procSet is an extension's live processes. Extension.Close stops those
// still running — a call that outlived the close's deadline, a stop still
// in its grace period — and waits until every group is gone.
type procSet struct {
	mu   sync.Mutex
	live map[*proc]struct{}
	wg   sync.WaitGroup
}

func (s *procSet) add(p *proc) {
	s.mu.Lock()
	if s.live == nil {
		s.live = map[*proc]struct{}{}
	}
	s.live[p] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		<-p.stopped
		s.mu.Lock()
		delete(s.live, p)
		s.mu.Unlock()
		s.wg.Done()
	}()
}

func (s *procSet) stopAll() {
	s.mu.Lock()
	live := make([]*proc, 0, len(s.live))
	for p := range s.live {
		live = append(live, p)
	}
	s.mu.Unlock()
	for _, p := range live {
		go p.stop()
	}
	s.wg.Wait()
}

// stderrSettle bounds how long proc_wait waits for the end of stderr
// after the process exited.
const stderrSettle = 250 * time.Millisecond

// maxProcMeta bounds proc_start's meta JSON.
const maxProcMeta = abi.MaxProcessArgBytes + 64<<10

func hostProcStart(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	meta := guestBytes(cs, mod, uint32(stack[0]), min(uint32(stack[1]), maxProcMeta+1))
	var stdin []byte
	if n := uint32(stack[3]); n > 0 {
		if n > abi.MaxProcessStdinBytes {
			stack[0] = errno(abi.ErrLimit)
			return
		}
		stdin = bytes.Clone(guestBytes(cs, mod, uint32(stack[2]), n))
	}
	if uint32(stack[1]) > maxProcMeta {
		stack[0] = errno(abi.ErrBadRequest)
		return
	}
	cs.enterWait()
	h, e := cs.procStart(meta, stdin)
	cs.exitWait(e == 0)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	stack[0] = uint64(uint32(h))
}

func (cs *callState) procStart(meta, stdin []byte) (int32, abi.Errno) {
	pp := cs.procPol
	var req abi.ProcessStart
	if err := decodeStrict(meta, &req); err != nil {
		return 0, abi.ErrBadRequest
	}
	if cs.cancelled() {
		return 0, abi.ErrCancelled
	}
	if pp == nil || req.Binary != pp.b.BinaryID {
		// A path, another binary, or an instance bound to none.
		cs.x.log.Warn("extension asked for a binary it is not bound to", "binary", fmt.Sprintf("%.64q", req.Binary))
		return 0, abi.ErrDenied
	}
	if len(req.Args) > abi.MaxProcessArgs {
		return 0, abi.ErrBadRequest
	}
	total := 0
	for _, a := range req.Args {
		total += len(a)
		if !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
			return 0, abi.ErrBadRequest
		}
	}
	if total > abi.MaxProcessArgBytes {
		return 0, abi.ErrBadRequest
	}
	if len(cs.procs.open) >= abi.MaxProcesses {
		return 0, abi.ErrLimit
	}
	if _, err := pp.cache.verify(pp.b.Path, pp.b.SHA256); err != nil {
		cs.x.log.Error("extension binary refused", "binary", pp.b.BinaryID, "err", err)
		cs.binaryRefused = true
		return 0, abi.ErrDenied
	}
	env := []string{"HOME=" + pp.b.Home, "PATH=" + pp.b.PATH}
	var secrets []string
	for _, name := range sortedNames(pp.b.Env) {
		v, err := pp.b.Env[name](cs.ctx)
		if err != nil || strings.IndexByte(v, 0) >= 0 {
			cs.x.log.Warn("extension process variable unavailable", "variable", name)
			cs.noCredential = true
			return 0, abi.ErrDenied
		}
		env = append(env, name+"="+v)
		if v != "" {
			secrets = append(secrets, v)
		}
	}
	p := &proc{grace: pp.b.Grace, done: make(chan struct{}), stopped: make(chan struct{}), errDone: make(chan struct{})}
	if p.red = newRedactor(secrets); p.red != nil {
		cs.secrets.add(p.red)
	}
	if err := p.start(pp.b.Path, req.Args, env, pp.b.Home, stdin); err != nil {
		cs.x.log.Error("extension process did not start", "binary", pp.b.BinaryID, "err", err)
		return 0, abi.ErrDenied
	}
	cs.procs.next++
	p.id = cs.procs.next
	cs.procs.open = append(cs.procs.open, p)
	cs.x.procs.add(p)
	// Cancellation of the call (the run's cancellation, idle timeout, a
	// disconnect, the watchdog, the turn timeout) kills the group at once,
	// even while the guest is blocked reading it.
	callDone := cs.ctx.Done()
	go func() {
		select {
		case <-callDone:
			p.stop()
		case <-p.stopped:
		}
	}()
	return p.id, 0
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// start runs the binary in its own process group with exactly env, in dir.
func (p *proc) start(path string, args, env []string, dir string, stdin []byte) error {
	cmd := &exec.Cmd{
		Path: path,
		Args: append([]string{filepath.Base(path)}, args...),
		Env:  env,
		Dir:  dir,
	}
	cmd.SysProcAttr = groupAttr()
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if len(stdin) > 0 {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return err
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return err
	}
	p.cmd, p.pgid, p.stdout = cmd, cmd.Process.Pid, outR
	p.rd = bufio.NewReaderSize(outR, 64<<10)
	if inW != nil {
		go func() {
			_, _ = inW.Write(stdin) // a CLI that exits without reading gets EPIPE
			inW.Close()
		}()
	}
	go p.drainStderr(errR)
	go func() {
		_ = cmd.Wait()
		p.exitCode = exitCode(cmd.ProcessState)
		close(p.done)
	}()
	return nil
}

// drainStderr keeps the first abi.MaxProcessStderrBytes of stderr and
// discards the rest, so a chatty CLI never blocks on a full pipe.
func (p *proc) drainStderr(r *os.File) {
	defer close(p.errDone)
	defer r.Close()
	buf := make([]byte, 8<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.errMu.Lock()
			if room := abi.MaxProcessStderrBytes - len(p.stderr); room > 0 {
				p.stderr = append(p.stderr, buf[:min(n, room)]...)
			}
			p.errMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stop kills the process group — SIGTERM, then SIGKILL after the grace
// period, and SIGKILL to the group in any case for children that outlived
// the leader — and reaps the leader. It is idempotent and safe to call
// from several goroutines; every caller returns once the group is gone.
func (p *proc) stop() {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		default:
			signalGroup(p.pgid, false)
			t := time.NewTimer(p.grace)
			select {
			case <-p.done:
			case <-t.C:
			}
			t.Stop()
		}
		signalGroup(p.pgid, true)
		<-p.done
		// A reader blocked on a pipe some escaped child still holds open.
		_ = p.stdout.SetReadDeadline(time.Now())
		p.stdout.Close()
		close(p.stopped)
	})
	<-p.stopped
}

// exitCode is the status proc_wait reports: the exit code, or 128+signal.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 255
	}
	if sig, ok := signalOf(ps); ok {
		return 128 + sig
	}
	return ps.ExitCode() & 0xff
}

func hostProcReadLine(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	buf, capacity := uint32(stack[1]), uint32(stack[2])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity)
	}
	p := cs.proc(int32(uint32(stack[0])))
	if p == nil {
		stack[0] = errno64(abi.ErrBadHandle)
		return
	}
	if p.mode == 'r' {
		stack[0] = errno64(abi.ErrBadRequest)
		return
	}
	p.mode = 'l'
	if !p.has {
		cs.enterWait()
		line, err := p.nextLine()
		cs.exitWait(err == nil)
		switch {
		case err == io.EOF:
			stack[0] = uint64(abi.PackEOF(0, true))
			return
		case err != nil:
			stack[0] = errno64(cs.procErrno(err))
			return
		}
		p.line, p.has = line, true
	}
	if uint64(len(p.line)) > uint64(capacity) {
		stack[0] = uint64(abi.PackEOF(uint32(len(p.line)), false))
		return
	}
	if len(p.line) > 0 {
		mod.Memory().Write(buf, p.line)
	}
	p.has = false
	stack[0] = uint64(abi.PackEOF(uint32(len(p.line)), false))
}

var errProcLimit = errors.New("process output limit")

// nextLine reads one stdout line without its ending; a final line without
// a newline is returned before io.EOF.
func (p *proc) nextLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := p.rd.ReadSlice('\n')
		p.read += int64(len(frag))
		if p.read > abi.MaxProcessStdoutBytes || len(line)+len(frag) > abi.MaxProcessLineBytes+2 {
			go p.stop()
			return nil, errProcLimit
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			if len(line) > abi.MaxProcessLineBytes {
				go p.stop()
				return nil, errProcLimit
			}
			p.scrub(line)
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case len(line) > 0 && (err == io.EOF || isClosedPipe(err)):
			p.scrub(line)
			return line, nil
		case isClosedPipe(err):
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// scrub masks the values of the process's secret variables in b: a CLI
// that echoes its API key must not hand it to the guest.
func (p *proc) scrub(b []byte) {
	if p.red == nil {
		return
	}
	if spans := p.red.find(b, nil); len(spans) > 0 {
		mask(b, spans, len(b), 0)
	}
}

func isClosedPipe(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded)
}

func (cs *callState) procErrno(err error) abi.Errno {
	switch {
	case cs.ctx.Err() != nil:
		return abi.ErrCancelled
	case errors.Is(err, errProcLimit):
		return abi.ErrLimit
	}
	return abi.ErrNetwork
}

func hostProcRead(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	buf, capacity := uint32(stack[1]), uint32(stack[2])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity)
	}
	p := cs.proc(int32(uint32(stack[0])))
	if p == nil {
		stack[0] = errno64(abi.ErrBadHandle)
		return
	}
	if p.mode == 'l' {
		stack[0] = errno64(abi.ErrBadRequest)
		return
	}
	p.mode = 'r'
	if capacity == 0 {
		stack[0] = uint64(abi.PackEOF(0, false))
		return
	}
	chunk := make([]byte, min(capacity, 64<<10))
	cs.enterWait()
	n, err := p.rd.Read(chunk)
	cs.exitWait(n > 0)
	p.read += int64(n)
	if p.read > abi.MaxProcessStdoutBytes {
		go p.stop()
		stack[0] = errno64(abi.ErrLimit)
		return
	}
	// Raw chunks are not scrubbed across their boundaries; the secret
	// check on results and events (redact.go) still applies.
	p.scrub(chunk[:n])
	if n > 0 {
		mod.Memory().Write(buf, chunk[:n])
	}
	switch {
	case err == nil:
		stack[0] = uint64(abi.PackEOF(uint32(n), false))
	case err == io.EOF || isClosedPipe(err):
		stack[0] = uint64(abi.PackEOF(uint32(n), true))
	default:
		stack[0] = errno64(cs.procErrno(err))
	}
}

func hostProcStderr(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	p := cs.proc(int32(uint32(stack[0])))
	if p == nil {
		if c := uint32(stack[2]); c > 0 {
			guestBytes(cs, mod, uint32(stack[1]), c)
		}
		stack[0] = errno(abi.ErrBadHandle)
		return
	}
	p.errMu.Lock()
	data := bytes.Clone(p.stderr)
	p.errMu.Unlock()
	p.scrub(data)
	stack[0] = copyOut(cs, mod, uint32(stack[1]), uint32(stack[2]), data)
}

func hostProcWait(ctx context.Context, _ api.Module, stack []uint64) {
	cs := current(ctx)
	p := cs.proc(int32(uint32(stack[0])))
	if p == nil {
		stack[0] = errno(abi.ErrBadHandle)
		return
	}
	cs.enterWait()
	select {
	case <-p.done:
		// What the process wrote to stderr before it exited is in the
		// pipe: let the drain catch up, unless a child it left holds
		// the pipe open.
		t := time.NewTimer(stderrSettle)
		select {
		case <-p.errDone:
		case <-t.C:
		}
		t.Stop()
		cs.exitWait(true)
		stack[0] = uint64(uint32(int32(p.exitCode)))
	case <-cs.ctx.Done():
		cs.exitWait(false)
		stack[0] = errno(abi.ErrCancelled)
	}
}

func hostProcClose(ctx context.Context, _ api.Module, stack []uint64) {
	cs := current(ctx)
	id := int32(uint32(stack[0]))
	i := slices.IndexFunc(cs.procs.open, func(p *proc) bool { return p.id == id })
	if i < 0 {
		return
	}
	p := cs.procs.open[i]
	cs.procs.open = slices.Delete(cs.procs.open, i, i+1)
	cs.enterWait()
	defer cs.exitWait(false)
	p.stop()
}

// The process functions join the ABI v1 table here; a module importing
// one without a [process] table in its manifest is refused at load
// (checkImports).
func init() {
	for name, hf := range map[string]hostFunc{
		abi.HostProcStart:    {params: []api.ValueType{i32, i32, i32, i32}, results: []api.ValueType{i32}, fn: hostProcStart},
		abi.HostProcReadLine: {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i64}, fn: hostProcReadLine},
		abi.HostProcRead:     {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i64}, fn: hostProcRead},
		abi.HostProcStderr:   {params: []api.ValueType{i32, i32, i32}, results: []api.ValueType{i32}, fn: hostProcStderr},
		abi.HostProcWait:     {params: []api.ValueType{i32}, results: []api.ValueType{i32}, fn: hostProcWait},
		abi.HostProcClose:    {params: []api.ValueType{i32}, fn: hostProcClose},
	} {
		hf.process = true
		hostTable[name] = hf
	}
}
