//go:build !wasip1

package main

import (
	"testing"

	"adhost/internal/clisim"
	"adhost/internal/clisim/clisimtest"
)

var adapter = clisimtest.Adapter{Dir: "plugins/gemini-cli", ID: "gemini-cli", Version: version, Binary: binary, Streams: true}

// TestTranscripts replays every recorded transcript through a fake gemini
// bound to the real wasm build: streamed and buffered turns, usage from
// the result's stats, an error result, error events, a non-zero exit with
// stderr noise, a malformed line, a truncated output.
func TestTranscripts(t *testing.T) {
	clisimtest.Transcripts(t, adapter, "gemini-2.5-pro", func(*clisim.Transcript) []string {
		return []string{"--output-format", "stream-json", "--model", "gemini-2.5-pro"}
	})
}

// TestProcessHygiene: the CLI and its children end with the run however
// it ends, see only the environment host.toml gives them, and a binary
// replaced after it was verified is refused (clisimtest.Hygiene).
func TestProcessHygiene(t *testing.T) {
	clisimtest.RunHygiene(t, adapter, "gemini-2.5-pro", "streamed", "GEMINI_API_KEY")
}
