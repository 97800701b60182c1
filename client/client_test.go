package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"adhost/client"
	"adhost/runtime/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(summarized{m})
}

// summarized prints the client-fixture count after every test has
// reported, so that it is the last line before go test's own (in -v
// output a test's Printf comes before its subtests' results).
type summarized struct{ m *testing.M }

func (s summarized) Run() int {
	code := s.m.Run()
	if fixtureSummary != "" {
		fmt.Println(fixtureSummary)
	}
	return code
}

func TestNewTransportRules(t *testing.T) {
	for url, want := range map[string]protocol.Code{
		"http://127.0.0.1:7433":        "",
		"http://localhost:7433/":       "",
		"http://[::1]:7433":            "",
		"https://example.com":          "",
		"https://example.com/base/":    "",
		"http://example.com":           protocol.CodeInsecureTransport,
		"http://127.0.0.2:7433":        protocol.CodeInsecureTransport,
		"https://user:pw@example.com":  protocol.CodeInsecureTransport,
		"https://example.com/?a=1":     protocol.CodeInsecureTransport,
		"https://example.com/?":        protocol.CodeInsecureTransport,
		"https://example.com/#x":       protocol.CodeInsecureTransport,
		"https://example.com/#":        protocol.CodeInsecureTransport,
		"ftp://127.0.0.1":              protocol.CodeInsecureTransport,
		"127.0.0.1:7433":               protocol.CodeInsecureTransport,
		"https://":                     protocol.CodeInsecureTransport,
		"http://127.0.0.1:7433\x00bad": protocol.CodeInsecureTransport,
	} {
		_, err := client.New(url)
		if got := client.CodeOf(err); got != want {
			t.Errorf("New(%q) = %v, want code %q", url, err, want)
		}
	}
}

func serve(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNoTokenIsAuthRequired(t *testing.T) {
	called := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	if _, err := c.Protocol(t.Context()); client.CodeOf(err) != protocol.CodeAuthRequired || called {
		t.Errorf("err = %v, host called %v", err, called)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		ct, body  string
		hdr       []string // AgenticDriver-Version lines
		code      protocol.Code
		retryable bool
		outcome   string
	}{
		{name: "protocol error", status: 403, body: `{"error":{"code":"FORBIDDEN","message":"m","retryable":false}}`, code: protocol.CodeForbidden},
		{name: "uncertain", status: 409, body: `{"error":{"code":"TOOL_OUTCOME_UNCERTAIN","message":"m","retryable":false,"outcome":"uncertain"}}`, code: protocol.CodeToolOutcomeUncertain, outcome: "uncertain"},
		{name: "unknown code kept", status: 418, body: `{"error":{"code":"NEW_THING","message":"m","retryable":true}}`, code: "NEW_THING", retryable: true},
		{name: "text 503", status: 503, ct: "text/plain", body: "down", code: protocol.CodeHTTPError, retryable: true},
		{name: "text 429", status: 429, ct: "text/plain", body: "slow", code: protocol.CodeHTTPError, retryable: true},
		{name: "text 400", status: 400, ct: "text/plain", body: "bad", code: protocol.CodeHTTPError},
		{name: "bad outcome", status: 400, body: `{"error":{"code":"X","message":"m","retryable":false,"outcome":"maybe"}}`, code: protocol.CodeHTTPError},
		{name: "error body over 64,000 bytes", status: 500, body: `{"error":{"code":"X","message":"` + strings.Repeat("a", 64_000) + `","retryable":false}}`, code: protocol.CodeHTTPError, retryable: true},
		{name: "future version", status: 200, hdr: []string{"2.0"}, body: `{}`, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "two version lines", status: 200, hdr: []string{"1.0", "1.0"}, body: `{}`, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "version on an error", status: 400, hdr: []string{"2.0"}, body: `{"error":{"code":"X","message":"m","retryable":false}}`, code: protocol.CodeUnsupportedProtocolVersion},
		{name: "too large", status: 200, body: `{"protocol":"` + strings.Repeat("a", 2_000_000) + `"}`, code: protocol.CodeResponseTooLarge},
		{name: "not json", status: 200, body: `{bad`, code: protocol.CodeInvalidResponse},
		{name: "wrong content type", status: 200, ct: "text/html", body: `{}`, code: protocol.CodeInvalidResponse},
		{name: "valid", status: 200, body: `{"protocol":"agenticdriver","version":"1.0","supportedVersions":["1.0","2.0"],"features":[],"extra":1}`},
		{name: "version missing from supported", status: 200, body: `{"protocol":"agenticdriver","version":"1.0","supportedVersions":["2.0"],"features":[]}`, code: protocol.CodeInvalidResponse},
		{name: "features not strings", status: 200, body: `{"protocol":"agenticdriver","version":"1.0","supportedVersions":["1.0"],"features":[1]}`, code: protocol.CodeInvalidResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				ct := tc.ct
				if ct == "" {
					ct = "application/json; charset=utf-8"
				}
				w.Header().Set("Content-Type", ct)
				for _, v := range tc.hdr {
					w.Header().Add("AgenticDriver-Version", v)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			_, err := c.Protocol(t.Context())
			if got := client.CodeOf(err); got != tc.code {
				t.Fatalf("code = %q (%v), want %q", got, err, tc.code)
			}
			if tc.code == "" {
				return
			}
			var ce *client.Error
			errors.As(err, &ce)
			if ce.Retryable != tc.retryable || ce.Outcome != tc.outcome {
				t.Errorf("error = %+v", ce)
			}
			if tc.status >= 300 && ce.Status != tc.status {
				t.Errorf("status = %d", ce.Status)
			}
		})
	}
}

func TestRedirectNeverFollowed(t *testing.T) {
	hit := false
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer target.Close()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v1/providers", http.StatusTemporaryRedirect)
	})
	_, err := c.Providers(t.Context(), true)
	if client.CodeOf(err) != protocol.CodeHTTPError || hit {
		t.Errorf("err = %v, target contacted %v", err, hit)
	}
}

const okStream = `data: {"type":"run.started","runId":"r","sequence":1,"timestamp":"2026-01-01T00:00:00Z","provider":"p","model":"m"}

data: {"type":"text.delta","runId":"r","sequence":2,"timestamp":"2026-01-01T00:00:00.5+01:00","text":"a"}

data: {"type":"usage.reported","runId":"r","sequence":3,"timestamp":"2026-01-01T00:00:00Z","step":1,"usage":{"inputTokens":1.0,"costUsd":0.5}}

data: {"type":"run.completed","runId":"r","sequence":4,"timestamp":"2026-01-01T00:00:00Z","result":{"runId":"r","provider":"p","model":"m","text":"a","usage":{},"steps":1,"finishReason":"length"}}

`

func TestEventsIterator(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(okStream))
	})
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x"}
	var types []string
	for ev, err := range c.Events(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == client.EventUsageReported && (ev.Usage == nil || *ev.Usage.InputTokens != 1) {
			t.Errorf("usage = %+v", ev.Usage)
		}
	}
	if strings.Join(types, ",") != "run.started,text.delta,usage.reported,run.completed" {
		t.Errorf("types = %v", types)
	}
	// Breaking out early is fine and yields nothing more.
	n := 0
	for range c.Events(t.Context(), req) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("n = %d", n)
	}
	// A request whose provider differs from the stream's is rejected.
	for _, err := range c.Events(t.Context(), &protocol.RunRequest{Provider: "other", Model: "m", Input: "x"}) {
		if client.CodeOf(err) != protocol.CodeInvalidStream {
			t.Errorf("mismatched provider: %v", err)
		}
	}
}

func TestStreamPayloadChecks(t *testing.T) {
	start := `{"type":"run.started","runId":"r","sequence":1,"timestamp":"2026-01-01T00:00:00Z","provider":"p","model":"m"}`
	env := func(typ, rest string) string {
		return `{"type":"` + typ + `","runId":"r","sequence":2,"timestamp":"2026-01-01T00:00:00Z"` + rest + `}`
	}
	for _, tc := range []struct {
		name, second string
		code         protocol.Code
	}{
		{"step zero", env("step.started", `,"step":0`), protocol.CodeInvalidStream},
		{"step fraction", env("step.started", `,"step":1.5`), protocol.CodeInvalidStream},
		{"progress phase", env("run.progress", `,"phase":"thinking"`), protocol.CodeInvalidStream},
		{"usage string", env("usage.reported", `,"step":1,"usage":{"outputTokens":"1"}`), protocol.CodeInvalidStream},
		{"tool call no args", env("tool.called", `,"call":{"id":"c","name":"t"}`), protocol.CodeInvalidStream},
		{"tool completed no output", env("tool.completed", `,"callId":"c"`), protocol.CodeInvalidStream},
		{"cancelled ok", env("run.cancelled", `,"error":{"code":"CANCELLED","message":"m","retryable":false,"outcome":"uncertain"}`), protocol.CodeCancelled},
		{"sequence as string", `{"type":"text.delta","runId":"r","sequence":"2","timestamp":"2026-01-01T00:00:00Z","text":"a"}`, protocol.CodeInvalidStream},
		{"timestamp without offset", `{"type":"text.delta","runId":"r","sequence":2,"timestamp":"2026-01-01T00:00:00","text":"a"}`, protocol.CodeInvalidStream},
		{"optional string is not optional", env("future.thing", `,"optional":"true"`), protocol.CodeUnsupportedEvent},
		{"known type never skipped", env("text.delta", `,"optional":true,"text":5`), protocol.CodeInvalidStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				w.Write([]byte("data: " + start + "\n\ndata: " + tc.second + "\n\n"))
			})
			_, err := c.Stream(t.Context(), &protocol.RunRequest{Provider: "p", Model: "m", Input: "x"}, nil)
			if got := client.CodeOf(err); got != tc.code {
				t.Errorf("code = %q (%v), want %q", got, err, tc.code)
			}
		})
	}
}
