package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

type errorEnvelope struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable *bool  `json:"retryable"`
		Outcome   string `json:"outcome"`
	} `json:"error"`
}

// do sends one request and returns status, headers and body.
func do(t *testing.T, env *testEnv, method, target string, hdr map[string][]string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, env.ts.URL+target, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := env.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var e errorEnvelope
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Retryable == nil || e.Error.Message == "" {
		t.Fatalf("not an error body: %q", b)
	}
	return e.Error.Code
}

func TestPipelineOrder(t *testing.T) {
	env := newEnv(t, envOptions{})
	auth := []string{"Bearer " + testToken}
	jsonCT := []string{"application/json"}
	for _, tc := range []struct {
		name   string
		method string
		target string
		hdr    map[string][]string
		body   string
		status int
		code   protocol.Code // "" = success
	}{
		// Step 3: Origin before anything else, /health included.
		{name: "bad origin, no token", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Origin": {"https://evil.example"}}, status: 403, code: protocol.CodeOriginDenied},
		{name: "bad origin on health", method: "GET", target: "/health", hdr: map[string][]string{"Origin": {"https://evil.example"}}, status: 403, code: protocol.CodeOriginDenied},
		{name: "origin not normalised", method: "GET", target: "/health", hdr: map[string][]string{"Origin": {testOrigin + "/"}}, status: 403, code: protocol.CodeOriginDenied},
		{name: "empty origin", method: "GET", target: "/health", hdr: map[string][]string{"Origin": {""}}, status: 403, code: protocol.CodeOriginDenied},
		{name: "allowed origin, no token", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Origin": {testOrigin}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "allowed origin with token", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Origin": {testOrigin}, "Authorization": auth}, status: 200},
		// Step 4: health needs neither token nor version.
		{name: "health", method: "GET", target: "/health", hdr: map[string][]string{"AgenticDriver-Version": {"9"}}, status: 200},
		{name: "health with query", method: "GET", target: "/health?x", status: 401, code: protocol.CodeUnauthorized},
		// Step 5 before 6.
		{name: "no token, bad version", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"AgenticDriver-Version": {"2.0"}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "lowercase bearer", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"bearer " + testToken}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "two spaces", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer  " + testToken}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "empty bearer", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer "}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "bearer too long", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer " + strings.Repeat("a", 4097)}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "bearer with inner space", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer " + testToken[:10] + " " + testToken[10:]}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "two authorization lines", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer " + testToken, "Bearer " + testToken}}, status: 401, code: protocol.CodeUnauthorized},
		{name: "wrong token", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": {"Bearer " + testToken + "x"}}, status: 401, code: protocol.CodeUnauthorized},
		// Step 6.
		{name: "token, bad version", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {"2.0"}}, status: 400, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "version 1", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {"1"}}, status: 400, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "version empty", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {""}}, status: 400, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "version twice", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {"1.0", "1.0"}}, status: 400, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "bad version before 404", method: "GET", target: "/nope", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {"2.0"}}, status: 400, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "version 1.0", method: "GET", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "AgenticDriver-Version": {"1.0"}}, status: 200},
		// Steps 7–8: exact raw targets, 404 only after auth.
		{name: "unknown path, no token", method: "GET", target: "/nope", status: 401, code: protocol.CodeUnauthorized},
		{name: "unknown path", method: "GET", target: "/nope", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		{name: "providers", method: "GET", target: "/v1/providers", hdr: map[string][]string{"Authorization": auth}, status: 200},
		{name: "providers refresh", method: "GET", target: "/v1/providers?refresh=true", hdr: map[string][]string{"Authorization": auth}, status: 200},
		{name: "providers refresh=false", method: "GET", target: "/v1/providers?refresh=false", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		{name: "protocol with query", method: "GET", target: "/v1/protocol?x=1", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		{name: "runs trailing slash", method: "POST", target: "/v1/runs/", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: runBody("hi"), status: 404, code: protocol.CodeNotFound},
		{name: "runs upper case", method: "POST", target: "/V1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: runBody("hi"), status: 404, code: protocol.CodeNotFound},
		{name: "GET runs", method: "GET", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		{name: "DELETE providers", method: "DELETE", target: "/v1/providers", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		{name: "POST protocol", method: "POST", target: "/v1/protocol", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: "{}", status: 404, code: protocol.CodeNotFound},
		{name: "extension path", method: "POST", target: "/v1/jobs/submit", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: "{}", status: 404, code: protocol.CodeNotFound},
		{name: "OPTIONS without origin, no token", method: "OPTIONS", target: "/v1/runs", status: 401, code: protocol.CodeUnauthorized},
		{name: "OPTIONS without origin", method: "OPTIONS", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth}, status: 404, code: protocol.CodeNotFound},
		// Step 9: content type.
		{name: "no content type", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth}, body: runBody("hi"), status: 400, code: protocol.CodeInvalidRequest},
		{name: "text/plain", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": {"text/plain"}}, body: runBody("hi"), status: 400, code: protocol.CodeInvalidRequest},
		{name: "application/jsonx", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": {"application/jsonx"}}, body: runBody("hi"), status: 400, code: protocol.CodeInvalidRequest},
		{name: "json with params, mixed case", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": {"Application/JSON ; charset=utf-8"}}, body: runBody("hi"), status: 200},
		// Step 10: content encoding.
		{name: "gzip", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT, "Content-Encoding": {"gzip"}}, body: runBody("hi"), status: 400, code: protocol.CodeInvalidRequest},
		{name: "identity", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT, "Content-Encoding": {"identity"}}, body: runBody("hi"), status: 200},
		// Step 11: UTF-8 and JSON.
		{name: "invalid utf-8", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: `{"provider":"fake","model":"fake-model","input":"\xff"}`, status: 400, code: protocol.CodeInvalidRequest},
		{name: "invalid json", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: `{`, status: 400, code: protocol.CodeInvalidRequest},
		{name: "array body", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: `[]`, status: 400, code: protocol.CodeInvalidRequest},
		// Steps 13–15: validation before authorization.
		{name: "unknown provider", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": {"Bearer " + otherToken}, "Content-Type": jsonCT}, body: `{"provider":"nope","model":"m","input":"hi"}`, status: 400, code: protocol.CodeUnknownProvider},
		{name: "forbidden provider", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": {"Bearer " + otherToken}, "Content-Type": jsonCT}, body: runBody("hi"), status: 403, code: protocol.CodeForbidden},
		{name: "model not allowed", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: `{"provider":"fake","model":"other","input":"hi"}`, status: 400, code: protocol.CodeUnsupportedModel},
		// Run failures in JSON mode are HTTP errors with the code's status.
		{name: "provider failure", method: "POST", target: "/v1/runs", hdr: map[string][]string{"Authorization": auth, "Content-Type": jsonCT}, body: runBody("fail"), status: 502, code: protocol.CodeProviderFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			status, h, b := do(t, env, tc.method, tc.target, tc.hdr, body)
			if status != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", status, tc.status, b)
			}
			checkCommonHeaders(t, h, false)
			if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.code != "" {
				if got := errorCode(t, b); got != string(tc.code) {
					t.Errorf("code = %s, want %s", got, tc.code)
				}
				if tc.code == protocol.CodeOriginDenied && h.Get("Access-Control-Allow-Origin") != "" {
					t.Error("ORIGIN_DENIED carries Access-Control-Allow-Origin")
				}
				// A wrong method is 404 like an unknown path (§1.1): no
				// 405's Allow header.
				if tc.code == protocol.CodeNotFound && h.Get("Allow") != "" {
					t.Errorf("404 carries Allow: %q", h.Get("Allow"))
				}
			}
		})
	}
}

func TestHealthBody(t *testing.T) {
	env := newEnv(t, envOptions{})
	status, _, b := do(t, env, "GET", "/health", nil, nil)
	if status != 200 || string(b) != `{"status":"ok","protocol":"agenticdriver.v1"}` {
		t.Fatalf("health = %d %s", status, b)
	}
}

func TestHead(t *testing.T) {
	env := newEnv(t, envOptions{})
	for _, target := range []string{"/health", "/v1/protocol", "/v1/runs"} {
		status, h, _ := do(t, env, "HEAD", target, map[string][]string{"Authorization": {"Bearer " + testToken}}, nil)
		if status != 404 {
			t.Errorf("HEAD %s = %d, want 404", target, status)
		}
		checkCommonHeaders(t, h, false)
		status, _, _ = do(t, env, "HEAD", target, nil, nil)
		if status != 401 {
			t.Errorf("HEAD %s without token = %d, want 401", target, status)
		}
	}
}

func TestPreflight(t *testing.T) {
	env := newEnv(t, envOptions{})
	status, h, b := do(t, env, "OPTIONS", "/v1/runs", map[string][]string{"Origin": {testOrigin}}, nil)
	if status != 204 || len(b) != 0 {
		t.Fatalf("preflight = %d %q", status, b)
	}
	checkCommonHeaders(t, h, false)
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":   testOrigin,
		"Vary":                          "Origin",
		"Access-Control-Expose-Headers": "AgenticDriver-Version",
		"Access-Control-Allow-Methods":  "GET, POST, OPTIONS",
		"Access-Control-Allow-Headers":  "Authorization, Content-Type, Accept, AgenticDriver-Version, AgenticDriver-Accept-Optional-Events",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("Access-Control-Allow-Credentials must never be sent")
	}
	// An allowed origin on a normal request gets the CORS headers, not the
	// preflight ones.
	status, h, _ = do(t, env, "GET", "/health", map[string][]string{"Origin": {testOrigin}}, nil)
	if status != 200 || h.Get("Access-Control-Allow-Origin") != testOrigin || h.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("CORS on GET /health: %d %v", status, h)
	}
}

func TestHostStates(t *testing.T) {
	env := newEnv(t, envOptions{})
	s := NewServer(ServerOptions{Engine: env.engine})
	for _, tc := range []struct {
		name string
		set  func()
		code protocol.Code
	}{
		{"starting", func() {}, protocol.CodeHostStarting},
		{"shutting down", s.BeginShutdown, protocol.CodeHostShuttingDown},
	} {
		tc.set()
		// The state check comes before the origin check (step 2 < 3).
		req, _ := http.NewRequest("GET", "/health", nil)
		req.Header.Set("Origin", "https://evil.example")
		rec := newRecorder()
		s.ServeHTTP(rec, req)
		if rec.status != 503 || errorCode(t, rec.body.Bytes()) != string(tc.code) {
			t.Errorf("%s: %d %s", tc.name, rec.status, rec.body.String())
		}
		checkCommonHeaders(t, rec.Header(), false)
		var e errorEnvelope
		_ = json.Unmarshal(rec.body.Bytes(), &e)
		if !*e.Error.Retryable {
			t.Errorf("%s: not retryable", tc.name)
		}
	}
}

// TestBodyLimit: exactly 1,000,000 bytes pass the bound, one more is
// BODY_TOO_LARGE — with a Content-Length and with a chunked body.
func TestBodyLimit(t *testing.T) {
	env := newEnv(t, envOptions{})
	base := runBody("hi")
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		status  int
	}{
		{"exact, length", MaxBodyBytes, false, 200},
		{"over, length", MaxBodyBytes + 1, false, 413},
		{"exact, chunked", MaxBodyBytes, true, 200},
		{"over, chunked", MaxBodyBytes + 1, true, 413},
		{"far over, chunked", 3 * MaxBodyBytes, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := base + strings.Repeat(" ", tc.size-len(base))
			var rd io.Reader = strings.NewReader(body)
			if tc.chunked {
				rd = io.MultiReader(rd) // hides the length: chunked encoding
			}
			status, h, b := do(t, env, "POST", "/v1/runs", map[string][]string{
				"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"},
			}, rd)
			if status != tc.status {
				t.Fatalf("status = %d, want %d: %s", status, tc.status, b)
			}
			checkCommonHeaders(t, h, false)
			if tc.status == 413 && errorCode(t, b) != string(protocol.CodeBodyTooLarge) {
				t.Errorf("code: %s", b)
			}
		})
	}
}

// TestRawRequests covers what a Go client cannot send: the asterisk
// target, and a declared oversize Content-Length with no body at all (the
// 413 must come before reading).
func TestRawRequests(t *testing.T) {
	env := newEnv(t, envOptions{})
	addr := strings.TrimPrefix(env.ts.URL, "http://")
	for _, tc := range []struct {
		name, raw string
		status    int
		code      protocol.Code
	}{
		{"options asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\n\r\n", 404, protocol.CodeNotFound},
		{"options asterisk preflight", "OPTIONS * HTTP/1.1\r\nHost: x\r\nOrigin: " + testOrigin + "\r\n\r\n", 204, ""},
		{"declared oversize", "POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\nContent-Type: application/json\r\nContent-Length: 1000001\r\n\r\n", 413, protocol.CodeBodyTooLarge},
		{"absolute target", "GET http://x/v1/protocol HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\n\r\n", 404, protocol.CodeNotFound},
		// What a router that cleans or decodes paths, or matches parsed
		// queries, would get wrong (§1.1: the raw target, exactly).
		{"refresh, raw", rawGet("/v1/providers?refresh=true"), 200, ""},
		{"double slash", rawGet("/v1//protocol"), 404, protocol.CodeNotFound},
		{"dot segment", rawGet("/v1/./protocol"), 404, protocol.CodeNotFound},
		{"dot-dot segment", rawGet("/v1/x/../protocol"), 404, protocol.CodeNotFound},
		{"leading double slash", rawGet("//v1/protocol"), 404, protocol.CodeNotFound},
		{"percent-encoded letter", rawGet("/v1/%70rotocol"), 404, protocol.CodeNotFound},
		{"encoded slash", rawGet("/v1%2Fprotocol"), 404, protocol.CodeNotFound},
		{"empty query", rawGet("/v1/protocol?"), 404, protocol.CodeNotFound},
		{"refresh twice", rawGet("/v1/providers?refresh=true&refresh=true"), 404, protocol.CodeNotFound},
		{"refresh and more", rawGet("/v1/providers?refresh=true&x=1"), 404, protocol.CodeNotFound},
		{"refresh upper case", rawGet("/v1/providers?refresh=TRUE"), 404, protocol.CodeNotFound},
		{"refresh encoded", rawGet("/v1/providers?refresh=%74rue"), 404, protocol.CodeNotFound},
		{"refresh empty query", rawGet("/v1/providers?"), 404, protocol.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			checkCommonHeaders(t, resp.Header, false)
			if tc.code != "" && errorCode(t, b) != string(tc.code) {
				t.Errorf("body %s", b)
			}
		})
	}
}

// rawGet is an authenticated GET of target exactly as written.
func rawGet(target string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\n\r\n"
}

// TestRouteTable drives the router built from the real table with every
// method on every target, near-misses included: exactly the table's
// (method, target) pairs reach their endpoint, everything else the
// not-found writer — wrong methods too, since §1.1 has no 405.
func TestRouteTable(t *testing.T) {
	table := (&Server{}).routes()
	hit := -1
	routes := make([]route, len(table))
	for i, e := range table {
		routes[i] = route{e.method, e.target, func(http.ResponseWriter, *http.Request, *runtime.Principal) { hit = i }}
	}
	notFound := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = len(routes) })
	rt := newRouter(routes, notFound)

	targets := []string{"/health", "/nope", "/", "*", "http://x/v1/runs", "/v1/jobs/submit"}
	for _, e := range table {
		targets = append(targets, e.target, e.target+"/", e.target+"?", e.target+"?x=1", strings.ToUpper(e.target), "/v1//"+strings.TrimPrefix(e.target, "/v1/"))
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "get", "post"}
	w := httptest.NewRecorder()
	for _, target := range targets {
		for _, method := range methods {
			want := len(routes)
			for i, e := range table {
				if e.method == method && e.target == target {
					want = i
				}
			}
			r := httptest.NewRequest(method, "/", nil)
			r.RequestURI = target // as the server sets it: the request line's target
			u, err := url.ParseRequestURI(target)
			if err != nil {
				u = &url.URL{Path: target}
			}
			r.URL = u
			hit = -1
			switch h := lookup(rt, r).(type) {
			case endpoint:
				h(w, r, nil)
			default:
				h.ServeHTTP(w, r)
			}
			if hit != want {
				t.Errorf("%s %s: route %d, want %d (%d = not found)", method, target, hit, want, len(routes))
			}
		}
	}
}

// TestRouterFailsClosed: the router's endpoints only run through the
// pipeline; mounted directly (skipping authentication) they refuse.
func TestRouterFailsClosed(t *testing.T) {
	env := newEnv(t, envOptions{})
	defer func() {
		if recover() == nil {
			t.Error("an endpoint served without the pipeline")
		}
	}()
	env.srv.router.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/protocol", nil))
}

func TestProtocolDocument(t *testing.T) {
	env := newEnv(t, envOptions{})
	status, _, b := do(t, env, "GET", "/v1/protocol", map[string][]string{"Authorization": {"Bearer " + testToken}}, nil)
	if status != 200 {
		t.Fatal(status)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := `{"protocol":"agenticdriver","version":"1.0","supportedVersions":["1.0"],"features":` + mustJSON(env.engine.Features()) + `}`
	if string(b) != want {
		t.Errorf("protocol = %s\nwant %s", b, want)
	}
}

func TestInternalErrorIsPrivate(t *testing.T) {
	var logs lockedBuffer
	env := newEnv(t, envOptions{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	status, _, b := do(t, env, "POST", "/v1/runs", map[string][]string{
		"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"},
	}, strings.NewReader(runBody("internal")))
	if status != 500 || errorCode(t, b) != string(protocol.CodeInternalError) {
		t.Fatalf("status %d body %s", status, b)
	}
	if bytes.Contains(b, []byte(secretMarker)) {
		t.Fatalf("private cause leaked: %s", b)
	}
	var e errorEnvelope
	_ = json.Unmarshal(b, &e)
	if e.Error.Message != protocol.Message(protocol.CodeInternalError) {
		t.Errorf("message = %q", e.Error.Message)
	}
	if strings.Contains(logs.String(), secretMarker) {
		t.Errorf("private cause logged: %s", logs.String())
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestVersionWhitespace documents how "1.0 " arrives: HTTP/1.1 strips
// optional whitespace around a field value (RFC 9110 §5.5), so a padded
// header on the wire is the value "1.0" and is accepted, while whitespace
// inside the value is not.
func TestVersionWhitespace(t *testing.T) {
	env := newEnv(t, envOptions{})
	addr := strings.TrimPrefix(env.ts.URL, "http://")
	for raw, want := range map[string]int{
		"AgenticDriver-Version: 1.0 \r\n":    200,
		"AgenticDriver-Version: 1. 0\r\n":    400,
		"AgenticDriver-Version:\r\n":         400,
		"agenticdriver-version: 1.0\r\n":     200,
		"AgenticDriver-Version: 1.0,1.0\r\n": 400,
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "GET /v1/protocol HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testToken+"\r\n"+raw+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != want {
			t.Errorf("%q: status %d, want %d", raw, resp.StatusCode, want)
		}
	}
}
