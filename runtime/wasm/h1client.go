package wasm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h1Client is a binding's HTTP/1.1 client that runs a request entirely on
// the calling goroutine: the guest's call. net/http's Transport gives each
// connection a read loop and a write loop goroutine, so a request is handed
// to one, its response handed back from the other, and the end of the body
// signalled across again: about five goroutine wake-ups per request, on a
// host whose guest calls already run on one goroutine that host functions
// unpin while they wait (RATIONALE.md). Here http_start writes the request
// and reads the response head, and http_read reads the body, each with
// plain blocking calls on the connection.
//
// Nothing of HTTP is parsed here: requests are written by
// (*http.Request).Write and responses read by http.ReadResponse, the code
// the Transport uses for the same wire format. What this type adds is the
// connection's life: a pool of idle keep-alive connections per binding
// (connections are never shared across bindings, as the private-address
// exemption of one must not serve another), dialed through the binding's
// own dialer (the private-address rule), TLS with the binding's roots and
// ALPN "http/1.1" only, cancellation by the call's context, idle bounds,
// and a retry on a reused connection the server had closed.
type h1Client struct {
	np          *netPolicy
	tls         *tls.Config // template; each dial clones it with ServerName
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*h1conn // idle connections of every origin, oldest first
	armed  bool      // reaper is pending
	reaper *time.Timer
	closed bool

	dials atomic.Int64 // connections dialed, for tests
}

const (
	// h1MaxIdle bounds a binding's idle connections (net/http's
	// Transport had MaxIdleConns 64). Past it the oldest is closed.
	h1MaxIdle = 64
	// h1IdleTimeout closes a connection idle that long (the Transport's
	// IdleConnTimeout): servers drop idle connections after a while, and
	// an unused binding should not hold sockets.
	h1IdleTimeout = 90 * time.Second
	// h1MaxHeaderBytes bounds a response head, 1xx heads included (the
	// Transport's MaxResponseHeaderBytes). http.ReadResponse itself has
	// no bound.
	h1MaxHeaderBytes = 256 << 10
	// h1DrainBytes is how much of an unread body close still reads, from
	// what has already arrived only, to keep the connection.
	h1DrainBytes = 16 << 10
	// h1Max1xx bounds informational responses before the real one (the
	// Transport allows 5 too).
	h1Max1xx = 5
	// h1HandshakeTimeout bounds a TLS handshake (the Transport's
	// TLSHandshakeTimeout).
	h1HandshakeTimeout = 15 * time.Second
)

var (
	errHeaderTooLarge = errors.New("response head exceeds 256 KiB")
	errUpgrade        = errors.New("server switched protocols")
	errTooMany1xx     = errors.New("too many 1xx responses")
	errBodyClosed     = errors.New("body closed")
	errALPN           = errors.New("server negotiated a protocol other than http/1.1")
)

// aLongTimeAgo is a deadline in the past: setting it makes a blocked read
// or write on a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

func newH1Client(np *netPolicy, roots *x509.CertPool) *h1Client {
	return &h1Client{
		np: np,
		tls: &tls.Config{
			MinVersion: tls.VersionTLS12,
			RootCAs:    roots,
			NextProtos: []string{"http/1.1"},
		},
		maxIdle:     h1MaxIdle,
		idleTimeout: h1IdleTimeout,
	}
}

// h1conn is one connection. It is used by one request at a time, on that
// request's goroutine, and otherwise sits in the idle pool; only the
// cancellation callback (abort) touches it from elsewhere, and a
// connection whose callback may have run is never reused.
type h1conn struct {
	cl     *h1Client
	origin string   // canonical origin: the pool key
	raw    net.Conn // the TCP connection, for the idle probe
	conn   net.Conn // raw, or the TLS connection over it
	br     *bufio.Reader
	bw     *bufio.Writer

	// limit is what reads may still return before errHeaderTooLarge:
	// h1MaxHeaderBytes while a head is read, unlimited for the body.
	limit int64
	// nread and nwritten count the bytes of the current request, and
	// wrote says it was written and flushed whole; they decide a retry.
	nread, nwritten int64
	wrote           bool
	reused          bool
	stop            func() bool // unregisters abort from the call's context
	idleSince       time.Time
}

// Read reads from the connection for br, counting and bounding the bytes.
func (c *h1conn) Read(p []byte) (int, error) {
	if c.limit <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.conn.Read(p)
	c.nread += int64(n)
	c.limit -= int64(n)
	return n, err
}

// Write writes to the connection for bw, counting the bytes.
func (c *h1conn) Write(p []byte) (int, error) {
	n, err := c.conn.Write(p)
	c.nwritten += int64(n)
	return n, err
}

// abort makes a blocked read or write return: the call's context is done.
// It runs on the context's goroutine; the connection is then dropped.
func (c *h1conn) abort() { c.conn.SetDeadline(aLongTimeAgo) }

func (c *h1conn) close() { c.conn.Close() }

// roundTrip sends req to origin on an idle connection or a new one. A
// request on a reused connection that fails before any byte of a response
// arrived is sent once more on a fresh connection when net/http's
// Transport would do the same (shouldRetryRequest): when nothing of it was
// written, or when it is replayable (GET, HEAD, OPTIONS, TRACE, or an
// Idempotency-Key header; its body is the guest's bytes, so it can be
// sent again). The server may have closed the idle connection just as it
// was taken; a POST that may have reached the server is not sent twice.
func (cl *h1Client) roundTrip(ctx context.Context, req *http.Request, origin string) (*http.Response, error) {
	for retried := false; ; retried = true {
		c, err := cl.conn(ctx, origin)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req)
		if err == nil {
			return resp, nil
		}
		c.close()
		if retried || !c.reused || ctx.Err() != nil || !c.retryable(req) {
			return nil, err
		}
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		} else if req.Body != nil && req.Body != http.NoBody {
			return nil, err
		}
	}
}

// retryable reports whether a failed request on a reused connection may
// be sent again (see roundTrip).
func (c *h1conn) retryable(req *http.Request) bool {
	if c.nwritten == 0 {
		return true
	}
	if !c.wrote || c.nread > 0 {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// roundTrip writes req and reads the response head. On success the
// response's body owns the connection until it reaches its end or is
// closed; on an error the caller closes the connection.
func (c *h1conn) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	c.nread, c.nwritten, c.wrote = 0, 0, false
	c.stop = context.AfterFunc(ctx, c.abort)
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	c.wrote = werr == nil
	// A server may answer and close before it read the whole request
	// (a 413, say): its answer is still the one to return, as the
	// Transport does. After a failed write the connection is not reused.
	c.limit = h1MaxHeaderBytes
	resp, err := c.readResponse(req)
	if err != nil {
		c.stop()
		if werr != nil {
			return nil, werr
		}
		return nil, err
	}
	c.limit = math.MaxInt64
	resp.Body = &h1body{c: c, body: resp.Body, keep: c.wrote && !resp.Close && !req.Close}
	return resp, nil
}

func (c *h1conn) readResponse(req *http.Request) (*http.Response, error) {
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUpgrade // never asked for: Upgrade is the host's header
		case resp.StatusCode < 200:
			if n == h1Max1xx {
				return nil, errTooMany1xx
			}
			continue // 100 Continue, 103 Early Hints: no body, the answer follows
		}
		return resp, nil
	}
}

// h1body is a response body that gives its connection back to the pool
// when it reaches its end, or drops it.
type h1body struct {
	c    *h1conn // nil once the connection is given back or dropped
	body io.ReadCloser
	keep bool // the response allows another request on the connection
	err  error
}

func (b *h1body) Read(p []byte) (int, error) {
	if b.c == nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if err != nil {
		b.err = err
		b.release(err == io.EOF, false)
	}
	return n, err
}

// Close ends the body early. Whatever of it has already arrived (up to
// h1DrainBytes) is read, so that a guest that stops at the last byte
// without reading the end keeps the connection; more than that, or a body
// still on its way, drops it.
func (b *h1body) Close() error {
	if b.c != nil {
		b.err = errBodyClosed
		b.release(false, true)
	}
	return nil
}

// release ends the request on the connection: back to the pool when the
// body ended (or, early, could be drained) on a keep-alive response and
// the context's callback did not run, closed otherwise. The *http.body
// itself is not closed: its Close would read the rest of the body,
// blocking.
func (b *h1body) release(eof, early bool) {
	c := b.c
	b.c = nil
	stopped := c.stop()
	c.stop = nil
	if stopped && b.keep && early {
		eof = b.drain(c)
	}
	if stopped && b.keep && eof {
		c.cl.put(c)
		return
	}
	c.close()
}

// drain reads the rest of the body from what is buffered, with a read
// deadline in the past so that nothing waits for the network.
func (b *h1body) drain(c *h1conn) bool {
	if c.conn.SetReadDeadline(aLongTimeAgo) != nil {
		return false
	}
	n, err := io.Copy(io.Discard, io.LimitReader(b.body, h1DrainBytes+1))
	if err != nil || n > h1DrainBytes {
		return false
	}
	return c.conn.SetReadDeadline(time.Time{}) == nil
}

// conn returns an idle connection to origin that still looks open, or
// dials one.
func (cl *h1Client) conn(ctx context.Context, origin string) (*h1conn, error) {
	for {
		c := cl.take(origin)
		if c == nil {
			break
		}
		if !peerClosed(c.raw) {
			c.reused = true
			return c, nil
		}
		c.close()
	}
	return cl.dial(ctx, origin)
}

// take removes and returns the most recently idle connection to origin.
// Taking the newest keeps few connections warm; the reaper closes the
// ones left over after a burst.
func (cl *h1Client) take(origin string) *h1conn {
	cl.mu.Lock()
	for i := len(cl.idle) - 1; i >= 0; i-- {
		if c := cl.idle[i]; c.origin == origin {
			cl.idle = slices.Delete(cl.idle, i, i+1)
			cl.mu.Unlock()
			if time.Since(c.idleSince) > cl.idleTimeout {
				// Expired and the reaper is late (it runs as a timer,
				// which a stopped-world or loaded host delays): the
				// older ones of this origin are expired too.
				c.close()
				return cl.take(origin)
			}
			return c
		}
	}
	cl.mu.Unlock()
	return nil
}

// put makes c idle. A connection with bytes already buffered past the
// response is out of step with the server and is closed instead.
func (cl *h1Client) put(c *h1conn) {
	if c.br.Buffered() > 0 {
		c.close()
		return
	}
	now := time.Now()
	var evicted *h1conn
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		c.close()
		return
	}
	if len(cl.idle) >= cl.maxIdle {
		evicted = cl.idle[0]
		cl.idle = slices.Delete(cl.idle, 0, 1)
	}
	c.idleSince = now
	cl.idle = append(cl.idle, c)
	if !cl.armed {
		cl.armed = true
		if cl.reaper == nil {
			cl.reaper = time.AfterFunc(cl.idleTimeout, cl.reap)
		} else {
			cl.reaper.Reset(cl.idleTimeout)
		}
	}
	cl.mu.Unlock()
	if evicted != nil {
		evicted.close()
	}
}

// reap closes the connections idle for idleTimeout and runs again when the
// oldest remaining one expires. It is a timer, not a goroutine: it runs
// only while connections are idle.
func (cl *h1Client) reap() {
	now := time.Now()
	cl.mu.Lock()
	cl.armed = false
	n := 0
	for n < len(cl.idle) && now.Sub(cl.idle[n].idleSince) >= cl.idleTimeout {
		n++
	}
	expired := slices.Clone(cl.idle[:n])
	cl.idle = slices.Delete(cl.idle, 0, n)
	if len(cl.idle) > 0 && !cl.closed {
		cl.armed = true
		cl.reaper.Reset(cl.idleTimeout - now.Sub(cl.idle[0].idleSince))
	}
	cl.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// close closes the idle connections; a connection in use is closed when
// its request ends.
func (cl *h1Client) close() {
	cl.mu.Lock()
	cl.closed = true
	idle := cl.idle
	cl.idle = nil
	if cl.reaper != nil {
		cl.reaper.Stop()
	}
	cl.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// idleCount returns the number of idle connections, for tests.
func (cl *h1Client) idleCount() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.idle)
}

// dial connects to origin ("https://host:port" or "http://host:port")
// through the binding's dialer, which enforces the private-address rule on
// the address dialed, and for https does the TLS handshake offering only
// http/1.1.
func (cl *h1Client) dial(ctx context.Context, origin string) (*h1conn, error) {
	https := strings.HasPrefix(origin, "https://")
	addr := origin[strings.Index(origin, "://")+3:]
	raw, err := cl.np.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cl.dials.Add(1)
	conn := raw
	if https {
		host, _, _ := net.SplitHostPort(addr)
		cfg := cl.tls.Clone()
		cfg.ServerName = host
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, h1HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err == nil {
			if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
				err = errALPN
			}
		}
		if err != nil {
			raw.Close()
			return nil, err
		}
		conn = tc
	}
	c := &h1conn{cl: cl, origin: origin, raw: raw, conn: conn}
	c.br = bufio.NewReaderSize(c, 4<<10)
	c.bw = bufio.NewWriterSize(c, 4<<10)
	return c, nil
}
