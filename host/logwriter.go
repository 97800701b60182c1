package host

import (
	"io"
	"sync"
	"time"
)

// logWriter takes the host log's lines off the request path: Write copies
// a line into a buffer and returns, and one goroutine writes whatever has
// gathered with a single write call. A busy host logs two lines a request
// (the access line and the run's end); written directly, each was a write
// system call on the request's goroutine, serialized with every other
// request's on the one stderr descriptor. The flusher lets lines gather for
// logLinger (1 ms) after the first of a batch, so at ~8,000 lines a second
// it makes about 1,000 writes instead of 8,000 — the BufferedWriteSyncer
// trade of zap and friends. (Measured on the gateway path: the two lines
// cost ~5 % of the host's CPU, formatting included; perf puts the batched
// writes at ~0.3 %.)
//
// Nothing is dropped: past maxPending bytes waiting, Write blocks until
// the flusher has taken them (a log that cannot keep up slows the host
// rather than losing lines). Close writes everything and stops; a line
// written after Close goes straight through. A line reaches stderr about a
// millisecond after it was logged, and a kill -9 can lose that last
// millisecond of lines, as with any buffered log.
type logWriter struct {
	w io.Writer

	mu     sync.Mutex
	buf    []byte
	spare  []byte
	closed bool
	room   *sync.Cond    // signalled when the flusher took a batch
	wake   chan struct{} // size 1; sent to and closed under mu
	done   chan struct{}
}

// maxPending bounds the bytes waiting for the flusher.
const maxPending = 1 << 20

// logLinger is how long the flusher lets lines gather before it writes
// them: a line reaches stderr at most this much (plus one write) after it
// was logged.
const logLinger = time.Millisecond

// newLogWriter starts the flusher of w.
func newLogWriter(w io.Writer) *logWriter {
	lw := &logWriter{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	lw.room = sync.NewCond(&lw.mu)
	go lw.flush()
	return lw
}

// Write queues a copy of p (a whole line: slog writes one record per call).
func (lw *logWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	for !lw.closed && len(lw.buf) > 0 && len(lw.buf)+len(p) > maxPending {
		lw.room.Wait()
	}
	if lw.closed {
		lw.mu.Unlock()
		return lw.w.Write(p)
	}
	if len(lw.buf) == 0 {
		lw.signalLocked()
	}
	lw.buf = append(lw.buf, p...)
	lw.mu.Unlock()
	return len(p), nil
}

// signalLocked wakes the flusher (never blocks; wake has room for one).
func (lw *logWriter) signalLocked() {
	if lw.closed {
		return // wake is closed: the flusher drains until buf is empty
	}
	select {
	case lw.wake <- struct{}{}:
	default:
	}
}

// flush writes batches until Close.
func (lw *logWriter) flush() {
	defer close(lw.done)
	for {
		_, ok := <-lw.wake
		if ok {
			// Let the lines of the next moment gather: without this
			// the flusher woke for nearly every line at gateway rates
			// and paid one write(2) each, off the request but not
			// fewer. A closing writer does not wait.
			time.Sleep(logLinger)
		}
		lw.mu.Lock()
		batch := lw.buf
		lw.buf, lw.spare = lw.spare[:0], nil
		lw.room.Broadcast()
		lw.mu.Unlock()
		if len(batch) > 0 {
			// A failing stderr cannot be reported anywhere: the lines
			// are gone, as they would be with a direct write.
			_, _ = lw.w.Write(batch)
		}
		lw.mu.Lock()
		if cap(batch) <= maxPending {
			lw.spare = batch[:0]
		}
		more := len(lw.buf) > 0
		if more {
			lw.signalLocked()
		}
		lw.mu.Unlock()
		if !ok && !more {
			return
		}
	}
}

// Close writes what is queued and stops the flusher; later writes go
// straight to the underlying writer. It is idempotent.
func (lw *logWriter) Close() {
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		return
	}
	lw.closed = true
	close(lw.wake)
	lw.room.Broadcast()
	lw.mu.Unlock()
	<-lw.done
}
