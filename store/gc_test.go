package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"adhost/runtime/durable"
	"adhost/store"
)

// An on-demand GC pass runs beside writers and the periodic pass without
// disturbing either, keeps every live value, and ends with the store: a
// pass after Close is refused and no goroutine outlives Close (TestMain's
// leak check).
func TestCollectGarbage(t *testing.T) {
	ctx := t.Context()
	s, err := store.Open(t.TempDir(), store.Options{GCInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("v"), 100<<10) // in the value log
	for i := range 40 {
		k := fmt.Sprintf("k/%02d", i)
		if _, err := s.Create(ctx, k, big); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Delete(ctx, k, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CollectGarbage(ctx, 0.5); err != nil {
			t.Fatalf("CollectGarbage: %v", err)
		}
	}
	for i := 1; i < 40; i += 2 {
		if e, err := s.Get(ctx, fmt.Sprintf("k/%02d", i)); err != nil || !bytes.Equal(e.Value, big) {
			t.Fatalf("k/%02d after GC: %d bytes %v", i, len(e.Value), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CollectGarbage(ctx, 0.5); !errors.Is(err, durable.ErrClosed) {
		t.Errorf("CollectGarbage after Close: %v", err)
	}
	m, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n, err := m.CollectGarbage(ctx, 0.5); n != 0 || err != nil {
		t.Errorf("CollectGarbage in memory: %d %v", n, err)
	}
}
