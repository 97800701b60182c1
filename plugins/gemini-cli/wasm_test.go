package main

import (
	"slices"
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
	x := clisimtest.Load(t, adapter)
	ts, err := clisim.Transcripts(adapter.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		t.Run(tr.Name, func(t *testing.T) {
			b := clisimtest.Bind(t, x, adapter, tr, nil)
			clisimtest.Check(t, adapter, b, tr, "gemini-2.5-pro")
			if tr.Hang {
				return
			}
			want := []string{"--output-format", "stream-json", "--model", "gemini-2.5-pro"}
			if args := b.Fake.Args(); !slices.Equal(args, want) {
				t.Errorf("args %q, want %q", args, want)
			}
			if in := b.Fake.Read("stdin"); in != "Be brief.\n\nHello "+tr.Name {
				t.Errorf("stdin %q", in)
			}
		})
	}
}

// TestProcessHygiene: see clisimtest.Hygiene.
func TestProcessHygiene(t *testing.T) {
	x := clisimtest.Load(t, adapter)
	ts, err := clisim.Transcripts(adapter.ID)
	if err != nil {
		t.Fatal(err)
	}
	clisimtest.Hygiene(t, x, clisimtest.HygieneCase{Adapter: adapter, Model: "gemini-2.5-pro",
		Hang: clisimtest.Find(t, ts, "hang"), OK: clisimtest.Find(t, ts, "streamed"), EnvVar: "GEMINI_API_KEY"})
}
