package qualify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"adhost/internal/testenv"
	"adhost/runtime/wasm"
)

// TestSimulateCLI qualifies each local CLI adapter against its recorded
// transcripts through the fake binary: text, structured output, a private
// error and cancellation pass; tools and the credential check are
// skipped, as they do not apply.
func TestSimulateCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm modules")
	}
	for _, id := range []string{"claude-code", "codex", "gemini-cli"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			path := testenv.BuildPlugin(t, "plugins/"+id)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			x, err := wasm.Load(t.Context(), wasm.Pin{ID: id, Version: "1.0.0", Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close(context.Background())
			rep, err := SimulateCLI(t.Context(), x, SimulateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed {
				t.Fatalf("qualification failed:\n%s", rep.Markdown())
			}
			got := statuses(rep)
			for name, want := range map[string]string{
				ScenarioDiscovery: StatusPassed, ScenarioText: StatusPassed, ScenarioStructured: StatusPassed,
				ScenarioPrivateError: StatusPassed, ScenarioCancel: StatusPassed,
				ScenarioTools: StatusSkipped, ScenarioCredential: StatusSkipped,
			} {
				if got[name] != want {
					t.Errorf("%s: %s, want %s", name, got[name], want)
				}
			}
		})
	}
	t.Run("an API adapter", func(t *testing.T) {
		path := testenv.BuildPlugin(t, "plugins/openai")
		b, _ := os.ReadFile(path)
		sum := sha256.Sum256(b)
		x, err := wasm.Load(t.Context(), wasm.Pin{ID: "openai", Version: "1.0.0", Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close(context.Background())
		if _, err := SimulateCLI(t.Context(), x, SimulateOptions{}); err == nil {
			t.Fatal("SimulateCLI of an extension without [process] succeeded")
		}
	})
}
