package main

import (
	"flag"
	"testing"

	"adhost/internal/vendorsim/simtest"
)

var update = flag.Bool("update", false, "rewrite events.jsonl and request.json of testdata/*.txtar")

// testKey is the API key the simulated host injects; the simulator checks
// that it arrived as "Authorization: Bearer <testKey>".
const testKey = "sk-test-openai-0123456789"

// TestTranscripts replays testdata/*.txtar against the adapter through the
// SDK's fake host (see internal/vendorsim for the format).
func TestTranscripts(t *testing.T) {
	simtest.ReplayDir(t, "testdata", simtest.ReplayOptions{
		Vendor: "openai",
		APIKey: testKey,
		Update: *update,
		Run:    simtest.SDKRunner(provider{}),
	})
}
