package host

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestTelemetryGuard(t *testing.T) {
	g := newGuard("traces", slog.New(slog.DiscardHandler))
	boom := errors.New("500")
	g.done(boom)
	g.done(boom)
	g.done(nil) // a success resets the run of failures
	g.done(boom)
	g.done(boom)
	if g.off.Load() {
		t.Fatal("off after two failures in a row")
	}
	g.done(boom)
	if !g.off.Load() {
		t.Fatal("still on after three failures in a row")
	}
	g = newGuard("metrics", slog.New(slog.DiscardHandler))
	g.done(context.DeadlineExceeded)
	if !g.off.Load() {
		t.Fatal("still on after a timeout")
	}
}

func TestCorrelation(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		traceparent string
		ok          bool
	}{
		{tp, true},
		{strings.Replace(tp, "-01", "-00", 1), true},
		{strings.Replace(tp, "-01", "-02", 1), false},
		{"01" + tp[2:], false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{strings.ToUpper(tp), false},
		{tp + "-x", false},
		{"", false},
	} {
		_, ok := parseTraceparent(tc.traceparent)
		if ok != tc.ok {
			t.Errorf("%q: %v, want %v", tc.traceparent, ok, tc.ok)
		}
	}
	r, _ := http.NewRequest("POST", "/v1/runs", nil)
	r.Header.Set("AgenticDriver-Request-Id", "6F9619FF-8B86-4011-B42D-00C04FC964FF")
	if _, id := correlation(r); id != "6f9619ff-8b86-4011-b42d-00c04fc964ff" {
		t.Errorf("request id %q", id)
	}
	r.Header.Set("AgenticDriver-Request-Id", "not-a-uuid")
	if _, id := correlation(r); id != "" {
		t.Errorf("invalid request id kept: %q", id)
	}
}

func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x")
	f.Fuzz(func(t *testing.T, s string) {
		sc, ok := parseTraceparent(s)
		if ok && (!sc.IsValid() || !sc.IsRemote() || len(s) != 55 || strings.ToLower(s) != s) {
			t.Fatalf("%q accepted as %v", s, sc)
		}
	})
}
