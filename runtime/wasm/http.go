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
// credentials it injects, and its own HTTP client (connections are never
// shared across bindings, so a connection dialed under one binding's
// private-address exemption cannot serve another).
type netPolicy struct {
	x        *Extension
	allowed  map[string]bool // canonical origins of the manifest
	endpoint string          // canonical operator-configured origin, or ""
	epAddr   string          // its host:port, for the dial-time check
	secrets  map[string]func(context.Context) (string, error)
	client   *http.Client
}

func newNetPolicy(x *Extension, endpoint *url.URL, secrets map[string]func(context.Context) (string, error)) (*netPolicy, error) {
	np := &netPolicy{x: x, allowed: map[string]bool{}, secrets: secrets}
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
	x.netMu.Lock()
	x.nets = append(x.nets, np)
	x.netMu.Unlock()
	return np, nil
}

func (np *netPolicy) close() {
	np.client.CloseIdleConnections()
}

// dial resolves the host itself and connects only to public addresses,
// unless addr is exactly the operator-configured endpoint. Checking the
// address actually dialed defeats DNS rebinding.
func (np *netPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowPrivate := np.epAddr != "" && strings.EqualFold(addr, np.epAddr)
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
	head   []byte // HTTPResponse JSON, built on first use
	read   int64  // raw body bytes read
	events *sse.Reader
	frame  []byte // next event frame not yet consumed (n > cap)
	has    bool
	buf    []byte
}

func (h *httpHandle) close() {
	if h.resp != nil {
		h.resp.Body.Close()
	}
}

func (cs *callState) closeHandles() {
	for id, h := range cs.handles {
		h.close()
		delete(cs.handles, id)
	}
}

func (cs *callState) handle(id int32) *httpHandle {
	if cs.handles == nil {
		return nil
	}
	return cs.handles[id]
}

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
	defer cs.exitWait()
	stack[0] = errno(cs.httpStart(mod, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
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
	if len(cs.handles) >= abi.MaxHTTPHandles {
		return abi.ErrLimit
	}
	var req abi.HTTPRequest
	if err := decodeStrict(meta, &req); err != nil {
		return abi.ErrBadRequest
	}
	if !allowedMethods[req.Method] {
		return abi.ErrBadRequest
	}
	u, err := url.Parse(req.URL)
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
	hreq, err := http.NewRequestWithContext(cs.ctx, req.Method, u.String(), rd)
	if err != nil {
		return abi.ErrBadRequest
	}
	for k, v := range req.Headers {
		if !manifest.ValidHeaderName(k) || !validHeaderValue(v) {
			return abi.ErrBadRequest
		}
		if manifest.ReservedHeader(k) {
			continue // credentials and hop-by-hop headers are the host's
		}
		hreq.Header.Set(k, v)
	}
	for k, v := range cs.x.m.Network.Headers {
		hreq.Header.Set(k, v)
	}
	// Credentials go only to the manifest's origins and the operator's
	// endpoint: every request that got here is to one of them.
	for _, c := range cs.x.m.Credentials {
		get := np.secrets[c.Name]
		if get == nil {
			continue
		}
		secret, err := get(cs.ctx)
		if err != nil {
			if cs.ctx.Err() != nil {
				return abi.ErrCancelled
			}
			cs.x.log.Warn("extension credential unavailable", "slot", c.Name)
			return abi.ErrNetwork
		}
		if !validHeaderValue(secret) {
			cs.x.log.Warn("extension credential is not a valid header value", "slot", c.Name)
			return abi.ErrNetwork
		}
		hreq.Header.Set(c.Header, c.Prefix+secret)
	}
	resp, err := np.client.Do(hreq)
	if err != nil {
		return cs.netErrno(err)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		resp.Body.Close()
		return abi.ErrRedirect
	}
	if cs.handles == nil {
		cs.handles = map[int32]*httpHandle{}
	}
	cs.nextHandle++
	cs.handles[cs.nextHandle] = &httpHandle{resp: resp, stream: req.Stream}
	return abi.Errno(cs.nextHandle)
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
	if h.head == nil {
		r := abi.HTTPResponse{Status: h.resp.StatusCode, Headers: map[string]string{}}
		for k, v := range h.resp.Header {
			if len(v) > 0 {
				r.Headers[strings.ToLower(k)] = v[0]
			}
		}
		h.head, _ = json.Marshal(r)
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
	defer cs.exitWait()
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
	got, err := h.resp.Body.Read(h.buf[:n])
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
	n, err := l.h.resp.Body.Read(p)
	l.h.read += int64(n)
	if l.h.read > l.h.bodyLimit() {
		return n, errLimit
	}
	return n, err
}

func hostHTTPNextEvent(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	cs.enterWait()
	defer cs.exitWait()
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
			h.events = sse.NewReader(limitedBody{h}, sse.WithMaxEventBytes(sse.DefaultMaxEventBytes))
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
		h.has = true
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
	defer cs.exitWait()
	id := int32(uint32(stack[0]))
	if h := cs.handle(id); h != nil {
		h.close()
		delete(cs.handles, id)
	}
}

// ResolveEndpoint returns the operator-configured endpoint URL of an
// instance's settings (the manifest's network.endpointSetting key), or nil
// when the manifest has none or the settings do not set it. The URL must be
// https (http only for a loopback host) without user info, query or
// fragment (wire-extensions §10.2).
func ResolveEndpoint(m *manifest.Manifest, settings json.RawMessage) (*url.URL, error) {
	key := m.EndpointSetting()
	if key == "" || len(bytes.TrimSpace(settings)) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(settings, &obj); err != nil {
		return nil, fmt.Errorf("settings: not a JSON object")
	}
	raw, ok := obj[key]
	if !ok {
		return nil, nil
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
