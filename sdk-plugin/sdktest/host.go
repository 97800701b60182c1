package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/abi/sse"
	sdk "adhost/sdk-plugin"
)

// Options configure a fake Host. The zero value is usable.
type Options struct {
	// Config is the instance's settings JSON object; nil means "{}".
	Config []byte
	// Context bounds the call: when it is done the call is cancelled, as
	// the host cancels a run. Nil means t.Context().
	Context context.Context
	// HTTPClient performs the plugin's requests (tests point them at
	// httptest servers on loopback; pass srv.Client() for TLS servers). Nil
	// means a plain client with its own transport that reaches loopback
	// hosts only (anything else fails as abi.ErrNetwork). Redirects are
	// never followed whatever the client says: a 3xx answer is
	// abi.ErrRedirect, as in the host.
	HTTPClient *http.Client
	// Origins, when not empty, are the only origins (scheme://host[:port])
	// a request may reach; others fail with abi.ErrDenied, as the manifest's
	// [network] origins do in the host.
	Origins []string
	// Headers are set on every request after the guest's credential headers
	// were dropped, the way the host injects credentials and the manifest's
	// static headers.
	Headers map[string]string
	// MaxEventBytes bounds one upstream SSE event (default
	// sse.DefaultMaxEventBytes).
	MaxEventBytes int
	// LogLevel is the lowest level Log keeps (default abi.LogDebug: all).
	LogLevel abi.LogLevel
	// OnEmit runs after each emitted item is recorded, on the plugin's
	// goroutine. Tests use it to act at a precise point, e.g. cancel on the
	// first progress: func(h *sdktest.Host, it sdktest.Item) { h.Cancel() }.
	OnEmit func(h *Host, it Item)
	// NoTextStreaming declares that the plugin's manifest has
	// textStreaming = false: emitting text is then an error, and the
	// streamed text is not compared with the result.
	NoTextStreaming bool
}

// Item is one streamed item.
type Item struct {
	Kind  abi.EmitKind
	Text  string     // EmitText
	Usage *abi.Usage // EmitUsage
	// Dropped marks an item emitted after cancellation: the host ignores
	// it.
	Dropped bool
}

// LogLine is one Log call that passed the level.
type LogLine struct {
	Level abi.LogLevel
	Msg   string
}

// Request is what the fake host sent upstream for one HTTPStart, after
// header filtering and injection.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	Stream bool
}

// Host is a fake of the host functions (sdk.Host) that runs plugin code
// natively and records what it does. It follows the host's rules: the ABI
// buffer rule, cancellation, dropping items emitted after cancellation, no
// redirects, credential headers stripped, and the size and handle limits of
// package abi. Methods are safe to call from another goroutine than the
// plugin's (Cancel typically is).
type Host struct {
	t      testing.TB
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	client *http.Client

	mu        sync.Mutex
	input     []byte
	output    []byte
	items     []Item
	logs      []LogLine
	requests  []Request
	handles   map[int32]*handle
	next      int32
	cancelled bool
}

type handle struct {
	ctx     context.Context
	cancel  context.CancelFunc
	resp    *http.Response
	head    []byte
	stream  bool
	read    int64 // raw body bytes read
	events  *sse.Reader
	pending []byte // a frame that did not fit the guest's buffer
	eof     bool
}

// NewHost returns a fake host for one call. Its context is cancelled at the
// end of the test.
func NewHost(t testing.TB, opts Options) *Host {
	t.Helper()
	parent := opts.Context
	if parent == nil {
		parent = t.Context()
	}
	ctx, cancel := context.WithCancel(parent)
	var c http.Client
	if opts.HTTPClient != nil {
		c = *opts.HTTPClient
	} else {
		// A transport of its own, closed with the host: no connection (and
		// no goroutine) outlives the test.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		c.Transport = tr
		t.Cleanup(tr.CloseIdleConnections)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h := &Host{t: t, opts: opts, ctx: ctx, cancel: cancel, client: &c, handles: map[int32]*handle{}}
	t.Cleanup(h.Close)
	return h
}

// Call returns an sdk.Call backed by h, for testing helpers that take one.
func (h *Host) Call() *sdk.Call { return sdk.NewCall(h) }

// SetInput sets the JSON the next op reads with Input.
func (h *Host) SetInput(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.input = b
}

// Cancel cancels the call: Cancelled reports true, in-flight requests are
// aborted and later emits are dropped.
func (h *Host) Cancel() {
	h.mu.Lock()
	h.cancelled = true
	h.mu.Unlock()
	h.cancel()
}

// Close aborts requests still open, as the host does when a call returns.
func (h *Host) Close() {
	h.mu.Lock()
	hs := h.handles
	h.handles = map[int32]*handle{}
	h.mu.Unlock()
	for _, x := range hs {
		x.close()
	}
	h.cancel()
}

// Reset forgets the recorded input, output, items, logs and requests, so
// benchmarks can run many operations on one host. It does not undo Cancel.
func (h *Host) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.input, h.output, h.items, h.logs, h.requests = nil, nil, h.items[:0], nil, nil
}

// Items returns the streamed items so far.
func (h *Host) Items() []Item {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Item(nil), h.items...)
}

// Text returns the concatenated text deltas the host accepted.
func (h *Host) Text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, it := range h.items {
		if it.Kind == abi.EmitText && !it.Dropped {
			b.WriteString(it.Text)
		}
	}
	return b.String()
}

// RawOutput returns the last Output payload.
func (h *Host) RawOutput() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.output
}

// Logs returns the kept log lines.
func (h *Host) Logs() []LogLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]LogLine(nil), h.logs...)
}

// Requests returns the requests sent upstream.
func (h *Host) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

// OpenHandles returns the number of requests not yet closed.
func (h *Host) OpenHandles() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.handles)
}

func (h *Host) isCancelled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelled || h.ctx.Err() != nil
}

// copyIn applies the ABI buffer rule.
func copyIn(buf, data []byte) int32 {
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

// Input implements sdk.Host: the input set by SetInput, with the buffer rule.
func (h *Host) Input(buf []byte) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return copyIn(buf, h.input)
}

// Output implements sdk.Host; like the host, an output past
// abi.MaxOutputBytes is a failure (the host traps the call).
func (h *Host) Output(p []byte) {
	if len(p) > abi.MaxOutputBytes {
		h.t.Errorf("sdktest: output of %d bytes exceeds abi.MaxOutputBytes (the host traps the call)", len(p))
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.output = bytes.Clone(p)
}

// Config implements sdk.Host: Options.Config, with the buffer rule.
func (h *Host) Config(buf []byte) int32 {
	cfg := h.opts.Config
	if cfg == nil {
		cfg = []byte("{}")
	}
	return copyIn(buf, cfg)
}

// Emit implements sdk.Host: it records the item (marked Dropped after
// cancellation, as the host ignores it), checks usage JSON strictly, runs
// Options.OnEmit and reports cancellation.
func (h *Host) Emit(kind abi.EmitKind, p []byte) bool {
	if len(p) > abi.MaxEmitBytes {
		h.t.Errorf("sdktest: emit of %d bytes exceeds abi.MaxEmitBytes", len(p))
	}
	it := Item{Kind: kind}
	switch kind {
	case abi.EmitText:
		if h.opts.NoTextStreaming {
			h.t.Errorf("sdktest: text emitted by a plugin without textStreaming")
		}
		if len(p) == 0 {
			return h.isCancelled() // ignored by the host
		}
		it.Text = string(p)
	case abi.EmitProgress, abi.EmitToolCallDelta:
	case abi.EmitUsage:
		var u abi.Usage
		if err := decodeStrict(p, &u); err != nil {
			h.t.Errorf("sdktest: emitted usage %s: %v", p, err)
		}
		it.Usage = &u
	default:
		h.t.Errorf("sdktest: emit of unknown kind %d", kind)
	}
	h.mu.Lock()
	it.Dropped = h.cancelled || h.ctx.Err() != nil
	h.items = append(h.items, it)
	h.mu.Unlock()
	if h.opts.OnEmit != nil {
		h.opts.OnEmit(h, it)
	}
	return h.isCancelled()
}

// Cancelled implements sdk.Host.
func (h *Host) Cancelled() bool { return h.isCancelled() }

// Log implements sdk.Host: lines at or above Options.LogLevel are kept.
func (h *Host) Log(level abi.LogLevel, msg []byte) {
	if !h.LogEnabled(level) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, LogLine{Level: level, Msg: string(msg)})
}

// LogEnabled implements sdk.Host.
func (h *Host) LogEnabled(level abi.LogLevel) bool {
	return level >= max(h.opts.LogLevel, abi.LogDebug) && level <= abi.LogError
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// droppedHeader reports request headers the host never takes from a guest:
// credentials (the host injects its own) and hop-by-hop headers.
func droppedHeader(name string) bool {
	switch n := strings.ToLower(name); n {
	case "authorization", "x-api-key", "x-goog-api-key", "cookie", "host", "content-length",
		"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade":
		return true
	default:
		return strings.HasPrefix(n, "proxy-")
	}
}

// HTTPStart implements sdk.Host with the host's request rules: strict meta
// JSON, http(s) URLs without credentials, Options.Origins, loopback only
// (unless the test brought its own client), credential and hop-by-hop
// headers dropped and Options.Headers set, size and handle limits, no
// redirects.
func (h *Host) HTTPStart(meta, body []byte) int32 {
	var req abi.HTTPRequest
	if err := decodeStrict(meta, &req); err != nil || req.Method == "" {
		return int32(abi.ErrBadRequest)
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return int32(abi.ErrBadRequest)
	}
	if len(h.opts.Origins) > 0 {
		allowed := false
		for _, o := range h.opts.Origins {
			allowed = allowed || strings.EqualFold(o, u.Scheme+"://"+u.Host)
		}
		if !allowed {
			return int32(abi.ErrDenied)
		}
	}
	if h.opts.HTTPClient == nil && !loopback(u.Hostname()) {
		// Unit tests stay off the network: without a client of the test's
		// own, only loopback servers are reachable.
		h.t.Logf("sdktest: request to non-loopback host %q refused as a network error", u.Hostname())
		return int32(abi.ErrNetwork)
	}
	if len(body) > abi.MaxRequestBytes {
		return int32(abi.ErrLimit)
	}
	if h.isCancelled() {
		return int32(abi.ErrCancelled)
	}
	h.mu.Lock()
	if len(h.handles) >= abi.MaxHTTPHandles {
		h.mu.Unlock()
		return int32(abi.ErrLimit)
	}
	h.mu.Unlock()

	ctx, cancel := context.WithCancel(h.ctx)
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(bytes.Clone(body))) // as the wasm host: the guest may reuse body
	if err != nil {
		cancel()
		return int32(abi.ErrBadRequest)
	}
	for k, v := range req.Headers {
		if !droppedHeader(k) {
			hr.Header.Set(k, v)
		}
	}
	for k, v := range h.opts.Headers {
		hr.Header.Set(k, v)
	}
	h.mu.Lock()
	h.requests = append(h.requests, Request{Method: req.Method, URL: req.URL, Header: hr.Header.Clone(),
		Body: bytes.Clone(body), Stream: req.Stream})
	h.mu.Unlock()

	resp, err := h.client.Do(hr)
	if err != nil {
		cancel()
		if h.isCancelled() {
			return int32(abi.ErrCancelled)
		}
		return int32(abi.ErrNetwork)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "" {
		resp.Body.Close()
		cancel()
		return int32(abi.ErrRedirect)
	}
	head := abi.HTTPResponse{Status: resp.StatusCode, Headers: map[string]string{}}
	for k, v := range resp.Header {
		if len(v) > 0 {
			head.Headers[strings.ToLower(k)] = v[0]
		}
	}
	headJSON, _ := json.Marshal(head)
	x := &handle{ctx: ctx, cancel: cancel, resp: resp, head: headJSON, stream: req.Stream}
	if req.Stream {
		x.events = sse.NewReader(resp.Body, sse.WithMaxEventBytes(h.opts.MaxEventBytes))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.handles[h.next] = x
	return h.next
}

func (h *Host) handle(id int32) *handle {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handles[id]
}

// HTTPHead implements sdk.Host: status and lower-case first header values.
func (h *Host) HTTPHead(id int32, buf []byte) int32 {
	x := h.handle(id)
	if x == nil {
		return int32(abi.ErrBadHandle)
	}
	return copyIn(buf, x.head)
}

// HTTPRead implements sdk.Host, bounding a raw body by
// abi.MaxResponseBytes (abi.MaxStreamBytes for a streamed request).
func (h *Host) HTTPRead(id int32, buf []byte) int64 {
	x := h.handle(id)
	if x == nil {
		return int64(abi.ErrBadHandle)
	}
	if x.eof || len(buf) == 0 {
		return abi.PackEOF(0, x.eof)
	}
	n, err := x.resp.Body.Read(buf)
	x.read += int64(n)
	if !x.stream && x.read > abi.MaxResponseBytes {
		return int64(abi.ErrLimit)
	}
	if x.stream && x.read > abi.MaxStreamBytes {
		return int64(abi.ErrLimit)
	}
	if err == io.EOF {
		x.eof = true
	} else if err != nil {
		return int64(h.readErr(err))
	}
	return abi.PackEOF(uint32(n), x.eof)
}

func (h *Host) readErr(err error) abi.Errno {
	if h.isCancelled() {
		return abi.ErrCancelled
	}
	if errors.Is(err, sse.ErrTooLarge) {
		return abi.ErrLimit
	}
	return abi.ErrNetwork
}

// HTTPNextEvent implements sdk.Host: events framed by abi/sse, a frame that
// does not fit kept for the retry, cumulative data bounded by
// abi.MaxStreamBytes.
func (h *Host) HTTPNextEvent(id int32, buf []byte) int64 {
	x := h.handle(id)
	if x == nil {
		return int64(abi.ErrBadHandle)
	}
	if x.events == nil {
		return int64(abi.ErrBadRequest) // not a streamed request
	}
	if x.pending == nil {
		if x.eof {
			return abi.PackEOF(0, true)
		}
		ev, err := x.events.Next()
		if err == io.EOF {
			x.eof = true
			return abi.PackEOF(0, true)
		}
		if err != nil {
			return int64(h.readErr(err))
		}
		if x.events.DataBytes() > abi.MaxStreamBytes {
			return int64(abi.ErrLimit)
		}
		x.pending = abi.AppendEvent(nil, ev.Name, ev.Data)
	}
	n := len(x.pending)
	if n > len(buf) {
		return abi.PackEOF(uint32(n), false) // nothing consumed
	}
	copy(buf, x.pending)
	x.pending = nil
	return abi.PackEOF(uint32(n), false)
}

// HTTPClose implements sdk.Host; unknown handles are ignored.
func (h *Host) HTTPClose(id int32) {
	h.mu.Lock()
	x := h.handles[id]
	delete(h.handles, id)
	h.mu.Unlock()
	if x != nil {
		x.close()
	}
}

func (x *handle) close() {
	x.cancel()
	x.resp.Body.Close()
}

// decodeStrict decodes like the host: unknown fields are an error.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

var _ sdk.Host = (*Host)(nil)
