package host

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

func newClient(t testing.TB, env *testEnv) *client.Client {
	t.Helper()
	c, err := client.New(env.ts.URL, client.WithToken(testToken), client.WithHTTPClient(env.ts.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req(input string) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: testProvider, Model: testModel, Input: input}
}

func TestJSONRun(t *testing.T) {
	env := newEnv(t, envOptions{})
	res, err := newClient(t, env).Run(t.Context(), req("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello world" || res.Steps != 1 || res.FinishReason != "stop" || res.Provider != testProvider {
		t.Errorf("result = %+v", res)
	}
	// Failures surface as typed errors with the status of the code table.
	_, err = newClient(t, env).Run(t.Context(), req("fail"))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != protocol.CodeProviderFailed || ce.Status != 502 {
		t.Errorf("fail: %v", err)
	}
}

func TestStreamRun(t *testing.T) {
	env := newEnv(t, envOptions{})
	var types []string
	var text strings.Builder
	res, err := newClient(t, env).Stream(t.Context(), req("hi"), func(ev client.Event) error {
		types = append(types, ev.Type)
		text.WriteString(ev.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello world" || text.String() != "Hello world" {
		t.Errorf("text = %q, deltas %q", res.Text, text.String())
	}
	if types[0] != "run.started" || types[1] != "step.started" || types[len(types)-1] != "run.completed" {
		t.Errorf("types = %v", types)
	}
	// A failed run is a terminal event, not an HTTP error.
	_, err = newClient(t, env).Stream(t.Context(), req("fail"), nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != protocol.CodeProviderFailed || ce.Status != 0 {
		t.Errorf("fail: %v", err)
	}
}

// TestStreamFraming reads the raw response: status, headers and the exact
// frame layout of wire-core §5.6.
func TestStreamFraming(t *testing.T) {
	env := newEnv(t, envOptions{})
	r, _ := http.NewRequestWithContext(t.Context(), "POST", env.ts.URL+"/v1/runs", strings.NewReader(runBody("hi")))
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream;q=0.9")
	resp, err := env.ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	checkCommonHeaders(t, resp.Header, false)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	frames := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
	want := []string{"run.started", "step.started", "text.delta", "run.completed"}
	if len(frames) < len(want) {
		t.Fatalf("frames: %q", b)
	}
	for i, f := range frames {
		lines := strings.Split(f, "\n")
		if len(lines) != 3 || lines[0] != "id: "+itoa(i+1) || !strings.HasPrefix(lines[1], "event: ") || !strings.HasPrefix(lines[2], "data: {") {
			t.Fatalf("frame %d = %q", i, f)
		}
		typ := strings.TrimPrefix(lines[1], "event: ")
		if !strings.Contains(lines[2], `"type":"`+typ+`"`) {
			t.Errorf("frame %d: event %s does not match data %s", i, typ, lines[2])
		}
	}
	if last := frames[len(frames)-1]; !strings.Contains(last, "event: run.completed") {
		t.Errorf("last frame = %q", last)
	}
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func TestStreamManyDeltas(t *testing.T) {
	env := newEnv(t, envOptions{})
	var deltas, total int
	res, err := newClient(t, env).Stream(t.Context(), req("deltas:1000"), func(ev client.Event) error {
		if ev.Type == client.EventTextDelta {
			deltas++
			total += len(ev.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != 1000 || len(res.Text) != 1000 || deltas == 0 {
		t.Errorf("deltas %d, text bytes %d, result %d", deltas, total, len(res.Text))
	}
}

// TestDisconnectCancels: a client that goes away cancels its run, in SSE
// and in JSON mode, and the admission slot is free again at once.
func TestDisconnectCancels(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "sse", false: "json"}[stream], func(t *testing.T) {
			env := newEnv(t, envOptions{maxPerSubject: 1})
			c := newClient(t, env)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				var err error
				if stream {
					_, err = c.Stream(ctx, req(blockingInput), nil)
				} else {
					_, err = c.Run(ctx, req(blockingInput))
				}
				errc <- err
			}()
			<-env.provider.started
			if n := env.engine.Running(); n != 1 {
				t.Fatalf("running = %d", n)
			}
			// The only slot is taken: a second run of the subject is BUSY.
			_, err := c.Run(t.Context(), req("hi"))
			if client.CodeOf(err) != protocol.CodeBusy {
				t.Fatalf("second run: %v", err)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v", err)
			}
			waitFor(t, "the slot to free", func() bool { return env.engine.Running() == 0 })
			if env.provider.active.Load() != 0 {
				waitFor(t, "the provider to see the cancellation", func() bool { return env.provider.active.Load() == 0 })
			}
			if _, err := c.Run(t.Context(), req("hi")); err != nil {
				t.Errorf("run after disconnect: %v", err)
			}
		})
	}
}

// TestStreamWriteFailureAborts: a write error after the status aborts the
// handler (http.ErrAbortHandler) and cancels the run.
func TestStreamWriteFailureAborts(t *testing.T) {
	env := newEnv(t, envOptions{maxPerSubject: 1})
	rec := newRecorder()
	rec.failFrom = 1 // everything after the first frame fails
	r, _ := http.NewRequestWithContext(t.Context(), "POST", "/v1/runs", strings.NewReader(runBody(blockingInput)))
	r.RequestURI = "/v1/runs"
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "text/event-stream")
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		env.srv.ServeHTTP(rec, r)
	}()
	got := <-done
	if got != http.ErrAbortHandler {
		t.Fatalf("handler ended with %v, want ErrAbortHandler", got)
	}
	waitFor(t, "the run to end", func() bool { return env.engine.Running() == 0 })
}

// TestShutdownEndsStreams: Shutdown cancels a running stream, which still
// receives its terminal run.cancelled before the listener closes.
func TestShutdownEndsStreams(t *testing.T) {
	env := newEnv(t, envOptions{})
	s := NewServer(ServerOptions{
		Engine: env.engine,
		Tokens: []Token{{ID: "t1", Subject: "alice", Secret: testToken, Providers: []string{testProvider}}},
	})
	s.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), ln, nil) }()
	c, err := client.New("http://"+ln.Addr().String(), client.WithToken(testToken))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	var last string
	go func() {
		_, err := c.Stream(t.Context(), req(blockingInput), func(ev client.Event) error {
			last = ev.Type
			return nil
		})
		errc <- err
	}()
	<-env.provider.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	err = <-errc
	if client.CodeOf(err) != protocol.CodeCancelled || last != client.EventRunCancelled {
		t.Errorf("stream ended with %v after %s", err, last)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("listener still open after Shutdown")
	}
}

// TestServeContextCancel: cancelling Serve's context shuts down gracefully.
func TestServeContextCancel(t *testing.T) {
	env := newEnv(t, envOptions{})
	s := NewServer(ServerOptions{Engine: env.engine})
	s.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, nil) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	conn.Close()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestWriteDeadlineNotLeaked: the stuck-writer deadline armed when a run
// ends is cleared before the handler returns, so it cannot cut off the next
// response on a kept-alive connection.
func TestWriteDeadlineNotLeaked(t *testing.T) {
	env := newEnv(t, envOptions{})
	for range 20 {
		rec := newRecorder()
		r, _ := http.NewRequestWithContext(t.Context(), "POST", "/v1/runs", strings.NewReader(runBody("deltas:50")))
		r.RequestURI = "/v1/runs"
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "text/event-stream")
		env.srv.ServeHTTP(rec, r)
		if !strings.Contains(rec.String(), "event: run.completed") {
			t.Fatalf("stream: %q", rec.String())
		}
		if d := rec.writeDeadlines(); len(d) > 0 && !d[len(d)-1].IsZero() {
			t.Fatalf("write deadline left armed: %v", d)
		}
	}
}
