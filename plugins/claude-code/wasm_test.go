//go:build !wasip1

package main

import (
	"testing"

	"adhost/internal/clisim"
	"adhost/internal/clisim/clisimtest"
)

var adapter = clisimtest.Adapter{Dir: "plugins/claude-code", ID: "claude-code", Version: version, Binary: binary, Streams: true}

// TestTranscripts replays every recorded transcript through a fake claude
// bound to the real wasm build: streamed and buffered turns, usage and
// cost, error results, a non-zero exit with stderr noise, a malformed line
// and a truncated output each end as the transcript says, and no CLI
// output reaches a public message. The command line: print mode,
// stream-json with --verbose, the model, deltas only when the turn
// streams.
func TestTranscripts(t *testing.T) {
	clisimtest.Transcripts(t, adapter, "claude-sonnet-4-5", func(tr *clisim.Transcript) []string {
		want := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5"}
		if !tr.Want.Buffered {
			want = append(want, "--include-partial-messages")
		}
		return want
	})
}

// TestProcessHygiene: the CLI and its children end with the run however
// it ends, see only the environment host.toml gives them, and a binary
// replaced after it was verified is refused (clisimtest.Hygiene).
func TestProcessHygiene(t *testing.T) {
	clisimtest.RunHygiene(t, adapter, "claude-sonnet-4-5", "streamed", "ANTHROPIC_API_KEY")
}
