package wasm

import (
	"context"
	"encoding/json"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

func newProvider(t testing.TB, e *env, ic InstanceConfig) runtime.Provider {
	t.Helper()
	p, err := e.x.Provider(ic)
	if err != nil {
		t.Fatalf("Provider: %v", err)
	}
	return p
}

func TestCompleteStreams(t *testing.T) {
	e := loadProvider(t, Options{})
	p := newProvider(t, e, InstanceConfig{ID: "p"})
	s := &sink{}
	out, err := p.Complete(t.Context(), input("stream:hello world"), s)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if out.Text != "hello world" || out.FinishReason != "stop" || s.text() != "hello world" {
		t.Errorf("out = %+v, streamed %q", out, s.text())
	}
	out, err = p.Complete(t.Context(), input("deltas:50"), s)
	if err != nil || len(out.Text) != 50 {
		t.Fatalf("deltas: %v, %+v", err, out)
	}
	// Usage emitted and returned.
	s = &sink{}
	out, err = p.Complete(t.Context(), input("usage"), s)
	if err != nil || s.usage == nil || *s.usage.InputTokens != 3 || *out.Usage.OutputTokens != 4 {
		t.Errorf("usage: err=%v sink=%+v out=%+v", err, s.usage, out)
	}
	out, err = p.Complete(t.Context(), input("toolcalls"), &sink{})
	if err != nil || len(out.ToolCalls) != 1 || string(out.ToolCalls[0].Arguments) != `{"value":7}` {
		t.Errorf("toolcalls: %v %+v", err, out)
	}
	io, err := p.Inspect(t.Context())
	if err != nil || io.Code != "CATALOG_AVAILABLE" || len(io.Models) != 1 {
		t.Errorf("Inspect = %+v, %v", io, err)
	}
}

func TestInspectUnsupported(t *testing.T) {
	e := loadProvider(t, Options{})
	p := newProvider(t, e, InstanceConfig{})
	e.x.m.Inspect = false // as if the manifest said inspect = false
	io, err := p.Inspect(t.Context())
	if err != nil || io.Code != "DISCOVERY_UNSUPPORTED" {
		t.Errorf("Inspect = %+v, %v", io, err)
	}
}

// TestFailures checks each hostile behaviour maps to a stable public code,
// and that the extension keeps serving afterwards.
func TestFailures(t *testing.T) {
	// The watchdog has its own test; a 50 MB allocation is slow under -race.
	e := loadProvider(t, Options{ComputeLimit: time.Hour})
	p := newProvider(t, e, InstanceConfig{})
	const trapped = "The provider extension trapped."
	for _, tc := range []struct {
		in        string
		want      protocol.Code
		retryable bool
		message   string // "": the code's fixed message
	}{
		{"panic", protocol.CodeProviderFailed, false, trapped},
		{"exit", protocol.CodeProviderFailed, false, trapped},
		{"memory", protocol.CodeProviderFailed, false, "The provider extension exceeded its memory limit."},
		{"bigoutput", protocol.CodeInvalidProviderResult, false, ""},
		{"bigemit", protocol.CodeInvalidProviderResult, false, ""},
		{"badptr", protocol.CodeProviderFailed, false, trapped},
		{"badresult", protocol.CodeInvalidProviderResult, false, ""},
		{"mismatch", protocol.CodeInvalidProviderResult, false, ""},
		{"status", protocol.CodeInvalidProviderResult, false, ""},
		{"cancelled", protocol.CodeCancelled, false, ""},
		{"error:RATE_LIMITED:429", protocol.CodeRateLimited, true, ""},
		{"error:PROVIDER_ERROR:503", protocol.CodeProviderError, true, ""},
		{"error:PROVIDER_ERROR:400", protocol.CodeProviderError, false, ""},
		{"error:PROVIDER_AUTH:401", protocol.CodeProviderAuth, false, ""},
		{"error:INCOMPLETE_STREAM:0", protocol.CodeIncompleteStream, false, ""},
		{"error:UNAUTHORIZED:0", protocol.CodeInvalidProviderResult, false, ""},
		{"error:INVALID_PROVIDER_RESULT:0", protocol.CodeInvalidProviderResult, false, ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := p.Complete(t.Context(), input(tc.in), &sink{})
			if got := protocol.CodeOf(err); got != tc.want {
				t.Fatalf("code = %s, want %s (err %v)", got, tc.want, err)
			}
			pe := protocol.AsPublic(err)
			message := tc.message
			if message == "" {
				message = protocol.Message(tc.want)
			}
			if pe.Message != message || pe.Retryable != tc.retryable {
				t.Errorf("public = %q retryable=%v, want %q, retryable=%v", pe.Message, pe.Retryable, message, tc.retryable)
			}
			if strings.Contains(err.Error(), "private-marker") {
				t.Errorf("error carries the guest's message: %v", err)
			}
			// The extension still serves.
			if out, err := p.Complete(t.Context(), input("stream:ok"), &sink{}); err != nil || out.Text != "ok" {
				t.Fatalf("after %s: %v", tc.in, err)
			}
		})
	}
}

func TestSandboxNothingToRead(t *testing.T) {
	t.Setenv("ADHOST_TEST_SECRET", "sk-secret")
	e := loadProvider(t, Options{})
	p := newProvider(t, e, InstanceConfig{
		Settings: json.RawMessage(`{"model_hint": "x"}`),
		Secrets:  map[string]func(context.Context) (string, error){"api_key": func(context.Context) (string, error) { return "sk-secret", nil }},
	})
	out, err := p.Complete(t.Context(), input("env"), &sink{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Text, "env= args=0 file=true dir=true") {
		t.Errorf("guest saw %q", out.Text)
	}
	out, err = p.Complete(t.Context(), input("config"), &sink{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Text, `config={"model_hint":"x"}`) || strings.Contains(out.Text, "sk-secret") {
		t.Errorf("config/input = %q", out.Text)
	}
}

func TestLogs(t *testing.T) {
	e := loadProvider(t, Options{})
	p := newProvider(t, e, InstanceConfig{})
	if _, err := p.Complete(t.Context(), input("log"), &sink{}); err != nil {
		t.Fatal(err)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "hello from guest") || !strings.Contains(logs, "extension=hostile@1.0.0") {
		t.Errorf("guest log missing: %s", logs)
	}
	if !strings.Contains(logs, `level=DEBUG msg="guest output" extension=hostile@1.0.0 stream=stderr text="stderr line"`) {
		t.Errorf("stderr not captured at debug: %s", logs)
	}
}

// TestLoopCancel: a spinning guest is stopped by cancellation, and the host's
// GC completes while it spins.
func TestLoopCancel(t *testing.T) {
	e := loadProvider(t, Options{ComputeLimit: time.Hour})
	p := newProvider(t, e, InstanceConfig{})
	ctx, cancel := context.WithCancelCause(t.Context())
	gcDone := make(chan struct{})
	var otherErr error
	s := &sink{onProgress: func() {
		go func() {
			goruntime.GC() // must not wait for the spinning guest
			// Another call on the same extension is unaffected.
			_, otherErr = p.Complete(t.Context(), input("stream:ok"), &sink{})
			close(gcDone)
			cancel(errors.New("client gone"))
		}()
	}}
	_, err := p.Complete(ctx, input("loop"), s)
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("err = %v, want CANCELLED", err)
	}
	<-gcDone
	if otherErr != nil {
		t.Errorf("concurrent call during the loop: %v", otherErr)
	}
	var pe *protocol.Error
	if errors.As(err, &pe); pe == nil || pe.Err == nil || pe.Err.Error() != "client gone" {
		t.Errorf("cause = %v, want the context's cause", pe)
	}
}

// TestLoopWatchdog: a guest computing past its limit without a host call is
// stopped; a guest sleeping or waiting in the host is not.
func TestLoopWatchdog(t *testing.T) {
	e := loadProvider(t, Options{ComputeLimit: 50 * time.Millisecond})
	p := newProvider(t, e, InstanceConfig{})
	_, err := p.Complete(t.Context(), input("loop"), &sink{})
	if protocol.CodeOf(err) != protocol.CodeProviderFailed || !errors.Is(err, errWatchdog) {
		t.Fatalf("err = %v, want PROVIDER_FAILED from the watchdog", err)
	}
	if !strings.Contains(e.logs.String(), "compute watchdog") {
		t.Error("watchdog stop not logged")
	}
	// Sleeping four times the limit does not trip it.
	ctx, cancel := context.WithCancel(t.Context())
	s := &sink{onProgress: func() { time.AfterFunc(200*time.Millisecond, cancel) }}
	_, err = p.Complete(ctx, input("sleep"), s)
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("sleep: err = %v, want CANCELLED", err)
	}
}

func TestEmitAfterCancel(t *testing.T) {
	e := loadProvider(t, Options{ComputeLimit: time.Hour})
	p := newProvider(t, e, InstanceConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	cancelled := false
	var late []string
	s := &lateSink{onText: func(d string) {
		mu.Lock()
		defer mu.Unlock()
		if cancelled {
			late = append(late, d)
		}
	}, onProgress: func() {
		mu.Lock()
		cancelled = true
		mu.Unlock()
		cancel()
	}}
	_, err := p.Complete(ctx, input("emit-after-cancel"), s)
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("err = %v", err)
	}
	if len(late) > 0 {
		t.Errorf("sink received %d deltas after cancellation", len(late))
	}
}

type lateSink struct {
	onText     func(string)
	onProgress func()
}

func (s *lateSink) Text(d string)   { s.onText(d) }
func (s *lateSink) Progress()       { s.onProgress() }
func (s *lateSink) Usage(abi.Usage) {}

// TestCooperativeCancel: a guest polling cancelled() returns status 2.
func TestCooperativeCancel(t *testing.T) {
	e := loadProvider(t, Options{})
	p := newProvider(t, e, InstanceConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	_, err := p.Complete(ctx, input("wait-cancel"), &sink{onProgress: cancel})
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("err = %v", err)
	}
	// Already-cancelled context: no guest code runs.
	_, err = p.Complete(ctx, input("stream:x"), &sink{})
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("err = %v", err)
	}
}

func TestInstanceConfig(t *testing.T) {
	e := loadProvider(t, Options{})
	for _, tc := range []struct {
		name string
		ic   InstanceConfig
	}{
		{"unknown setting", InstanceConfig{Settings: json.RawMessage(`{"bogus":1}`)}},
		{"not an object", InstanceConfig{Settings: json.RawMessage(`[1]`)}},
		{"undeclared slot", InstanceConfig{Secrets: map[string]func(context.Context) (string, error){"other": nil}}},
		{"http endpoint", InstanceConfig{Settings: json.RawMessage(`{"endpoint":"http://example.com"}`)}},
		{"endpoint with query", InstanceConfig{Settings: json.RawMessage(`{"endpoint":"https://example.com/v1?key=x"}`)}},
		{"endpoint with user", InstanceConfig{Settings: json.RawMessage(`{"endpoint":"https://u:p@example.com"}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.x.Provider(tc.ic); !errors.Is(err, ErrInstanceConfig) {
				t.Errorf("Provider = %v, want ErrInstanceConfig", err)
			}
		})
	}
	if _, err := e.x.ToolSet(InstanceConfig{}); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("ToolSet on a provider: %v", err)
	}
	if _, err := e.x.Provider(InstanceConfig{Settings: json.RawMessage(`{"endpoint":"http://127.0.0.1:9/v1/"}`)}); err != nil {
		t.Errorf("loopback http endpoint refused: %v", err)
	}
}

func TestToolSet(t *testing.T) {
	e := loadGuest(t, "tool", "tooltest", "0.2.0", Options{})
	if _, err := e.x.Provider(InstanceConfig{}); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("Provider on a tool extension: %v", err)
	}
	ts, err := e.x.ToolSet(InstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := ts.Tools(t.Context())
	if err != nil || len(defs) != 1 || defs[0].Name != "lookup" {
		t.Fatalf("Tools = %+v, %v", defs, err)
	}
	progress := 0
	out, err := ts.Invoke(t.Context(), abi.ToolCall{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"value":7}`)}, func() { progress++ })
	if err != nil || string(out) != `{"receipt":7}` || progress != 1 {
		t.Errorf("Invoke = %s, %v, progress %d", out, err, progress)
	}
	_, err = ts.Invoke(t.Context(), abi.ToolCall{ID: "c2", Name: "lookup", Arguments: json.RawMessage(`{"value":-1}`)}, nil)
	if protocol.CodeOf(err) != protocol.CodeToolFailed {
		t.Errorf("failing tool: %v", err)
	}
}

func TestClose(t *testing.T) {
	x, err := Load(t.Context(), pinOf(t, "tool", "tooltest", "0.2.0"), Options{Cache: sharedCache})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := x.ToolSet(InstanceConfig{})
	if err := x.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Tools(t.Context()); protocol.CodeOf(err) != protocol.CodeProviderExtensionUnavail {
		t.Errorf("after Close: %v", err)
	}
	if err := x.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
