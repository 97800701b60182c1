package host

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testToken     = "test-token-0123456789abcdef0123456789abcdef"
	otherToken    = "other-token-0123456789abcdef0123456789abcdef"
	testOrigin    = "https://app.example"
	testProvider  = "fake"
	testModel     = "fake-model"
	secretMarker  = "host-secret-marker"
	blockingInput = "block"
)

// fakeProvider answers by input:
//
//	"block"      waits until the run is cancelled (started is signalled)
//	"deltas:N"   streams N one-character deltas
//	"fail"       PROVIDER_FAILED
//	"internal"   a private non-protocol error
//	anything     "Hello " + "world"
type fakeProvider struct {
	started chan struct{} // one send per blocking turn, if non-nil
	active  atomic.Int32
}

func (p *fakeProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	input := in.Messages[len(in.Messages)-1].Content
	switch {
	case input == blockingInput:
		p.active.Add(1)
		defer p.active.Add(-1)
		if p.started != nil {
			p.started <- struct{}{}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case strings.HasPrefix(input, "deltas:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(input, "deltas:"))
		var b strings.Builder
		for i := 0; i < n; i++ {
			sink.Text("x")
			b.WriteByte('x')
		}
		return &abi.CompleteOutput{Text: b.String()}, nil
	case input == "fail":
		return nil, protocol.New(protocol.CodeProviderFailed)
	case input == "internal":
		return nil, errorString(secretMarker)
	}
	sink.Text("Hello ")
	sink.Text("world")
	return &abi.CompleteOutput{Text: "Hello world"}, nil
}

func (p *fakeProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{testModel}, Complete: true}, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

type testEnv struct {
	srv      *Server
	ts       *httptest.Server
	engine   *runtime.Engine
	provider *fakeProvider
}

type envOptions struct {
	maxPerSubject int
	heartbeat     time.Duration
	discovery     Discovery
	logger        *slog.Logger
	benchTokens   int // adds tokens benchToken(i) with subjects bench-i
}

func benchToken(i int) string { return "bench-token-0123456789abcdef-" + strconv.Itoa(i) }

// newEnv starts a ready server with one fake provider instance behind an
// httptest server. Cleanup shuts everything down.
func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	fp := &fakeProvider{started: make(chan struct{}, 16)}
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: testProvider, Name: "Fake", Vendor: "test", AuthMode: "none",
			Models:       []string{testModel},
			Capabilities: map[string]bool{"tools": false, "textStreaming": true},
			UsageSource:  "synthetic",
			Provider:     fp,
		}, {
			ID: "hidden", Name: "Hidden", Vendor: "test", AuthMode: "api-key",
			Capabilities: map[string]bool{"tools": true, "textStreaming": false},
			Provider:     fp,
		}},
		MaxPerSubject: o.maxPerSubject,
		Logger:        o.logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := []Token{
		{ID: "t1", Subject: "alice", Secret: testToken, Providers: []string{testProvider}},
		{ID: "t2", Subject: "bob", Secret: otherToken},
	}
	for i := range o.benchTokens {
		tokens = append(tokens, Token{ID: "b" + strconv.Itoa(i), Subject: "bench-" + strconv.Itoa(i), Secret: benchToken(i), Providers: []string{testProvider}})
	}
	s := NewServer(ServerOptions{
		Engine:            eng,
		Discovery:         o.discovery,
		Tokens:            tokens,
		AllowedOrigins:    []string{testOrigin},
		HeartbeatInterval: o.heartbeat,
		Logger:            o.logger,
	})
	s.SetReady()
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = s.newHTTPServer()
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		ts.Close()
	})
	return &testEnv{srv: s, ts: ts, engine: eng, provider: fp}
}

// waitFor polls cond until it holds. It is not a timing assertion: the
// generous bound only turns a hang into a failure.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func runBody(input string) string {
	return `{"provider":"` + testProvider + `","model":"` + testModel + `","input":"` + input + `"}`
}

// checkCommonHeaders asserts the headers of wire-core §1.3.
func checkCommonHeaders(t testing.TB, h http.Header, tls bool) {
	t.Helper()
	for k, want := range map[string]string{
		"AgenticDriver-Version":  "1.0",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := h.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	hsts := h.Get("Strict-Transport-Security")
	if tls && hsts != "max-age=31536000" || !tls && hsts != "" {
		t.Errorf("Strict-Transport-Security = %q (tls %v)", hsts, tls)
	}
}

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recorder is a goroutine-safe http.ResponseWriter with FlushError, for
// driving the handler directly (synctest bubbles, failing writers).
type recorder struct {
	mu       sync.Mutex
	header   http.Header
	status   int
	body     bytes.Buffer
	flushes  int
	failFrom int // writes fail once the body holds this many bytes (0: never)
	// deadlines records SetWriteDeadline calls.
	deadlines []time.Time
}

func (r *recorder) SetWriteDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, t)
	return nil
}

func (r *recorder) writeDeadlines() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.deadlines...)
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.failFrom > 0 && r.body.Len() >= r.failFrom {
		return 0, errorString("write failed")
	}
	return r.body.Write(p)
}

func (r *recorder) FlushError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
	if r.failFrom > 0 && r.body.Len() >= r.failFrom {
		return errorString("flush failed")
	}
	return nil
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}
