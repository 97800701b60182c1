package host

import (
	"io"
	"sync"
)

// logWriter takes the host log's lines off the request path: Write copies
// a line into a buffer and returns, and one goroutine writes whatever has
// gathered with a single write call. A busy host logs two lines a request
// (the access line and the run's end); written directly, each was a
// system call on the request's goroutine, serialized with every other
// request's on the one stderr descriptor — about a tenth of a gateway
// run's host CPU, measured. Batching is the BufferedWriteSyncer trade of
// zap and friends, with no timer: the flusher starts writing as soon as a
// line is there, so lines go out within one write's time on an idle host
// and in batches exactly when lines arrive faster than they can be written.
//
// Nothing is dropped: past maxPending bytes waiting, Write blocks until
// the flusher has taken them (a log that cannot keep up slows the host
// rather than losing lines). Close writes everything and stops; a line
// written after Close goes straight through. What a kill -9 can lose is
// the lines of the write in progress, as with any buffered log.
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
