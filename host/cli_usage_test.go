package host

import (
	"context"
	"path/filepath"
	"testing"

	"adhost/runtime"
	"adhost/store"
)

type blockingSink struct{}

func (blockingSink) RecordUsage(context.Context, *runtime.UsageRecord) error { return nil }

// serve's tee only queues while every sink does: one sink that may block
// puts the engine's goroutine per run back.
func TestCLIUsageTeeQueues(t *testing.T) {
	s, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := store.OpenJSONL(filepath.Join(t.TempDir(), "usage.jsonl"), store.JSONLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, tc := range []struct {
		name string
		tee  cliUsageTee
		want bool
	}{
		{"store", cliUsageTee{s}, true},
		{"store and jsonl", cliUsageTee{s, j}, true},
		{"store and a blocking sink", cliUsageTee{s, blockingSink{}}, false},
	} {
		if got := tc.tee.QueuesUsage(); got != tc.want {
			t.Errorf("%s: QueuesUsage = %v, want %v", tc.name, got, tc.want)
		}
	}
}
