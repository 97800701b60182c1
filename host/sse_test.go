package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"adhost/abi/sse"
	"adhost/runtime"
)

func TestAppendFrame(t *testing.T) {
	ev := runtime.Event{Type: "text.delta", Sequence: 42, Data: []byte(`{"type":"text.delta","text":"hi"}`)}
	got := string(appendFrame(nil, ev))
	want := "id: 42\nevent: text.delta\ndata: {\"type\":\"text.delta\",\"text\":\"hi\"}\n\n"
	if got != want {
		t.Errorf("frame = %q, want %q", got, want)
	}
	if n := frameLineBytes(ev); n != len(want)-4 {
		t.Errorf("frameLineBytes = %d, want %d", n, len(want)-4)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		buf := make([]byte, 0, 256)
		_ = appendFrame(buf, ev)
	}); allocs > 1 {
		t.Errorf("appendFrame allocates %v times", allocs)
	}
}

func TestCheckFrame(t *testing.T) {
	// The largest data that still fits the 2,000,000-byte frame bound.
	head := len("id: 1") + len("event: run.completed") + len("data: ")
	fits := bytes.Repeat([]byte("a"), MaxFrameBytes-head)
	for _, tc := range []struct {
		name string
		ev   runtime.Event
		ok   bool
	}{
		{"ok", runtime.Event{Type: "run.completed", Sequence: 1, Data: []byte("{}")}, true},
		{"at the bound", runtime.Event{Type: "run.completed", Sequence: 1, Data: fits}, true},
		{"one over", runtime.Event{Type: "run.completed", Sequence: 1, Data: append(fits, 'a')}, false},
		{"newline in data", runtime.Event{Type: "x", Sequence: 1, Data: []byte("{\n}")}, false},
		{"CR in data", runtime.Event{Type: "x", Sequence: 1, Data: []byte("{\r}")}, false},
		{"newline in type", runtime.Event{Type: "a\nb", Sequence: 1, Data: []byte("{}")}, false},
		{"empty type", runtime.Event{Sequence: 1, Data: []byte("{}")}, false},
		{"empty data", runtime.Event{Type: "x", Sequence: 1}, false},
	} {
		if err := checkFrame(tc.ev); (err == nil) != tc.ok {
			t.Errorf("%s: checkFrame = %v", tc.name, err)
		}
	}
}

// FuzzFrameRoundTrip: every frame the host writes parses back, with the
// SSE reader clients use, to exactly the event it framed, however the
// bytes are split.
func FuzzFrameRoundTrip(f *testing.F) {
	f.Add(int64(1), "run.started", []byte(`{"type":"run.started"}`), uint8(1))
	f.Add(int64(9007199254740991), "text.delta", []byte(`{"text":" leading space"}`), uint8(3))
	f.Add(int64(7), "x:y", []byte(":not a comment"), uint8(7))
	f.Add(int64(2), "é", []byte("\xef\xbb\xbfbom-looking"), uint8(2))
	f.Fuzz(func(t *testing.T, seq int64, typ string, data []byte, chunk uint8) {
		ev := runtime.Event{Type: typ, Sequence: seq, Data: data}
		if checkFrame(ev) != nil || seq < 1 {
			return
		}
		frame := appendFrame(nil, ev)
		n := int(chunk)%16 + 1
		rd := sse.NewReader(&chunkReader{b: frame, n: n})
		got, err := rd.Next()
		if err != nil {
			t.Fatalf("Next: %v (frame %q)", err, frame)
		}
		if got.Name != typ || !bytes.Equal(got.Data, data) || got.ID != strconv.FormatInt(seq, 10) {
			t.Fatalf("round trip: got (%q, %q, %q), want (%q, %q, %d)", got.Name, got.Data, got.ID, typ, data, seq)
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("second Next = %v, want EOF", err)
		}
	})
}

type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// TestHeartbeat runs a stream whose provider never answers inside a
// synctest bubble: a heartbeat comment appears after each interval of fake
// time, and the run keeps going (heartbeats are not progress).
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakeProvider{}
		eng, err := runtime.New(runtime.Options{Providers: []*runtime.ProviderInstance{{
			ID: testProvider, Name: "Fake", Vendor: "test", AuthMode: "none",
			Capabilities: map[string]bool{"tools": false, "textStreaming": true}, Provider: fp,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(ServerOptions{Engine: eng, Tokens: []Token{{ID: "t", Subject: "s", Secret: testToken, Providers: []string{testProvider}}}})
		s.SetReady()

		ctx, cancel := context.WithCancel(context.Background())
		r, _ := http.NewRequestWithContext(ctx, "POST", "/v1/runs", strings.NewReader(runBody(blockingInput)))
		r.RequestURI = "/v1/runs"
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "text/event-stream")
		rec := newRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeHTTP(rec, r)
		}()

		synctest.Wait()
		if got := strings.Count(rec.String(), ": heartbeat\n\n"); got != 0 {
			t.Fatalf("heartbeat before the interval: %q", rec.String())
		}
		time.Sleep(DefaultHeartbeat)
		synctest.Wait()
		if got := strings.Count(rec.String(), ": heartbeat\n\n"); got != 1 {
			t.Fatalf("after 15 s: %d heartbeats in %q", got, rec.String())
		}
		time.Sleep(2 * DefaultHeartbeat)
		synctest.Wait()
		if got := strings.Count(rec.String(), ": heartbeat\n\n"); got != 3 {
			t.Fatalf("after 45 s: %d heartbeats", got)
		}
		if eng.Running() != 1 {
			t.Fatal("the run ended")
		}
		// The client leaves: the run is cancelled and the handler returns.
		cancel()
		<-done
		synctest.Wait()
		if eng.Running() != 0 {
			t.Error("run still holds its slot after the disconnect")
		}
		if strings.Contains(rec.String(), "run.cancelled") {
			t.Error("wrote to a client that is gone")
		}
		if err := eng.Shutdown(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	})
}

func eventOf(typ string, seq int64, data []byte) runtime.Event {
	return runtime.Event{Type: typ, Sequence: seq, Data: data}
}
