package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"adhost/runtime/protocol"
)

// Limits the client applies (wire-core §7.1, §8.1).
const (
	// MaxEventBytes bounds one SSE frame's lines.
	MaxEventBytes = 2_000_000
	// MaxResponseBytes bounds a non-streamed JSON response.
	MaxResponseBytes = 2_000_000
	// MaxErrorBodyBytes bounds how much of an error body is read.
	MaxErrorBodyBytes = 64_000
	// DiscoveryTimeout bounds Protocol and Providers.
	DiscoveryTimeout = 10 * time.Second
)

// Header names of the protocol (wire-core §1.3).
const (
	headerVersion        = "AgenticDriver-Version"
	headerOptionalEvents = "AgenticDriver-Accept-Optional-Events"
)

// errRedirect is returned from CheckRedirect: the redirect target is never
// contacted, so the bearer token cannot leak to it.
var errRedirect = errors.New("client: the host answered with a redirect, which is never followed")

// Client calls one AgenticDriver host. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/path], no trailing slash
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent on every call. Without one every call
// fails with AUTH_REQUIRED before contacting the host.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient uses hc's transport, jar and timeout. The client works on a
// copy whose CheckRedirect always refuses redirects.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			cp := *hc
			c.hc = &cp
		}
	}
}

// New returns a client for the host at baseURL (for example
// "http://127.0.0.1:7433"). It rejects, with INSECURE_TRANSPORT, schemes
// other than http and https, http:// to a non-loopback host, and base URLs
// with user-info, a query or a fragment (wire-core §1.4).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, &Error{Code: protocol.CodeInsecureTransport, Message: "the base URL does not parse", Err: err}
	}
	insecure := func(msg string) error {
		return newError(protocol.CodeInsecureTransport, msg)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, insecure("the base URL must use http or https")
	case u.Host == "" || u.Opaque != "":
		return nil, insecure("the base URL has no host")
	case u.User != nil:
		return nil, insecure("the base URL must not carry user-info")
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(baseURL, "?"):
		return nil, insecure("the base URL must not carry a query")
	case u.Fragment != "" || strings.Contains(baseURL, "#"):
		return nil, insecure("the base URL must not carry a fragment")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return nil, insecure("plain http is only allowed to a loopback host")
	}
	c := &Client{
		base: u.Scheme + "://" + u.Host + strings.TrimSuffix(u.EscapedPath(), "/"),
		hc:   &http.Client{},
	}
	for _, o := range opts {
		o(c)
	}
	c.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	return c, nil
}

// isLoopback reports whether host is one of the loopback names of
// wire-core §1.4.
func isLoopback(host string) bool {
	switch host {
	case "localhost", "127.0.0.1", "::1", "[::1]":
		return true
	}
	return false
}

// Protocol calls GET /v1/protocol and validates the document (§2.2).
func (c *Client) Protocol(ctx context.Context) (*ProtocolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, DiscoveryTimeout)
	defer cancel()
	body, err := c.getJSON(ctx, "/v1/protocol")
	if err != nil {
		return nil, err
	}
	return validateProtocol(body)
}

// Providers calls GET /v1/providers (refresh: ?refresh=true) and validates
// the catalog (§6.3).
func (c *Client) Providers(ctx context.Context, refresh bool) ([]Provider, error) {
	ctx, cancel := context.WithTimeout(ctx, DiscoveryTimeout)
	defer cancel()
	path := "/v1/providers"
	if refresh {
		path += "?refresh=true"
	}
	body, err := c.getJSON(ctx, path)
	if err != nil {
		return nil, err
	}
	return validateProviders(body)
}

// Run executes a run in JSON mode and returns its validated result. A run
// failure is a *Error carrying the host's code and HTTP status.
func (c *Client) Run(ctx context.Context, req *protocol.RunRequest) (*protocol.RunResult, error) {
	resp, err := c.post(ctx, req, "application/json")
	if err != nil {
		return nil, err
	}
	body, err := readJSON(resp)
	if err != nil {
		return nil, err
	}
	res, err := validateResult(body, req, "")
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return res, nil
}

func (c *Client) getJSON(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil, "application/json")
	if err != nil {
		return nil, err
	}
	return readJSON(resp)
}

func (c *Client) post(ctx context.Context, req *protocol.RunRequest, accept string) (*http.Response, error) {
	if req == nil {
		return nil, newError(protocol.CodeInvalidRequest, "the run request is nil")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Code: protocol.CodeInvalidRequest, Message: "the run request does not encode", Err: err}
	}
	return c.do(ctx, http.MethodPost, "/v1/runs", body, accept)
}

// do sends one request with the protocol headers and returns a successful
// response whose version header was checked. Every other outcome is an
// *Error and the body is closed.
func (c *Client) do(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	if c.token == "" {
		return nil, newError(protocol.CodeAuthRequired, "no bearer token is configured")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, &Error{Code: protocol.CodeHTTPError, Message: "the request could not be built", Err: err}
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+c.token)
	h.Set(headerVersion, protocol.Version)
	h.Set(headerOptionalEvents, "true")
	h.Set("Accept", accept)
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		msg := "the request failed"
		if errors.Is(err, errRedirect) {
			msg = "the host answered with a redirect, which is never followed"
		}
		return nil, &Error{Code: protocol.CodeHTTPError, Message: msg, Err: err}
	}
	// §2.1: a present header other than 1.0 is rejected before the body
	// is read; a missing one is a legacy host.
	if v := resp.Header.Values(headerVersion); len(v) > 0 && (len(v) > 1 || v[0] != protocol.Version) {
		resp.Body.Close()
		return nil, &Error{
			Code:    protocol.CodeUnsupportedProtocolVersion,
			Message: "the host answered with an unsupported protocol version",
			Status:  resp.StatusCode,
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorFromResponse(resp)
	}
	return resp, nil
}

// errorFromResponse turns a non-2xx response into an *Error: the host's
// error body when it is a well-formed one, else HTTP_ERROR (retryable for
// 429 and ≥ 500). At most MaxErrorBodyBytes are read.
func errorFromResponse(resp *http.Response) *Error {
	status := resp.StatusCode
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes))
	if m, ok := parseObject(b); ok {
		if info, ok := validateErrorInfo(m["error"]); ok {
			return &Error{Code: info.Code, Message: info.Message, Retryable: info.Retryable, Outcome: info.Outcome, Status: status}
		}
	}
	return &Error{
		Code:      protocol.CodeHTTPError,
		Message:   "the host answered HTTP " + strconv.Itoa(status) + " without a protocol error body",
		Retryable: status == http.StatusTooManyRequests || status >= 500,
		Status:    status,
	}
}

// readJSON reads a bounded JSON response body and closes it.
func readJSON(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if !hasMediaType(resp.Header.Get("Content-Type"), "application/json") {
		return nil, invalidResponse("Content-Type is not application/json")
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, &Error{Code: protocol.CodeHTTPError, Message: "reading the response failed", Status: resp.StatusCode, Err: err}
	}
	if len(b) > MaxResponseBytes {
		return nil, newError(protocol.CodeResponseTooLarge, "the response exceeds 2,000,000 bytes")
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return nil, invalidResponse("the body is not valid UTF-8 JSON")
	}
	return b, nil
}

func hasMediaType(header, want string) bool {
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && mt == want
}
