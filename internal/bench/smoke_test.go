package bench

import (
	"encoding/json"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestSmoke checks, once, that the stack the benchmarks measure really
// works: a JSON conformance:text run, an SSE bench:deltas run, and a bare
// answer of the host's answer size. It is the only thing `go test` runs
// here without -bench.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the fixture extension and serves it")
	}
	e := newEnv(t, envOptions{})
	body, err := post(e.hc, e.url, tokenFor(0), runBody("conformance:text"), false)
	if err != nil {
		t.Fatal(err)
	}
	var res protocol.RunResult
	if err := json.Unmarshal(body, &res); err != nil || res.Text != "Hello fixture" {
		t.Fatalf("JSON run = %s (%v), want text Hello fixture", body, err)
	}
	if got := bareAnswer(len(body)); len(got) != len(body) || !json.Valid(got) {
		t.Errorf("bareAnswer(%d) = %d bytes, valid %v", len(body), len(got), json.Valid(got))
	}

	c, err := client.New(e.url, client.WithToken(tokenFor(1)), client.WithHTTPClient(e.hc))
	if err != nil {
		t.Fatal(err)
	}
	var text int
	sres, err := c.Stream(t.Context(), &protocol.RunRequest{Provider: providerID, Model: modelID, Input: "bench:deltas:1000"},
		func(ev client.Event) error {
			if ev.Type == client.EventTextDelta {
				text += len(ev.Text)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if text != 1000 || len(sres.Text) != 1000 {
		t.Errorf("SSE run: %d delta bytes, %d result bytes, want 1000", text, len(sres.Text))
	}
	if _, ok := procStatusMiB("VmRSS"); !ok {
		t.Log("no /proc/self/status: the RSS metrics will be missing")
	}
}
