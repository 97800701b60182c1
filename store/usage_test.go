package store_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/store"
)

// recordMany records n records from 8 goroutines, as concurrent runs do,
// and returns their run ids. More than the queue holds, so that some wait.
func recordMany(t *testing.T, sink runtime.UsageSink, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := range n {
		ids[fmt.Sprintf("00000000-0000-4000-8000-%012d", i)] = true
	}
	base := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				if err := sink.RecordUsage(t.Context(), record(id, base.Add(time.Duration(i)))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return ids
}

// A graceful shutdown loses no record: every record acknowledged before
// Close is readable after reopening the store.
func TestUsageWrittenOnClose(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	want := recordMany(t, s, 10_000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUsage(t.Context(), record("late", time.Now())); err == nil {
		t.Error("RecordUsage after Close succeeded")
	}
	s = open(t, dir)
	defer s.Close()
	got := 0
	err := s.Usage(t.Context(), time.Time{}, func(r *runtime.UsageRecord) bool {
		if !want[r.RunID] {
			t.Errorf("unexpected record %s", r.RunID)
		}
		delete(want, r.RunID)
		got++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 0 {
		t.Errorf("%d records missing after reopen (%d read)", len(want), got)
	}
}

// Usage reads what was recorded before it, though the writer commits later.
func TestUsageReadsQueuedRecords(t *testing.T) {
	s, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		id := fmt.Sprintf("run-%d", i)
		if err := s.RecordUsage(t.Context(), record(id, time.Now())); err != nil {
			t.Fatal(err)
		}
		n := 0
		s.Usage(t.Context(), time.Time{}, func(*runtime.UsageRecord) bool { n++; return true })
		if n != i+1 {
			t.Fatalf("after %d records Usage lists %d", i+1, n)
		}
	}
}

// The JSONL sink writes every record queued before Close, one line each,
// and Flush makes the queued ones visible in the file without closing.
func TestJSONLWrittenOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.jsonl")
	j, err := store.OpenJSONL(path, store.JSONLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordUsage(t.Context(), record("first", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := jsonlRunIDs(t, path); len(got) != 1 || !got["first"] {
		t.Fatalf("after Flush the file holds %v, want [first]", got)
	}
	want := recordMany(t, j, 10_000)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got := jsonlRunIDs(t, path)
	delete(got, "first")
	for id := range want {
		if !got[id] {
			t.Fatalf("record %s missing after Close (%d of %d lines)", id, len(got), len(want))
		}
	}
}

func jsonlRunIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct{ RunID string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ids[rec.RunID] {
			t.Errorf("record %s written twice", rec.RunID)
		}
		ids[rec.RunID] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
