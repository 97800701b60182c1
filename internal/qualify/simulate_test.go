//go:build !race

package qualify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"adhost/internal/testenv"
	"adhost/runtime/wasm"
)

// TestSimulate qualifies the real wasm builds of the vendor adapters
// against the simulator, as `adhost qualify --extension <id>@1.0.0
// --simulate` does. (Not under -race: wazero runs an order of magnitude
// slower instrumented; runtime/wasm has its own race tests.)
func TestSimulate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm modules")
	}
	for _, id := range []string{"openai", "anthropic", "gemini"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			path := testenv.BuildPlugin(t, "plugins/"+id)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			pin := wasm.Pin{ID: id, Version: "1.0.0", Path: path, SHA256: hex.EncodeToString(sum[:])}
			x, err := wasm.Load(t.Context(), pin, wasm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close(context.Background())
			rep, err := Simulate(t.Context(), x, SimulateOptions{Model: "gpt-4o"})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed {
				t.Fatalf("qualification failed:\n%s", rep.Markdown())
			}
			got := statuses(rep)
			for _, name := range []string{ScenarioDiscovery, ScenarioText, ScenarioStructured, ScenarioTools, ScenarioPrivateError, ScenarioCancel, ScenarioCredential} {
				if got[name] != StatusPassed {
					t.Errorf("%s: %s", name, got[name])
				}
			}
			if rep.Model != "gpt-4o" || rep.Extension.ID != id || rep.Extension.SHA256 != pin.SHA256 || !strings.HasPrefix(rep.Endpoint, "http://127.0.0.1:") {
				t.Errorf("report header %+v %s", rep.Extension, rep.Endpoint)
			}
		})
	}
}
