package host

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lwBuffer is a bytes.Buffer safe for the flusher and the test.
type lwBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lwBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lwBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogWriterKeepsEveryLine: lines from many goroutines all arrive, each
// whole and in its writer's order, and Close leaves nothing behind.
func TestLogWriterKeepsEveryLine(t *testing.T) {
	var out lwBuffer
	lw := newLogWriter(&out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(lw, "w%d line %d\n", w, i)
			}
		}()
	}
	wg.Wait()
	lw.Close()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	next := make([]int, writers)
	for _, ln := range got {
		var w, i int
		if _, err := fmt.Sscanf(ln, "w%d line %d", &w, &i); err != nil {
			t.Fatalf("torn line %q: %v", ln, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	if out.writes >= writers*lines {
		t.Errorf("%d writes for %d lines: nothing was batched", out.writes, writers*lines)
	}
	// After Close a line goes straight through.
	fmt.Fprintln(lw, "after close")
	if !strings.HasSuffix(out.String(), "after close\n") {
		t.Error("a line written after Close was lost")
	}
	lw.Close() // idempotent
}

// blockedWriter holds every write until released.
type blockedWriter struct {
	release chan struct{}
	io.Writer
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.Writer.Write(p)
}

// TestLogWriterBoundsPending: with the output stuck, Write blocks once
// maxPending bytes wait (it never drops and never grows without bound),
// and goes on when the output moves.
func TestLogWriterBoundsPending(t *testing.T) {
	var out lwBuffer
	bw := &blockedWriter{release: make(chan struct{}), Writer: &out}
	lw := newLogWriter(bw)
	line := []byte(strings.Repeat("x", 1023) + "\n")
	wrote := make(chan int)
	go func() {
		n := 0
		for range 3 * maxPending / len(line) {
			lw.Write(line)
			n++
		}
		wrote <- n
	}()
	// The flusher holds one batch in the stuck write; at most maxPending
	// more bytes can queue behind it, far fewer than three times that.
	select {
	case n := <-wrote:
		t.Fatalf("all %d lines were accepted while the output was stuck", n)
	case <-time.After(300 * time.Millisecond):
		// Accepting 3 MiB into memory takes milliseconds: still
		// blocked now means blocked on the bound.
	}
	close(bw.release)
	n := <-wrote
	lw.Close()
	if want := n * len(line); out.b.Len() != want {
		t.Fatalf("%d bytes out, want %d", out.b.Len(), want)
	}
}
