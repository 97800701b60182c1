//go:build !wasip1

package main

import (
	"testing"

	"adhost/internal/clisim"
	"adhost/internal/clisim/clisimtest"
)

var adapter = clisimtest.Adapter{Dir: "plugins/codex", ID: "codex", Version: version, Binary: binary, Streams: false}

// TestTranscripts replays every recorded transcript through a fake codex
// bound to the real wasm build: agent messages joined into the text,
// usage from turn.completed, a failed turn, an error event, a non-zero
// exit with stderr noise, a malformed line, a truncated output.
func TestTranscripts(t *testing.T) {
	clisimtest.Transcripts(t, adapter, "gpt-5-codex", func(*clisim.Transcript) []string {
		return []string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only", "--model", "gpt-5-codex", "-"}
	})
}

// TestProcessHygiene: the CLI and its children end with the run however
// it ends, see only the environment host.toml gives them, and a binary
// replaced after it was verified is refused (clisimtest.Hygiene).
func TestProcessHygiene(t *testing.T) {
	clisimtest.RunHygiene(t, adapter, "gpt-5-codex", "text", "CODEX_API_KEY")
}
