package wasm

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"

	"adhost/abi"
	"adhost/abi/sse"
	"adhost/runtime/manifest"
)

// maxMetaBytes bounds http_start's meta JSON.
const maxMetaBytes = 64 << 10

// errPrivateAddress is returned by the dialer when every address of a host
// is private, loopback, link-local or otherwise not public, and the
// operator did not configure exactly that origin.
var errPrivateAddress = errors.New("address not permitted")

// netPolicy is the network side of one binding (provider instance or tool
// set): which origins it may reach, which one the operator configured, the
// credentials it injects, and its own HTTP clients (connections are never
// shared across bindings, so a connection dialed under one binding's
// private-address exemption cannot serve another).
type netPolicy struct {
	x        *Extension
	allowed  map[string]bool // canonical origins of the manifest
	endpoint string          // canonical operator-configured origin, or ""
	epAddr   string          // its host:port, for the dial-time check
	// literal are the host:port of operator-allowlisted origins that name
	// an address (or loopback) literally: the dialer may reach them even
	// when they are not public (fetch.go).
	literal map[string]bool
	// h1 runs requests on the calling goroutine (h1client.go); client,
	// net/http's Transport, serves what h1 does not (roundTrip), and every
	// request when h1 is nil (tests and benchmarks compare the two).
	h1     *h1Client
	client *http.Client
	// static and creds are the manifest's static headers and credential
	// slots with canonical header names, computed once: canonicalising a
	// lower-case name allocates, on every request.
	static []headerField
	creds  []credHeader
	// red is the redactor of the values injected last (redactorFor).
	red atomic.Pointer[redactor]
}

// credHeader is a credential slot bound to its resolver.
type credHeader struct {
	slot, header, prefix string
	get                  func(context.Context) (string, error)
}

func newNetPolicy(x *Extension, endpoint *url.URL, secrets map[string]func(context.Context) (string, error)) (*netPolicy, error) {
	np := &netPolicy{x: x, allowed: map[string]bool{}}
	for _, o := range x.m.Origins() {
		np.allowed[o] = true
	}
	if endpoint != nil {
		o, err := manifest.OriginOf(endpoint)
		if err != nil {
			return nil, err
		}
		np.endpoint = o
		np.epAddr = strings.TrimPrefix(strings.TrimPrefix(o, "https://"), "http://")
	}
	for k, v := range x.m.Network.Headers {
		np.static = append(np.static, headerField{http.CanonicalHeaderKey(k), v})
	}
	for _, c := range x.m.Credentials {
		if get := secrets[c.Name]; get != nil {
			np.creds = append(np.creds, credHeader{c.Name, http.CanonicalHeaderKey(c.Header), c.Prefix, get})
		}
	}
	tr := &http.Transport{
		Proxy:                  nil, // never an environment proxy
		DialContext:            np.dial,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x.opts.RootCAs},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    15 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	np.client = &http.Client{
		Transport: tr,
		// Never follow a redirect: the 3xx response is returned and refused.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	np.h1 = newH1Client(np, x.opts.RootCAs)
	x.netMu.Lock()
	x.nets = append(x.nets, np)
	x.netMu.Unlock()
	return np, nil
}

func (np *netPolicy) close() {
	if np.h1 != nil {
		np.h1.close()
	}
	np.client.CloseIdleConnections()
}

// roundTrip sends req to origin (its canonical origin, already checked).
// The direct client takes every request but one to a host name that is
// not ASCII, which the Transport converts to punycode for the dial and the
// TLS name. A proxy would go to the Transport too; the host never uses one.
func (np *netPolicy) roundTrip(req *http.Request, origin string) (*http.Response, error) {
	if np.h1 != nil && isASCII(origin) {
		return np.h1.roundTrip(req.Context(), req, origin)
	}
	return np.client.Do(req)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// dial resolves the host itself and connects only to public addresses,
// unless addr is exactly the operator-configured endpoint. Checking the
// address actually dialed defeats DNS rebinding.
func (np *netPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowPrivate := (np.epAddr != "" && strings.EqualFold(addr, np.epAddr)) || np.literal[strings.ToLower(addr)]
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if np.x.opts.LookupHost != nil {
		addrs, err = np.x.opts.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		addrs = ips
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	var lastErr error = errPrivateAddress
	for _, a := range addrs {
		a = a.Unmap()
		if !allowPrivate && !publicAddr(a) {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fec0::/10"), // site-local
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// publicAddr reports whether a is a globally routable unicast address.
func publicAddr(a netip.Addr) bool {
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// httpHandle is one request started by the guest during a call.
type httpHandle struct {
	resp   *http.Response
	stream bool
	// scrub reads the body when the request carried a credential
	// (scrub.red != nil): it masks the injected values (redact.go).
	scrub  scrubReader
	head   []byte // HTTPResponse JSON, built on first use
	read   int64  // raw body bytes read
	events *sse.Reader
	frame  []byte // next event frame not yet consumed (n > cap)
	has    bool
	buf    []byte

	// spare is the event reader of an earlier request served by this
	// (pooled) handle, kept for the next stream.
	spare *sse.Reader
}

// handlePool recycles httpHandles with their buffers: a vendor turn opens
// at least one request, and a fresh event reader, frame and read buffer
// cost it about 5 KB of garbage. A handle is only reachable through its
// call's handle table, so once closed and removed from it nothing refers
// to it; nothing of a request survives close (the reader is reset, the
// buffers are emptied and are only ever copied out of).
var handlePool = sync.Pool{New: func() any { return new(httpHandle) }}

// maxPooledHandleBytes bounds the buffers a pooled handle keeps; a handle
// that served a large response or event gives its buffers to the garbage
// collector instead of pinning them in the pool.
const maxPooledHandleBytes = 64 << 10

func newHandle(resp *http.Response, stream bool, red *redactor) *httpHandle {
	h := handlePool.Get().(*httpHandle)
	h.resp, h.stream = resp, stream
	if red != nil {
		h.scrub.reset(resp.Body, red)
		red.scrubHeader(resp.Header)
	}
	return h
}

// readBody reads the response body, masked when the request carried a
// credential. Every guest-visible read of the body goes through it.
func (h *httpHandle) readBody(p []byte) (int, error) {
	if h.scrub.red != nil {
		return h.scrub.Read(p)
	}
	return h.resp.Body.Read(p)
}

// close ends the request and recycles the handle; the caller has removed
// it from the handle table.
func (h *httpHandle) close() {
	if h.resp != nil {
		h.resp.Body.Close()
	}
	spare := h.events
	if spare == nil {
		spare = h.spare
	}
	if spare != nil {
		spare.Reset(nil) // drop the reference to this request's body
		if spare.BufferCap() > maxPooledHandleBytes {
			spare = nil
		}
	}
	h.scrub.reset(nil, nil)
	*h = httpHandle{
		scrub: h.scrub,
		head:  keepSmall(h.head),
		frame: keepSmall(h.frame),
		buf:   keepSmall(h.buf),
		spare: spare,
	}
	handlePool.Put(h)
}

// keepSmall returns b emptied, or nil when it is too large to pool.
func keepSmall(b []byte) []byte {
	if cap(b) > maxPooledHandleBytes {
		return nil
	}
	return b[:0]
}

// handleTable holds a call's open requests: at most abi.MaxHTTPHandles,
// so a fixed array searched linearly, which spares the map (and its
// storage) a call would otherwise allocate for its one or two requests.
// Handle ids are not reused within a call.
type handleTable struct {
	open [abi.MaxHTTPHandles]openHandle
	n    int
	next int32 // the last id handed out
}

type openHandle struct {
	id int32
	h  *httpHandle
}

// add registers h and returns its id; the caller checked n < len(open).
func (t *handleTable) add(h *httpHandle) int32 {
	t.next++
	t.open[t.n] = openHandle{t.next, h}
	t.n++
	return t.next
}

func (t *handleTable) get(id int32) *httpHandle {
	for _, o := range t.open[:t.n] {
		if o.id == id {
			return o.h
		}
	}
	return nil
}

// remove forgets id and returns its handle, or nil.
func (t *handleTable) remove(id int32) *httpHandle {
	for i, o := range t.open[:t.n] {
		if o.id == id {
			t.n--
			t.open[i] = t.open[t.n]
			t.open[t.n] = openHandle{}
			return o.h
		}
	}
	return nil
}

func (cs *callState) closeHandles() {
	t := &cs.inst.handles
	for t.n > 0 {
		t.remove(t.open[t.n-1].id).close()
	}
}

func (cs *callState) handle(id int32) *httpHandle { return cs.inst.handles.get(id) }

var allowedMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodHead: true,
}

// netErrno maps a transport error to an Errno.
func (cs *callState) netErrno(err error) abi.Errno {
	switch {
	case cs.ctx.Err() != nil:
		return abi.ErrCancelled
	case errors.Is(err, errPrivateAddress):
		return abi.ErrDenied
	case errors.Is(err, errLimit):
		return abi.ErrLimit
	}
	return abi.ErrNetwork
}

var errLimit = errors.New("response size limit")

func hostHTTPStart(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enterWait()
	cs.netWaited = false
	stack[0] = errno(cs.httpStart(mod, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
	cs.exitWait(cs.netWaited) // a refusal before the network is no wait
}

// httpStart returns a handle (> 0) or a negative Errno.
func (cs *callState) httpStart(mod api.Module, metaPtr, metaLen, bodyPtr, bodyLen uint32) abi.Errno {
	if metaLen > maxMetaBytes {
		guestBytes(cs, mod, metaPtr, metaLen) // still trap on a bad pointer
		return abi.ErrBadRequest
	}
	if bodyLen > abi.MaxRequestBytes {
		guestBytes(cs, mod, bodyPtr, bodyLen)
		return abi.ErrLimit
	}
	meta := guestBytes(cs, mod, metaPtr, metaLen)
	body := bytes.Clone(guestBytes(cs, mod, bodyPtr, bodyLen))
	np := cs.net
	if np == nil {
		return abi.ErrDenied
	}
	if cs.cancelled() {
		return abi.ErrCancelled
	}
	if cs.inst.handles.n >= abi.MaxHTTPHandles {
		return abi.ErrLimit
	}
	req := &cs.inst.meta
	if err := decodeHTTPRequest(meta, req); err != nil {
		return abi.ErrBadRequest
	}
	if !allowedMethods[req.method] {
		return abi.ErrBadRequest
	}
	u, err := url.Parse(req.url)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return abi.ErrBadRequest
	}
	if u.User != nil {
		return abi.ErrBadRequest
	}
	u.Fragment, u.RawFragment = "", ""
	origin, err := manifest.OriginOf(u)
	if err != nil {
		return abi.ErrDenied
	}
	if !np.allowed[origin] && origin != np.endpoint {
		return abi.ErrDenied
	}
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(cs.ctx, req.method, u.String(), rd)
	if err != nil {
		return abi.ErrBadRequest
	}
	// One backing array holds every header's value (Header.Set allocates a
	// slice per header); each header gets a capacity-1 window of it.
	vals := make([]string, 0, len(req.headers)+len(np.static)+len(np.creds))
	set := func(name, v string) {
		vals = append(vals, v)
		hreq.Header[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for _, h := range req.headers {
		if !manifest.ValidHeaderName(h.name) || !validHeaderValue(h.value) {
			return abi.ErrBadRequest
		}
		if manifest.ReservedHeader(h.name) {
			continue // credentials and hop-by-hop headers are the host's
		}
		name := http.CanonicalHeaderKey(h.name)
		if len(np.creds) > 0 && unscrubbable[name] {
			continue
		}
		set(name, h.value)
	}
	for _, h := range np.static {
		set(h.name, h.value)
	}
	// Credentials go only to the manifest's origins and the operator's
	// endpoint: every request that got here is to one of them. The values
	// sent are masked in the response (redact.go).
	var injected [4]string
	secrets := injected[:0]
	for _, c := range np.creds {
		secret, err := c.get(cs.ctx)
		if err != nil {
			if cs.ctx.Err() != nil {
				return abi.ErrCancelled
			}
			cs.x.log.Warn("extension credential unavailable", "slot", c.slot)
			cs.noCredential = true
			return abi.ErrNetwork
		}
		if !validHeaderValue(secret) {
			cs.x.log.Warn("extension credential is not a valid header value", "slot", c.slot)
			return abi.ErrNetwork
		}
		set(c.header, c.prefix+secret)
		if secret != "" {
			secrets = append(secrets, secret)
		}
	}
	red := np.redactorFor(secrets)
	cs.secrets.add(red)
	cs.netWaited = true
	resp, err := np.roundTrip(hreq, origin)
	if err != nil {
		return cs.netErrno(err)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		resp.Body.Close()
		return abi.ErrRedirect
	}
	if red != nil && !scrubbableEncoding(resp.Header) {
		resp.Body.Close()
		cs.x.log.Warn("extension response refused: content encoding not decoded by the host")
		return abi.ErrNetwork
	}
	return abi.Errno(cs.inst.handles.add(newHandle(resp, req.stream, red)))
}

// unscrubbable are the guest headers a request that carries a credential
// goes without, because the response they ask for hides an echoed
// credential from the host's masking (redact.go): a compressed body the
// guest would inflate itself, or a range that cuts a value into pieces
// that are each no whole occurrence. The direct client asks for no
// encoding (a loopback or LAN vendor gains nothing from gzip, and a JSON
// turn is small); the Transport fallback asks for gzip and decodes it.
var unscrubbable = map[string]bool{"Accept-Encoding": true, "Range": true, "If-Range": true}

// scrubbableEncoding reports whether the body the client hands over is
// plain: the direct client asked for no encoding, and the Transport
// decodes the gzip it asked for itself and drops the header, so a
// Content-Encoding left is one the host cannot look into, and a request
// that carried a credential is refused its response.
func scrubbableEncoding(h http.Header) bool {
	ce := h["Content-Encoding"]
	return len(ce) == 0 || (len(ce) == 1 && (ce[0] == "" || strings.EqualFold(ce[0], "identity")))
}

func validHeaderValue(v string) bool {
	if len(v) > 16<<10 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func hostHTTPHead(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enter()
	defer cs.exit()
	h := cs.handle(int32(uint32(stack[0])))
	if h == nil {
		stack[0] = errno(abi.ErrBadHandle)
		return
	}
	if len(h.head) == 0 {
		h.head = appendHTTPHead(h.head[:0], h.resp.StatusCode, h.resp.Header)
	}
	stack[0] = copyOut(cs, mod, uint32(stack[1]), uint32(stack[2]), h.head)
}

func (h *httpHandle) bodyLimit() int64 {
	if h.stream {
		return 2 * abi.MaxStreamBytes // raw bytes incl. framing; data is bounded separately
	}
	return abi.MaxResponseBytes
}

func hostHTTPRead(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enterWait()
	got := 0
	defer func() { cs.exitWait(got > 0) }() // only new bytes were a wait
	h := cs.handle(int32(uint32(stack[0])))
	buf, capacity := uint32(stack[1]), uint32(stack[2])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity)
	}
	if h == nil {
		stack[0] = errno64(abi.ErrBadHandle)
		return
	}
	if h.events != nil {
		stack[0] = errno64(abi.ErrBadRequest) // already read as events
		return
	}
	if capacity == 0 {
		stack[0] = uint64(abi.PackEOF(0, false))
		return
	}
	n := min(int(capacity), 256<<10)
	if cap(h.buf) < n {
		h.buf = make([]byte, n)
	}
	var err error
	got, err = h.readBody(h.buf[:n])
	h.read += int64(got)
	if h.read > h.bodyLimit() {
		stack[0] = errno64(abi.ErrLimit)
		return
	}
	eof := false
	if err != nil {
		if err != io.EOF {
			stack[0] = errno64(cs.netErrno(err))
			return
		}
		eof = true
	}
	if got > 0 {
		mod.Memory().Write(buf, h.buf[:got])
	}
	stack[0] = uint64(abi.PackEOF(uint32(got), eof))
}

// limitedBody counts raw stream bytes for the event reader.
type limitedBody struct {
	h *httpHandle
}

func (l limitedBody) Read(p []byte) (int, error) {
	n, err := l.h.readBody(p)
	l.h.read += int64(n)
	if l.h.read > l.h.bodyLimit() {
		return n, errLimit
	}
	return n, err
}

func hostHTTPNextEvent(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enterWait()
	fresh := false
	defer func() { cs.exitWait(fresh) }() // only a newly read event was a wait
	h := cs.handle(int32(uint32(stack[0])))
	buf, capacity := uint32(stack[1]), uint32(stack[2])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity)
	}
	if h == nil {
		stack[0] = errno64(abi.ErrBadHandle)
		return
	}
	if !h.has {
		if h.events == nil {
			if h.read > 0 {
				stack[0] = errno64(abi.ErrBadRequest) // already read raw
				return
			}
			if h.spare != nil {
				h.events, h.spare = h.spare, nil
				h.events.Reset(limitedBody{h})
			} else {
				h.events = sse.NewReader(limitedBody{h}, sse.WithMaxEventBytes(sse.DefaultMaxEventBytes))
			}
		}
		ev, err := h.events.Next()
		switch {
		case err == io.EOF:
			stack[0] = uint64(abi.PackEOF(0, true))
			return
		case errors.Is(err, sse.ErrTooLarge):
			stack[0] = errno64(abi.ErrLimit)
			return
		case err != nil:
			stack[0] = errno64(cs.netErrno(err))
			return
		}
		if h.events.DataBytes() > abi.MaxStreamBytes {
			stack[0] = errno64(abi.ErrLimit)
			return
		}
		h.frame = abi.AppendEvent(h.frame[:0], ev.Name, ev.Data)
		h.has, fresh = true, true
	}
	if uint64(len(h.frame)) > uint64(capacity) {
		stack[0] = uint64(abi.PackEOF(uint32(len(h.frame)), false)) // nothing consumed
		return
	}
	if len(h.frame) > 0 {
		mod.Memory().Write(buf, h.frame)
	}
	h.has = false
	stack[0] = uint64(abi.PackEOF(uint32(len(h.frame)), false))
}

func hostHTTPClose(ctx context.Context, _ api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enterWait()
	defer cs.exitWait(false) // closing may block briefly, but is no wait on the upstream
	id := int32(uint32(stack[0]))
	if h := cs.inst.handles.remove(id); h != nil {
		h.close()
	}
}

// ResolveEndpoint returns the operator-configured endpoint URL of an
// instance's settings (the manifest's network.endpointSetting key), or nil
// when the manifest has none or the settings do not set it. The URL must be
// https (http only for a loopback host) without user info, query or
// fragment (wire-extensions §10.2).
func ResolveEndpoint(m *manifest.Manifest, settings json.RawMessage) (*url.URL, error) {
	key := m.EndpointSetting()
	raw, err := setting(settings, key)
	if raw == nil || err != nil {
		return nil, err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("settings.%s: not a string", key)
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("settings.%s: not an absolute URL", key)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return nil, fmt.Errorf("settings.%s: must not contain user info, query or fragment", key)
	}
	if _, err := manifest.OriginOf(u); err != nil {
		return nil, fmt.Errorf("settings.%s: %v", key, err)
	}
	return u, nil
}
