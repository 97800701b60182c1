package wasm

import (
	"context"
	"sync"
	"testing"
	"time"

	"adhost/runtime/protocol"
)

func TestPoolRecycle(t *testing.T) {
	// No watchdog here: growing memory is slow under -race on a busy machine.
	e := loadProvider(t, Options{PoolSize: 2, ComputeLimit: time.Hour})
	p := newProvider(t, e, InstanceConfig{})
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || s.Cap != 2 {
		t.Fatalf("after Load: %+v", s)
	}
	first := e.x.pool.idle[0]
	start := first.mem.Size()
	if _, err := p.Complete(t.Context(), input("stream:a"), &sink{}); err != nil {
		t.Fatal(err)
	}
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || e.x.pool.idle[0] != first {
		t.Fatalf("a good call did not recycle its instance: %+v", s)
	}
	// A trap discards the instance; a warm one replaces it in the background.
	if _, err := p.Complete(t.Context(), input("panic"), &sink{}); protocol.CodeOf(err) != protocol.CodeInternalError {
		t.Fatal(err)
	}
	e.x.pool.wg.Wait()
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || e.x.pool.idle[0] == first {
		t.Fatalf("after a trap: %+v", s)
	}
	// Growing past the high-water mark discards; memory is back to the
	// start size in the replacement.
	if _, err := p.Complete(t.Context(), input("grow:24"), &sink{}); err != nil {
		t.Fatal(err)
	}
	e.x.pool.wg.Wait()
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 {
		t.Fatalf("after growth: %+v", s)
	}
	if got := e.x.pool.idle[0].mem.Size(); got != start {
		t.Errorf("memory after recycling = %d, want start size %d", got, start)
	}
}

func TestPoolConcurrent(t *testing.T) {
	e := loadProvider(t, Options{PoolSize: 3})
	p := newProvider(t, e, InstanceConfig{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 5 {
				s := &sink{}
				out, err := p.Complete(t.Context(), input("stream:hi"), s)
				if err != nil || out.Text != "hi" || s.text() != "hi" {
					t.Errorf("worker %d: %v %+v", i, err, out)
					return
				}
				if st := e.x.Stats(); st.Live > 3 {
					t.Errorf("live instances %d > cap 3", st.Live)
				}
			}
		})
	}
	wg.Wait()
}

// TestPoolWaitRespectsContext: with every instance busy, a caller waits
// until its context ends.
func TestPoolWaitRespectsContext(t *testing.T) {
	e := loadProvider(t, Options{PoolSize: 1})
	p := newProvider(t, e, InstanceConfig{})
	busy, release := make(chan struct{}), make(chan struct{})
	ctx1, cancel1 := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx1, input("wait-cancel"), &sink{onProgress: func() { close(busy) }})
		done <- err
	}()
	<-busy
	go func() { <-release; cancel1() }()
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	_, err := p.Complete(ctx2, input("stream:x"), &sink{})
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Errorf("waiting caller: %v, want CANCELLED", err)
	}
	close(release)
	if err := <-done; protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Errorf("busy caller: %v", err)
	}
	if out, err := p.Complete(t.Context(), input("stream:y"), &sink{}); err != nil || out.Text != "y" {
		t.Errorf("after: %v", err)
	}
}
