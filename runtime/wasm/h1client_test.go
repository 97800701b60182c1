package wasm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// h1Policy is a binding of the provider test guest whose endpoint is
// rawURL, so that its loopback address may be dialed.
func h1Policy(t *testing.T, rawURL string) *netPolicy {
	t.Helper()
	e := loadProvider(t, Options{})
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	np, err := newNetPolicy(e.x, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return np
}

// rawServer accepts connections on loopback and hands each to serve.
func rawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func h1Get(t *testing.T, np *netPolicy, ctx context.Context, method, rawURL string, body string) (*http.Response, error) {
	t.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(rawURL)
	return np.h1.roundTrip(ctx, req, "http://"+u.Host)
}

func readAllClose(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return string(b)
}

// TestHTTPKeepAlive: a binding's requests reuse one connection, however
// the body ends (read to EOF, closed at its last byte, or closed with a
// small buffered rest), and two bindings never share one.
func TestHTTPKeepAlive(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), 1<<20))
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	a, b := h1Policy(t, srv.URL), h1Policy(t, srv.URL)
	for i := range 10 {
		for _, np := range []*netPolicy{a, b} {
			resp, err := h1Get(t, np, t.Context(), "GET", srv.URL+"/x", "")
			if err != nil {
				t.Fatal(err)
			}
			switch i % 3 {
			case 0:
				if got := readAllClose(t, resp); got != `{"ok":true}` {
					t.Fatalf("body %q", got)
				}
			case 1: // closed unread: the rest is drained from the buffer
				resp.Body.Close()
			case 2: // POST is fine on a connection known to be open
				resp.Body.Close()
				resp, err = h1Get(t, np, t.Context(), "POST", srv.URL+"/x", `{"a":1}`)
				if err != nil {
					t.Fatal(err)
				}
				readAllClose(t, resp)
			}
		}
	}
	if da, db := a.h1.dials.Load(), b.h1.dials.Load(); da != 1 || db != 1 {
		t.Errorf("dials = %d, %d, want 1 per binding", da, db)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("server saw %d connections, want 2", n)
	}
	// A large body closed early drops its connection.
	resp, err := h1Get(t, a, t.Context(), "GET", srv.URL+"/big", "")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := a.h1.idleCount(); n != 0 {
		t.Errorf("idle = %d after an early close of a large body, want 0", n)
	}
}

// TestHTTPServerClosedIdle: a connection the server closed while idle is
// noticed before it is used, and one it closes on the next request without
// answering is retried only for an idempotent request (as net/http's
// Transport does): a POST that may have been processed is not sent again.
func TestHTTPServerClosedIdle(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	closed := make(chan struct{}, 1)
	var requests atomic.Int32
	base := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			requests.Add(1)
			switch {
			case req.URL.Path == "/close-idle":
				io.WriteString(c, ok)
				c.Close()
				closed <- struct{}{}
				return
			case req.URL.Path == "/hangup" && i > 0:
				return // the second request on a connection: no answer
			}
			io.WriteString(c, ok)
		}
	})
	np := h1Policy(t, base)
	do := func(method, path string) error {
		resp, err := h1Get(t, np, t.Context(), method, base+path, "body")
		if err != nil {
			return err
		}
		if got := readAllClose(t, resp); got != "ok" {
			t.Fatalf("%s %s: body %q", method, path, got)
		}
		return nil
	}
	if err := do("GET", "/close-idle"); err != nil {
		t.Fatal(err)
	}
	<-closed
	if err := do("POST", "/x"); err != nil {
		t.Errorf("POST after the server closed the idle connection: %v", err)
	}
	if d := np.h1.dials.Load(); d != 2 {
		t.Errorf("dials = %d, want 2", d)
	}
	// /hangup answers the first request of a connection only.
	requests.Store(0)
	if err := do("GET", "/hangup"); err != nil { // reuses the POST's connection
		t.Errorf("GET on a connection the server hung up: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("server got %d requests, want 2 (the lost one and the retry)", n)
	}
	requests.Store(0)
	if err := do("POST", "/hangup"); err == nil {
		t.Error("POST on a connection the server hung up succeeded, want an error")
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server got the POST %d times, want 1", n)
	}
}

// TestHTTPCancelBody: cancelling the call aborts a body read that waits
// for the server, and the connection is not reused.
func TestHTTPCancelBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	base := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
		<-release
	})
	np := h1Policy(t, base)
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := h1Get(t, np, ctx, "GET", base+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	resp.Body.Close()
	if n := np.h1.idleCount(); n != 0 {
		t.Errorf("idle = %d, want 0", n)
	}
}

// TestHTTPResponseHeads: informational responses are skipped, an upgrade
// and an oversized head are refused, HTTP/1.0 and Connection: close end
// the connection, and a 204 keeps it.
func TestHTTPResponseHeads(t *testing.T) {
	big := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", h1MaxHeaderBytes) + "\r\nContent-Length: 0\r\n\r\n"
	for _, tc := range []struct {
		name, reply, want string
		idle              int
		fail              bool
	}{
		{name: "early hints", reply: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", want: "ok", idle: 1},
		{name: "too many 1xx", reply: strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", h1Max1xx+1) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", fail: true},
		{name: "upgrade", reply: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n", fail: true},
		{name: "head too large", reply: big, fail: true},
		{name: "chunked", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", want: "ok", idle: 1},
		{name: "connection close", reply: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", want: "ok"},
		{name: "http/1.0", reply: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", want: "ok"},
		{name: "until close", reply: "HTTP/1.1 200 OK\r\n\r\nok", want: "ok"},
		{name: "no content", reply: "HTTP/1.1 204 No Content\r\n\r\n", idle: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := rawServer(t, func(c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, tc.reply)
				if strings.Contains(tc.name, "close") {
					return
				}
				http.ReadRequest(br) // keep the connection open
			})
			np := h1Policy(t, base)
			resp, err := h1Get(t, np, t.Context(), "GET", base+"/", "")
			if tc.fail {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want an error", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readAllClose(t, resp); got != tc.want || resp.StatusCode/100 != 2 {
				t.Errorf("%d %q, want 2xx %q", resp.StatusCode, got, tc.want)
			}
			if n := np.h1.idleCount(); n != tc.idle {
				t.Errorf("idle = %d, want %d", n, tc.idle)
			}
		})
	}
}

// TestHTTPIdleReaper: idle connections are closed after the idle timeout
// without a request to notice.
func TestHTTPIdleReaper(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	np := h1Policy(t, srv.URL)
	np.h1.idleTimeout = 30 * time.Millisecond
	for range 2 {
		resp, err := h1Get(t, np, t.Context(), "GET", srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		readAllClose(t, resp)
		if n := np.h1.idleCount(); n != 1 {
			t.Fatalf("idle = %d, want 1", n)
		}
		deadline := time.Now().Add(10 * time.Second)
		for np.h1.idleCount() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := np.h1.idleCount(); n != 0 {
			t.Fatalf("idle = %d after the idle timeout, want 0", n)
		}
	}
	if d := np.h1.dials.Load(); d != 2 {
		t.Errorf("dials = %d, want 2", d)
	}
}

// scriptConn replays a server's bytes and discards what is written.
type scriptConn struct {
	r        *bytes.Reader
	deadline time.Time
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if !c.deadline.IsZero() && time.Now().After(c.deadline) {
		return 0, os.ErrDeadlineExceeded
	}
	return c.r.Read(p)
}
func (c *scriptConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *scriptConn) Close() error                       { return nil }
func (c *scriptConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(t time.Time) error      { c.deadline = t; return nil }
func (c *scriptConn) SetReadDeadline(t time.Time) error  { c.deadline = t; return nil }
func (c *scriptConn) SetWriteDeadline(t time.Time) error { return nil }

// FuzzH1Response: whatever a server sends, a request ends (no panic, no
// wait), the body never yields more than was sent, and a connection goes
// back to the pool only at a clean message boundary: nothing buffered past
// the response, the head limit lifted, the cancellation callback gone.
func FuzzH1Response(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nTrailer: x\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n1\r\na\r\n0\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	} {
		f.Add([]byte(s), false, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, head, early bool) {
		cl := &h1Client{maxIdle: 1, idleTimeout: time.Hour}
		defer cl.close()
		sc := &scriptConn{r: bytes.NewReader(data)}
		c := &h1conn{cl: cl, origin: "http://x:80", raw: sc, conn: sc}
		c.br = bufio.NewReaderSize(c, 4<<10)
		c.bw = bufio.NewWriterSize(c, 4<<10)
		method := "GET"
		if head {
			method = "HEAD"
		}
		req, _ := http.NewRequest(method, "http://x/", http.NoBody)
		resp, err := c.roundTrip(context.Background(), req)
		if err != nil {
			return
		}
		if early {
			resp.Body.Close()
		} else {
			b, _ := io.ReadAll(resp.Body)
			if len(b) > len(data) {
				t.Fatalf("body of %d bytes from %d sent", len(b), len(data))
			}
			resp.Body.Close()
		}
		if n, _ := resp.Body.Read(make([]byte, 1)); n != 0 {
			t.Fatal("read after close returned bytes")
		}
		if cl.idleCount() == 1 {
			if c.br.Buffered() != 0 || c.limit != math.MaxInt64 || c.stop != nil || !sc.deadline.IsZero() {
				t.Fatalf("pooled with %d bytes buffered, limit %d, deadline %v", c.br.Buffered(), c.limit, sc.deadline)
			}
		}
	})
}
