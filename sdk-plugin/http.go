package sdk

import (
	"io"
	"sync/atomic"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// HTTP starts an outgoing request through the host and returns once the
// response headers arrived. The host enforces the manifest's origins, adds
// the configured credential and static headers, and never follows
// redirects; a refusal or failure is an *HTTPError (errors.Is(err,
// ErrCancelled) when the run was cancelled). A non-2xx status is not an
// error: check Response.Status (see ResponseError).
//
// Set req.Stream for a Server-Sent Events response read with NextEvent. The
// caller must Close the response; the SDK closes forgotten ones when the
// call returns. A request sent every turn is cheaper prepared once with
// NewRequest and sent with Send.
func (c *Call) HTTP(req *abi.HTTPRequest, body []byte) (*Response, error) {
	c.meta = appendHTTPRequest(c.meta[:0], req)
	return c.start(c.meta, body, false)
}

// Request is an HTTP request whose method, URL and headers stay the same
// from call to call (an adapter's endpoint under fixed settings). NewRequest
// encodes its http_start meta JSON once: encoding it per turn, a map walk
// and the quoting of each string, was a measurable share of a short turn's
// guest CPU. A Request is only read once made, so calls may share it.
type Request struct {
	meta []byte
}

// NewRequest prepares req for Send; later changes to req do not affect it.
func NewRequest(req *abi.HTTPRequest) *Request {
	return &Request{meta: appendHTTPRequest(nil, req)}
}

// Send is HTTP for a prepared request, with one difference: the response's
// Header map is nil, and Response.Get looks a header up in the host's
// answer when asked. A turn reads one or two headers, and decoding all of
// them into a map (its clearing, hashing and inserts) cost more guest CPU
// than the lookups.
func (c *Call) Send(req *Request, body []byte) (*Response, error) {
	return c.start(req.meta, body, true)
}

// start runs http_start with meta and reads the head. lazy keeps the head
// JSON for Response.Get instead of decoding the headers into a map.
func (c *Call) start(meta, body []byte, lazy bool) (*Response, error) {
	httpRead, httpClose = Host.HTTPRead, Host.HTTPClose
	h := c.h.HTTPStart(meta, body)
	if h < 0 {
		return nil, &HTTPError{Errno: abi.Errno(h)}
	}
	if h == 0 {
		return nil, &HTTPError{Errno: abi.ErrBadHandle}
	}
	r := &c.resp
	first := r.c == nil // the call's first response: its buffers are the Call's
	var buf []byte
	switch {
	case lazy && first:
		// Get reads it while the response is open: not the scratch buffer,
		// which EmitUsage reuses.
		buf = c.head[:cap(c.head)]
		if len(buf) == 0 {
			buf = make([]byte, 512)
		}
	case lazy:
		buf = make([]byte, 512)
	default:
		if c.scratch == nil {
			c.scratch = make([]byte, 1024)
		}
		buf = c.scratch[:cap(c.scratch)]
	}
	for {
		n := c.h.HTTPHead(h, buf)
		if n < 0 {
			c.h.HTTPClose(h)
			return nil, &HTTPError{Errno: abi.Errno(n)}
		}
		if int(n) <= len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, n)
	}
	if lazy {
		if first {
			c.head = buf[:0]
		}
		status, head, err := decodeHTTPStatus(buf)
		if err != nil {
			c.h.HTTPClose(h)
			return nil, &HTTPError{Errno: abi.ErrBadRequest}
		}
		if !first {
			r = new(Response)
		}
		*r = Response{Status: status, head: head, c: c, handle: h}
	} else {
		c.scratch = buf[:0]
		var header map[string]string
		if first && c.header != nil {
			header = c.header
			clear(header)
		} else {
			header = make(map[string]string)
		}
		status, err := decodeHTTPResponse(buf, header)
		if err != nil {
			c.h.HTTPClose(h)
			return nil, &HTTPError{Errno: abi.ErrBadRequest}
		}
		if first {
			c.header = header
		} else {
			r = new(Response)
		}
		*r = Response{Status: status, Header: header, c: c, handle: h}
	}
	if c.open == nil {
		c.open = c.openBuf[:0]
	}
	c.open = append(c.open, r)
	c.cleanup = (*Call).closeAll
	return r, nil
}

// eventBuf is the NextEvent buffer of the last closed response, for the
// next one: an instance reads one stream at a time, and a fresh 4 KiB
// buffer per turn cost an allocation and its clearing.
var eventBuf atomic.Pointer[[]byte]

// Response is an upstream response whose body is read through the host:
// raw with Read/ReadAll, or as Server-Sent Events framed by the host with
// NextEvent. Like the Call that started it, it is valid only during the
// operation (the next one may reuse its memory).
type Response struct {
	Status int
	// Header holds the first value of each header, names in lower case,
	// for a response of HTTP; it is nil for one of Send (use Get, which
	// serves both).
	Header map[string]string

	head   jsonscan.Value // Send: the head's validated headers object, for Get
	c      *Call
	handle int32
	eof    bool
	closed bool
	ev     []byte  // event buffer, reused across NextEvent calls
	evp    *[]byte // ev's holder, returned to eventBuf on Close
}

// Get returns the value of the header name, given in lower case ("" when
// the response has none). For a response of Send it searches the host's
// head and copies the value it finds; a value that is not a string (the
// host never writes one) reads as "".
func (r *Response) Get(name string) string {
	if r.Header != nil {
		return r.Header[name]
	}
	return lookupHeader(r.head, name)
}

// httpRead and httpClose are Host.HTTPRead and Host.HTTPClose, set by
// start: the only way to a Response. Read and Close match io.Reader and
// io.Closer, so the linker keeps them in every module that reads or
// closes through those interfaces anywhere (a JSON decoder, a library's
// file loader); calling the host through these variables keeps the
// http_* imports out of a module that never starts a request, which the
// host refuses without a [network] grant.
var (
	httpRead  func(Host, int32, []byte) int64
	httpClose func(Host, int32)
)

// maxEventFrame bounds the buffer NextEvent grows to; the host caps one
// response's event data at abi.MaxStreamBytes.
const maxEventFrame = abi.MaxStreamBytes + 64<<10

// Read reads raw body bytes (io.Reader). A non-streamed body larger than
// abi.MaxResponseBytes fails with an *HTTPError (abi.ErrLimit).
func (r *Response) Read(p []byte) (int, error) {
	if r.closed {
		return 0, &HTTPError{Errno: abi.ErrBadHandle}
	}
	if r.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	v := httpRead(r.c.h, r.handle, p)
	if v < 0 {
		return 0, &HTTPError{Errno: abi.Errno(v)}
	}
	n, eof := abi.UnpackEOF(v)
	if int(n) > len(p) {
		return 0, &HTTPError{Errno: abi.ErrBadRequest}
	}
	r.eof = eof
	if n == 0 && eof {
		return 0, io.EOF
	}
	return int(n), nil
}

// ReadAll reads the rest of the body. A body longer than limit bytes (at most
// abi.MaxResponseBytes, the host's own bound) is an *Error with code
// RESPONSE_TOO_LARGE, ready to return from Complete.
func (r *Response) ReadAll(limit int) ([]byte, error) {
	limit = min(max(limit, 0), abi.MaxResponseBytes)
	b := make([]byte, 0, min(limit+1, 4096))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, &Error{Code: CodeResponseTooLarge, Message: "upstream body exceeds the plugin's limit"}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// NextEvent returns the next Server-Sent Event of a streamed response, framed
// by the host (comments and data-less events are skipped; name is "message"
// when the event had none; data lines are joined by '\n'). It returns io.EOF
// when the stream ended; whether it ended cleanly is the adapter's judgement
// (vendors mark the end in-band). name and data alias a buffer that is
// reused: they are valid until the next NextEvent or Close.
func (r *Response) NextEvent() (name, data []byte, err error) {
	if r.closed {
		return nil, nil, &HTTPError{Errno: abi.ErrBadHandle}
	}
	if r.eof {
		return nil, nil, io.EOF
	}
	if r.ev == nil {
		r.evp = takeBuf(&eventBuf, 4096)
		r.ev = *r.evp
	}
	for {
		v := r.c.h.HTTPNextEvent(r.handle, r.ev)
		if v < 0 {
			return nil, nil, &HTTPError{Errno: abi.Errno(v)}
		}
		n, eof := abi.UnpackEOF(v)
		if int(n) > len(r.ev) {
			// Nothing was consumed: grow to the frame's size and ask again.
			if n > maxEventFrame {
				return nil, nil, &HTTPError{Errno: abi.ErrLimit}
			}
			r.ev = make([]byte, max(int(n), 2*len(r.ev)))
			continue
		}
		r.eof = eof
		if n == 0 && eof {
			return nil, nil, io.EOF
		}
		name, data = abi.SplitEvent(r.ev[:n])
		return name, data, nil
	}
}

// Close releases the request; it aborts the transfer if the body was not
// read to the end. Closing twice is a no-op.
func (r *Response) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	httpClose(r.c.h, r.handle)
	if r.evp != nil {
		// name and data of the last event are invalid from here on.
		keepBuf(&eventBuf, r.evp, r.ev)
		r.ev, r.evp = nil, nil
	}
	for i, o := range r.c.open {
		if o == r {
			r.c.open = append(r.c.open[:i], r.c.open[i+1:]...)
			break
		}
	}
	return nil
}
