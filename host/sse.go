package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// MaxFrameBytes bounds the lines of one SSE frame (field names included,
// terminators excluded). Clients fail a larger frame with
// RESPONSE_TOO_LARGE, so the host never writes one (wire-core §5.6).
const MaxFrameBytes = 2_000_000

// batchBytes is how much framed output is gathered before a write.
const batchBytes = 64 << 10

var (
	// errClientGone is the cancellation cause of a run whose client
	// disconnected (run.cancelled with CANCELLED).
	errClientGone = errors.New("host: client disconnected")
	// errFrameInvalid: the engine produced an event that cannot be framed
	// (too large or not a single line). Internal error; never expected.
	errFrameInvalid = errors.New("host: event cannot be framed")

	noDeadline time.Time

	heartbeatFrame = []byte(": heartbeat\n\n")
)

// doneCtx is already cancelled: Run.Next(doneCtx) returns an event only
// if one is ready, which lets the stream write everything that is
// immediately available and flush once.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// frameLineBytes is the size of ev's frame lines, as clients count it.
func frameLineBytes(ev runtime.Event) int {
	return len("id: ") + decimalLen(ev.Sequence) + len("event: ") + len(ev.Type) + len("data: ") + len(ev.Data)
}

func decimalLen(n int64) int {
	l := 1
	if n < 0 {
		l++
		n = -n
	}
	for n >= 10 {
		n /= 10
		l++
	}
	return l
}

// checkFrame rejects events that would break framing: an empty or
// multi-line type or data, or a frame over MaxFrameBytes.
func checkFrame(ev runtime.Event) error {
	if ev.Type == "" || len(ev.Data) == 0 || frameLineBytes(ev) > MaxFrameBytes ||
		bytes.IndexByte(ev.Data, '\n') >= 0 || bytes.IndexByte(ev.Data, '\r') >= 0 ||
		containsLineBreak(ev.Type) {
		return errFrameInvalid
	}
	return nil
}

func containsLineBreak(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return true
		}
	}
	return false
}

// appendFrame appends the frame of wire-core §5.6:
//
//	id: <sequence>\nevent: <type>\ndata: <json>\n\n
//
// It allocates only when dst must grow.
func appendFrame(dst []byte, ev runtime.Event) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, ev.Sequence, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, ev.Data...)
	return append(dst, "\n\n"...)
}

// stream answers an SSE-mode run.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, run *runtime.Run) {
	ctx := r.Context()
	// The first event (run.started, or an error raised before it) decides
	// between an HTTP error and a 200 stream.
	ev, err := run.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			run.Cancel(errClientGone)
			return
		}
		run.Cancel(err)
		s.writeError(w, r, err)
		return
	}
	if err := checkFrame(ev); err != nil {
		run.Cancel(protocol.Wrap(protocol.CodeInternalError, err))
		s.writeError(w, r, err)
		return
	}

	rc := http.NewResponseController(w)
	guard := &writeGuard{rc: rc, done: make(chan struct{})}
	defer guard.finish()
	go guard.watch(run.Done())

	h := w.Header()
	h["Content-Type"] = valEventStream
	h["X-Accel-Buffering"] = valNo
	w.WriteHeader(http.StatusOK)

	sw := &streamWriter{w: w, rc: rc, buf: make([]byte, 0, 4096)}
	sw.buf = appendFrame(sw.buf, ev)
	if ev.Terminal() {
		sw.flush(run)
		noteFinished(w)
		return
	}
	for {
		// Everything immediately available goes into one flush.
		for {
			ev, err = run.Next(doneCtx)
			if err != nil {
				break
			}
			if cerr := checkFrame(ev); cerr != nil {
				s.streamFailure(run, cerr)
			}
			sw.buf = appendFrame(sw.buf, ev)
			if ev.Terminal() {
				sw.flush(run)
				noteFinished(w)
				return
			}
			if len(sw.buf) >= batchBytes {
				sw.write(run)
			}
		}
		switch {
		case err == io.EOF:
			sw.flush(run)
			return
		case !errors.Is(err, context.Canceled): // not "nothing ready yet"
			s.streamFailure(run, err)
		}
		sw.flush(run)

		// Wait for the next event; a heartbeat when none comes in time.
		wctx, cancel := context.WithTimeout(ctx, s.heartbeat)
		ev, err = run.Next(wctx)
		cancel()
		switch {
		case err == nil:
			if cerr := checkFrame(ev); cerr != nil {
				s.streamFailure(run, cerr)
			}
			sw.buf = appendFrame(sw.buf, ev)
			if ev.Terminal() {
				sw.flush(run)
				noteFinished(w)
				return
			}
		case err == io.EOF:
			return
		case ctx.Err() != nil:
			// The client went away: cancel at once so the slot frees.
			run.Cancel(errClientGone)
			return
		case errors.Is(err, context.DeadlineExceeded):
			// Heartbeats are not progress: the run's idle timer never sees
			// them.
			sw.buf = append(sw.buf, heartbeatFrame...)
		default:
			s.streamFailure(run, err)
		}
	}
}

// streamFailure handles an unexpected error after the 200 status: the run
// is cancelled with INTERNAL_ERROR, the cause logged, and the connection
// aborted so the client sees an incomplete stream (wire-core §5.6).
func (s *Server) streamFailure(run *runtime.Run, err error) {
	s.log.Error("internal error in event stream", "run", run.ID(), "err", err)
	run.Cancel(protocol.Wrap(protocol.CodeInternalError, err))
	abort()
}

// writeGuard keeps a client that stopped reading from pinning a stream
// handler forever: once the run has ended, the remaining writes get
// stuckWriteGrace. The deadline is set from a watcher goroutine (the
// handler may be blocked in Write) and cleared before the handler returns,
// so it never leaks to the next request on a kept-alive connection; the
// mutex keeps the watcher from touching the ResponseController after that.
type writeGuard struct {
	rc       *http.ResponseController
	done     chan struct{} // closed by finish
	mu       sync.Mutex
	armed    bool
	finished bool
}

func (g *writeGuard) watch(runDone <-chan struct{}) {
	select {
	case <-runDone:
	case <-g.done:
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.finished {
		_ = g.rc.SetWriteDeadline(time.Now().Add(stuckWriteGrace))
		g.armed = true
	}
}

func (g *writeGuard) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.finished = true
	close(g.done)
	if g.armed {
		_ = g.rc.SetWriteDeadline(noDeadline)
	}
}

// streamWriter batches frames into buf and writes them to the response.
// A failed write means the connection is unusable: the run is cancelled and
// the connection aborted.
type streamWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

func (sw *streamWriter) write(run *runtime.Run) {
	if len(sw.buf) == 0 {
		return
	}
	_, err := sw.w.Write(sw.buf)
	sw.buf = sw.buf[:0]
	if err != nil {
		run.Cancel(errClientGone)
		abort()
	}
}

func (sw *streamWriter) flush(run *runtime.Run) {
	sw.write(run)
	if err := sw.rc.Flush(); err != nil {
		run.Cancel(errClientGone)
		abort()
	}
}

// abort ends the handler and drops the connection without completing the
// response, so the client sees an incomplete stream rather than a clean
// end (wire-core §5.6).
func abort() { panic(http.ErrAbortHandler) }
