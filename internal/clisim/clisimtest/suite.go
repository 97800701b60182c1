package clisimtest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"adhost/internal/clisim"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
	"adhost/sdk-plugin/sdktest"
)

// Transcripts replays every recorded transcript of a through a fake CLI
// bound to the real wasm build (Check), and checks the command line the
// adapter built (args(tr), exactly) and that the prompt went to stdin,
// never into the arguments.
func Transcripts(t *testing.T, a Adapter, model string, args func(tr *clisim.Transcript) []string) {
	x := Load(t, a)
	ts, err := clisim.Transcripts(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		t.Run(tr.Name, func(t *testing.T) {
			b := Bind(t, x, a, tr, nil)
			Check(t, a, b, tr, model)
			if tr.Hang {
				return
			}
			got := b.Fake.Args()
			if want := args(tr); !slices.Equal(got, want) {
				t.Errorf("args %q, want %q", got, want)
			}
			prompt := "Be brief.\n\nHello " + tr.Name
			if in := b.Fake.Read("stdin"); in != prompt {
				t.Errorf("stdin %q, want %q", in, prompt)
			}
			if strings.Contains(strings.Join(got, " "), "Hello") {
				t.Error("the prompt is in the argument vector")
			}
		})
	}
}

// Fuzz feeds arbitrary output lines and exit codes to an adapter's
// parser, seeded with its transcripts: it never panics, and every failure
// is a provider error with a code (or cancellation).
func Fuzz(f *testing.F, id string, parser func(c *sdk.Call) cliturn.Parser) {
	ts, err := clisim.Transcripts(id)
	if err != nil {
		f.Fatal(err)
	}
	for _, tr := range ts {
		f.Add(tr.Stdout, tr.Exit)
	}
	f.Add([]byte("{\"type\":\"result\"}\n{\"type\":\"result\"}"), 1)
	f.Fuzz(func(t *testing.T, out []byte, exit int) {
		h := sdktest.NewHost(t, sdktest.Options{})
		p := parser(h.Call())
		check := func(err error) {
			var se *sdk.Error
			if err != nil && !errors.As(err, &se) && !errors.Is(err, sdk.ErrCancelled) {
				t.Fatalf("untyped error %v", err)
			}
			if se != nil && se.Code == "" {
				t.Fatal("error without a code")
			}
		}
		for _, line := range bytes.Split(out, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if err := p.Line(line); err != nil {
				check(err)
				return
			}
		}
		res, err := p.Finish(exit&0xff, nil)
		check(err)
		if err == nil && res == nil {
			t.Fatal("no output and no error")
		}
	})
}
