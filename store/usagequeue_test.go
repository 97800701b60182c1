package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// stalledWriter is a usageQueue write function whose first call blocks
// until release is closed, like a disk that stalls.
type stalledWriter struct {
	entered, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	batches          [][]int
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *stalledWriter) write(b []int) error {
	w.once.Do(func() {
		close(w.entered)
		<-w.release
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches = append(w.batches, slices.Clone(b))
	return nil
}

func (w *stalledWriter) written() (sizes, all []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.batches {
		sizes = append(sizes, len(b))
		all = append(all, b...)
	}
	return sizes, all
}

// Records queued while the writer is busy are written together, at most
// usageBatchMax per write, in the order they were queued.
func TestUsageQueueBatches(t *testing.T) {
	w := newStalledWriter()
	q := newUsageQueue("test", slog.New(slog.DiscardHandler), w.write)
	put := func(v int) {
		if err := q.put(t.Context(), v, fmt.Sprint(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	<-w.entered
	n := 1 + 2*usageBatchMax + 88
	for v := 1; v < n; v++ {
		put(v)
	}
	close(w.release)
	q.close()
	sizes, all := w.written()
	if want := []int{1, usageBatchMax, usageBatchMax, 88}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}
	if len(all) != n || !slices.IsSorted(all) {
		t.Errorf("wrote %d records (sorted: %v), want %d in order", len(all), slices.IsSorted(all), n)
	}
}

// A full queue makes put wait for room until its context is done; a record
// still not queued then is dropped and counted, and the others are all
// written.
func TestUsageQueueFull(t *testing.T) {
	synctest.Test(t, testUsageQueueFull)
}

func testUsageQueueFull(t *testing.T) {
	w := newStalledWriter()
	q := newUsageQueue("test", slog.New(slog.DiscardHandler), w.write)
	if err := q.put(t.Context(), 0, "0"); err != nil {
		t.Fatal(err)
	}
	<-w.entered
	for v := 1; v <= usageQueueLen; v++ {
		if err := q.put(t.Context(), v, fmt.Sprint(v)); err != nil {
			t.Fatal(err)
		}
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for i := int64(1); i <= 2; i++ {
		err := q.put(done, -1, "dropped")
		var de *UsageDroppedError
		if !errors.As(err, &de) || de.Dropped != i || de.RunID != "dropped" {
			t.Fatalf("put on a full queue with a done context: %v, want drop number %d", err, i)
		}
	}
	// A put with time left waits for room rather than dropping.
	waited := make(chan error, 1)
	go func() { waited <- q.put(t.Context(), usageQueueLen+1, "waited") }()
	synctest.Wait()
	select {
	case err := <-waited:
		t.Fatalf("put on a full queue returned %v before there was room", err)
	default:
	}
	close(w.release)
	if err := <-waited; err != nil {
		t.Errorf("put that waited for room: %v", err)
	}
	q.close()
	if err := q.put(t.Context(), 0, "late"); !errors.Is(err, errUsageClosed) {
		t.Errorf("put after close: %v, want errUsageClosed", err)
	}
	_, all := w.written()
	if len(all) != usageQueueLen+2 || !slices.IsSorted(all) {
		t.Errorf("wrote %d records (sorted: %v), want %d", len(all), slices.IsSorted(all), usageQueueLen+2)
	}
}
