package wasm

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

func loadSpinner(t testing.TB, opts Options) (*env, runtime.Provider) {
	t.Helper()
	e := loadGuest(t, "spinner", "spinner", "1.0.0", opts)
	return e, newProvider(t, e, InstanceConfig{ID: "spin"})
}

// completeCPU runs one Complete and returns the CPU time its thread used.
// The call runs the guest on this goroutine (run locks it to its thread;
// the lock here keeps it there across the call's waits too), so the
// thread's clock is the guest's compute plus the host's work for it: a
// measure that a loaded machine does not stretch the way it does wall time.
func completeCPU(t *testing.T, p runtime.Provider, msg string) (time.Duration, error) {
	t.Helper()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	id := threadClockID()
	if id == 0 {
		t.Skip("no thread CPU clock on this platform")
	}
	start := readClock(id)
	_, err := p.Complete(t.Context(), input(msg), &sink{})
	return time.Duration(readClock(id) - start), err
}

// TestWatchdogCountsHostCalls: host functions that do not wait count as
// compute, and so do waiting ones that returned at once (a close, a bad
// handle), so a guest that loops on config(), emit, http_close or
// http_next_event of no handle is stopped by the watchdog after between
// computeMs and 2× computeMs of CPU.
func TestWatchdogCountsHostCalls(t *testing.T) {
	const limit = 200 * time.Millisecond
	e, p := loadSpinner(t, Options{ComputeLimit: limit})
	for _, mode := range []string{"config", "progress", "close", "badevent"} {
		t.Run(mode, func(t *testing.T) {
			cpu, err := completeCPU(t, p, mode)
			if !errors.Is(err, errWatchdog) {
				t.Fatalf("err = %v, want the watchdog's", err)
			}
			checkFault(t, err, protocol.CodeProviderFailed, "The provider extension exceeded its compute limit.")
			// Contained: stopped, and not long after its limit. There is
			// no lower bound: the watchdog counts wall time spent in the
			// guest, and a loaded machine hands the guest less CPU in it.
			if cpu > 5*limit {
				t.Errorf("stopped after %v of CPU, want at most %v", cpu, 5*limit)
			}
		})
	}
	if !strings.Contains(e.logs.String(), "compute watchdog") {
		t.Error("watchdog stop not logged")
	}
}

// checkFault checks a guest fault's public shape: code, its fixed class
// message, not retryable, and no guest text.
func checkFault(t *testing.T, err error, code protocol.Code, message string) {
	t.Helper()
	pe := protocol.AsPublic(err)
	if pe.Code != code || pe.Message != message || pe.Retryable {
		t.Errorf("public = %s %q retryable=%v, want %s %q not retryable", pe.Code, pe.Message, pe.Retryable, code, message)
	}
	if status := protocol.HTTPStatus(pe.Code); status == 500 {
		t.Errorf("status %d: a guest fault is not the host's", status)
	}
}

// slowSSE serves a stream of n events, one every gap.
func slowSSE(t *testing.T, n int, gap time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; n < 0 || i < n; i++ {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func rootsOf(srv *httptest.Server) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return roots
}

func loadNetSpinner(t *testing.T, srv *httptest.Server, opts Options) (*env, runtime.Provider) {
	t.Helper()
	opts.RootCAs = rootsOf(srv)
	e := loadGuest(t, "spinner", "spinner", "1.0.0", opts)
	return e, newProvider(t, e, InstanceConfig{ID: "spin", Settings: json.RawMessage(`{"endpoint":"` + srv.URL + `"}`)})
}

// TestWatchdogSparesNetworkWaits: a guest that really waits on the network
// between events is never stopped, however long the turn: here 8 events
// half a compute limit apart, four limits in all.
func TestWatchdogSparesNetworkWaits(t *testing.T) {
	const limit = 200 * time.Millisecond
	srv := slowSSE(t, 8, limit/2)
	_, p := loadNetSpinner(t, srv, Options{ComputeLimit: limit})
	s := &sink{}
	start := time.Now()
	if _, err := p.Complete(t.Context(), input("sse:"+srv.URL+"/"), s); err != nil {
		t.Fatalf("Complete after %v: %v", time.Since(start), err)
	}
	if s.progress != 8 {
		t.Errorf("%d progress reports, want 8", s.progress)
	}
}

// TestTurnTimeout: the operator's wall-clock bound stops a guest that
// waits as well as one that computes; none by default (above).
func TestTurnTimeout(t *testing.T) {
	srv := slowSSE(t, -1, 20*time.Millisecond) // never ends
	e, p := loadNetSpinner(t, srv, Options{ComputeLimit: time.Hour, TurnTimeout: 300 * time.Millisecond})
	_, err := p.Complete(t.Context(), input("sse:"+srv.URL+"/"), &sink{})
	if !errors.Is(err, errTurnTimeout) {
		t.Fatalf("err = %v, want the turn timeout", err)
	}
	checkFault(t, err, protocol.CodeTimeout, "The provider extension exceeded its time limit for a model turn.")
	if !strings.Contains(e.logs.String(), "turn timeout") {
		t.Error("turn timeout not logged")
	}
	// A computing guest too.
	_, err = p.Complete(t.Context(), input("config"), &sink{})
	checkFault(t, err, protocol.CodeTimeout, "The provider extension exceeded its time limit for a model turn.")
	// The extension still serves.
	if _, err := p.Complete(t.Context(), input("flood:10:5"), &sink{}); err != nil {
		t.Errorf("after the timeouts: %v", err)
	}
}

// TestTextBoundAtTheSource: exactly maxStreamedText bytes of text pass
// emit, one more stops the guest at the emit that crosses the bound, and
// the sink never sees a byte past it. (A result of 2,000,000 bytes of
// text does not fit abi.MaxOutputBytes of output JSON, so the largest
// turn that completes streams a little less.)
func TestTextBoundAtTheSource(t *testing.T) {
	_, p := loadSpinner(t, Options{ComputeLimit: time.Hour})
	for _, tc := range []struct {
		total   int
		ok      bool
		stopped bool // at emit, by the text bound
	}{
		{1_999_000, true, false},
		{maxStreamedText, false, false}, // the output is too large, not the stream
		{maxStreamedText + 1, false, true},
		{100 << 20, false, true},
	} {
		t.Run(strconv.Itoa(tc.total), func(t *testing.T) {
			s := &sink{}
			out, err := p.Complete(t.Context(), input(fmt.Sprintf("flood:%d:1000", tc.total)), s)
			if tc.ok {
				if err != nil || len(out.Text) != tc.total || len(s.text()) != tc.total {
					t.Fatalf("err %v, %d bytes streamed", err, len(s.text()))
				}
				return
			}
			checkFault(t, err, protocol.CodeInvalidProviderResult, protocol.Message(protocol.CodeInvalidProviderResult))
			if got := strings.Contains(err.Error(), "bytes of text streamed"); got != tc.stopped {
				t.Errorf("stopped by the text bound = %v, want %v (%v)", got, tc.stopped, err)
			}
			if n := len(s.text()); n != min(tc.total, maxStreamedText) {
				t.Errorf("sink got %d bytes", n)
			}
		})
	}
}

// TestFloodOverTheEngine: 100 MB of 1 KiB text emits through the engine,
// read by a client at full speed, fails the same way every time: the
// guest is stopped at the source, before the event queue can fill.
func TestFloodOverTheEngine(t *testing.T) {
	_, p := loadSpinner(t, Options{ComputeLimit: time.Hour})
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: "spin", Name: "Spinner", Vendor: "adhost", AuthMode: "none", AccountID: "local",
			Models: []string{"m"}, UsageSource: "adapter-report", Provider: p,
			Capabilities: map[string]bool{"textStreaming": true},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	who := &runtime.Principal{Subject: "s", Providers: map[string]bool{"spin": true}}
	for i := range 10 {
		r, err := e.Start(t.Context(), who, &protocol.RunRequest{Provider: "spin", Model: "m",
			Input: fmt.Sprintf("flood:%d:1024", 100<<20)}, runtime.ModeStream)
		if err != nil {
			t.Fatal(err)
		}
		var last runtime.Event
		text := 0
		for {
			ev, err := r.Next(t.Context())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == runtime.EventTextDelta {
				var d struct{ Text string }
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				text += len(d.Text)
			}
			last = ev
		}
		var term struct {
			Error protocol.ErrorInfo `json:"error"`
		}
		if err := json.Unmarshal(last.Data, &term); err != nil {
			t.Fatal(err)
		}
		if last.Type != runtime.EventRunFailed || term.Error.Code != protocol.CodeInvalidProviderResult || term.Error.Retryable {
			t.Fatalf("run %d: %s %+v", i, last.Type, term.Error)
		}
		if text > maxStreamedText {
			t.Errorf("run %d: %d bytes of text delivered", i, text)
		}
	}
}
