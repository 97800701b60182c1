package main

import (
	"slices"
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
	x := clisimtest.Load(t, adapter)
	ts, err := clisim.Transcripts(adapter.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		t.Run(tr.Name, func(t *testing.T) {
			b := clisimtest.Bind(t, x, adapter, tr, nil)
			clisimtest.Check(t, adapter, b, tr, "gpt-5-codex")
			if tr.Hang {
				return
			}
			want := []string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only", "--model", "gpt-5-codex", "-"}
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
	clisimtest.Hygiene(t, x, clisimtest.HygieneCase{Adapter: adapter, Model: "gpt-5-codex",
		Hang: clisimtest.Find(t, ts, "hang"), OK: clisimtest.Find(t, ts, "text"), EnvVar: "CODEX_API_KEY"})
}
