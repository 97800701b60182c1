package main

import (
	"slices"
	"strings"
	"testing"

	"adhost/internal/clisim"
	"adhost/internal/clisim/clisimtest"
)

var adapter = clisimtest.Adapter{Dir: "plugins/claude-code", ID: "claude-code", Version: version, Binary: binary, Streams: true}

// TestTranscripts replays every recorded transcript through a fake claude
// bound to the real wasm build: streamed and buffered turns, usage and
// cost, error results, a non-zero exit with stderr noise, a malformed line
// and a truncated output each end as the transcript says, and no CLI
// output reaches a public message.
func TestTranscripts(t *testing.T) {
	x := clisimtest.Load(t, adapter)
	ts, err := clisim.Transcripts(adapter.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		t.Run(tr.Name, func(t *testing.T) {
			b := clisimtest.Bind(t, x, adapter, tr, nil)
			clisimtest.Check(t, adapter, b, tr, "claude-sonnet-4-5")
			if tr.Hang {
				return
			}
			// The command line: print mode, stream-json with --verbose,
			// the model; deltas only when the turn streams; the prompt on
			// stdin, never in the arguments.
			args := b.Fake.Args()
			want := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5"}
			if !tr.Want.Buffered {
				want = append(want, "--include-partial-messages")
			}
			if !slices.Equal(args, want) {
				t.Errorf("args %q, want %q", args, want)
			}
			if in := b.Fake.Read("stdin"); in != "Be brief.\n\nHello "+tr.Name {
				t.Errorf("stdin %q", in)
			}
			if strings.Contains(strings.Join(args, " "), "Hello") {
				t.Error("the prompt is in the argument vector")
			}
		})
	}
}

// TestProcessHygiene: the CLI and its children end with the run however
// it ends, see only the environment host.toml gives them, and a binary
// replaced after it was verified is refused.
func TestProcessHygiene(t *testing.T) {
	x := clisimtest.Load(t, adapter)
	ts, err := clisim.Transcripts(adapter.ID)
	if err != nil {
		t.Fatal(err)
	}
	clisimtest.Hygiene(t, x, clisimtest.HygieneCase{Adapter: adapter, Model: "claude-sonnet-4-5",
		Hang: clisimtest.Find(t, ts, "hang"), OK: clisimtest.Find(t, ts, "streamed"), EnvVar: "ANTHROPIC_API_KEY"})
}
