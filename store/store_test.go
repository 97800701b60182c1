package store_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"adhost/runtime"
	"adhost/store"
)

var (
	_ runtime.AsyncUsageSink = (*store.Store)(nil)
	_ runtime.AsyncUsageSink = (*store.JSONL)(nil)
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func record(runID string, finished time.Time) *runtime.UsageRecord {
	in := int64(10)
	return &runtime.UsageRecord{
		Schema: runtime.UsageRecordSchema, EventID: runID, RunID: runID, HostID: "test-host",
		Subject: "dev-user", Provider: "fixture", Vendor: "adhost", Model: "fixture-model",
		AuthMode: "none", Status: runtime.UsageCompleted, Source: "adapter-report",
		StartedAt: finished.Add(-time.Second).Format(time.RFC3339Nano), FinishedAt: finished.Format(time.RFC3339Nano),
		DurationMs: 1000,
		Usage:      runtimeUsage(in), ObservedUsage: runtimeUsage(in),
		Coverage: runtime.UsageCoverage{StartedSteps: 1, CompletedSteps: 1, ReportedSteps: map[string]int{"inputTokens": 1}},
	}
}

func open(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUsagePersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Out of order on purpose: listing is by finish time.
	for _, id := range []string{"c", "a", "b"} {
		off := map[string]int{"a": 0, "b": 1, "c": 2}[id]
		if err := s.RecordUsage(t.Context(), record("00000000-0000-4000-8000-00000000000"+id, base.Add(time.Duration(off)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = open(t, dir)
	defer s.Close()
	var got []string
	err := s.Usage(t.Context(), time.Time{}, func(r *runtime.UsageRecord) bool {
		got = append(got, r.RunID[len(r.RunID)-1:])
		if r.Usage.InputTokens == nil || *r.Usage.InputTokens != 10 || r.Coverage.ReportedSteps["inputTokens"] != 1 {
			t.Errorf("record not round-tripped: %+v", r)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != "abc" {
		t.Errorf("order = %v, want a b c", got)
	}
	got = nil
	s.Usage(t.Context(), base.Add(time.Minute), func(r *runtime.UsageRecord) bool {
		got = append(got, r.RunID[len(r.RunID)-1:])
		return false
	})
	if strings.Join(got, "") != "b" {
		t.Errorf("since + stop = %v, want [b]", got)
	}
}

func TestRecordUsageRejectsBadRecords(t *testing.T) {
	s, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordUsage(t.Context(), &runtime.UsageRecord{}); err == nil {
		t.Error("record without run id accepted")
	}
	r := record("r1", time.Now())
	r.FinishedAt = "yesterday"
	if err := s.RecordUsage(t.Context(), r); err == nil {
		t.Error("record with bad finishedAt accepted")
	}
}

func TestQualification(t *testing.T) {
	s, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d1, d2 := strings.Repeat("a", 64), strings.Repeat("b", 64)
	if _, err := s.LatestQualification(t.Context(), d1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty: err = %v, want ErrNotFound", err)
	}
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, rep := range []string{`{"n":1}`, `{"n":3}`, `{"n":2}`} {
		ts := t0.Add(time.Duration([]int{0, 2, 1}[i]) * time.Hour)
		if err := s.PutQualification(t.Context(), d1, ts, json.RawMessage(rep)); err != nil {
			t.Fatal(err)
		}
	}
	s.PutQualification(t.Context(), d2, t0.Add(5*time.Hour), json.RawMessage(`{"other":true}`))
	q, err := s.LatestQualification(t.Context(), d1)
	if err != nil {
		t.Fatal(err)
	}
	if string(q.Report) != `{"n":3}` || !q.Created.Equal(t0.Add(2*time.Hour)) || q.Digest != d1 {
		t.Errorf("latest = %+v %s", q, q.Report)
	}
	if err := s.PutQualification(t.Context(), "short", t0, json.RawMessage(`{}`)); err == nil {
		t.Error("bad digest accepted")
	}
	if err := s.PutQualification(t.Context(), d1, t0, json.RawMessage(`{`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	s := open(t, dir)
	defer s.Close()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("mode = %v, want 0700", st.Mode().Perm())
	}
}

func TestJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "usage.jsonl")
	j, err := store.OpenJSONL(path, store.JSONLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := "run-" + string(rune('a'+i))
			if err := j.RecordUsage(t.Context(), record(id, time.Now())); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordUsage(t.Context(), record("late", time.Now())); err == nil {
		t.Error("RecordUsage after Close succeeded")
	}
	// Reopen appends rather than truncating.
	j, err = store.OpenJSONL(path, store.JSONLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.RecordUsage(t.Context(), record("run-z", time.Now()))
	j.Close()

	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	f, _ := os.Open(path)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	seen := map[string]bool{}
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if rec["schema"] != "agenticdriver.usage.v2" {
			t.Errorf("line %d: schema = %v", n+1, rec["schema"])
		}
		seen[rec["runId"].(string)] = true
		n++
	}
	if n != 21 || len(seen) != 21 {
		t.Errorf("lines = %d, distinct runs = %d, want 21", n, len(seen))
	}
}
