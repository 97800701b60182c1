package main

import (
	"bytes"
	"errors"
	"testing"

	"adhost/internal/clisim"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
	"adhost/sdk-plugin/sdktest"
)

// FuzzLines feeds arbitrary output lines to the parser: it never panics,
// and every failure is a provider error with a code (or cancellation).
func FuzzLines(f *testing.F) {
	ts, err := clisim.Transcripts("gemini-cli")
	if err != nil {
		f.Fatal(err)
	}
	for _, tr := range ts {
		f.Add(tr.Stdout, 0)
	}
	f.Add([]byte("{\"type\":\"result\"}\n{\"type\":\"result\"}"), 1)
	f.Fuzz(func(t *testing.T, out []byte, exit int) {
		h := sdktest.NewHost(t, sdktest.Options{})
		p := &turn{c: h.Call(), text: cliturn.NewText(h.Call(), true)}
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
