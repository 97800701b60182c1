package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

var builtinTools = []struct{ id, name string }{
	{"calculate", "calculate"}, {"json-query", "json_query"}, {"http-fetch", "http_fetch"}, {"notes", "notes"},
}

// toolSite is a test host with the built-in tools pinned and served, and
// two tokens (subjects alice and bob) granted them. allow is http_fetch's
// allowlist.
func toolSite(t *testing.T, allow ...string) (s *site, alice, bob string) {
	t.Helper()
	s = newSite(t)
	var doc strings.Builder
	for _, bt := range builtinTools {
		p := copyPlugin(t, s.dir, bt.id, "1.0.0")
		s.plugins[bt.id] = p
		fmt.Fprintf(&doc, "[[extensions]]\nid = %q\nversion = \"1.0.0\"\nmodule = %q\nsha256 = %q\n\n", bt.id, filepath.Base(p.path), p.digest)
		fmt.Fprintf(&doc, "[[tools]]\nextension = \"%s@1.0.0\"\nnames = [%q]\n", bt.id, bt.name)
		if bt.id == "http-fetch" {
			fmt.Fprintf(&doc, "settings = { allow_origins = %s }\n", mustJSONList(allow))
		}
		doc.WriteString("\n")
	}
	appendSiteConfig(t, s, doc.String())
	names := []string{"calculate", "json_query", "http_fetch", "notes"}
	alice = addSiteToken(t, s, "alice", "alice", []string{"fixture"}, names)
	bob = addSiteToken(t, s, "bob", "bob", []string{"fixture"}, names)
	return s, alice, bob
}

func mustJSONList(xs []string) string {
	if xs == nil {
		xs = []string{}
	}
	b, _ := json.Marshal(xs)
	return string(b)
}

// toolRun is a run of the fixture's "tool:NAME:ARGS" with NAME selected.
func toolRun(name, args string) *protocol.RunRequest {
	req := runRequest("tool:" + name + ":" + args)
	req.Tools = []string{name}
	return req
}

// TestBuiltinTools drives each built-in tool end to end over HTTP through
// the fixture: JSON and SSE, the tool's output as the run's text and in
// tool.completed.
func TestBuiltinTools(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "https://example.com/", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Tools</title></head><body><p>fetched &amp; reduced</p><script>no()</script></body></html>`)
	}))
	defer page.Close()
	unlisted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") }))
	defer unlisted.Close()

	s, alice, _ := toolSite(t, page.URL)
	srv := startServer(t, s)
	c := newRunClient(t, srv, alice)
	for _, tc := range []struct{ name, tool, args, want string }{
		{"calculate", "calculate", `{"expression":"0.1 + 0.2"}`, `{"result":"0.3"}`},
		{"calculate error", "calculate", `{"expression":"1/0"}`, `{"error":"division by zero","position":1}`},
		{"json_query", "json_query", `{"query":"[.items[] | select(.n > 1) | .name]","document":{"items":[{"name":"a","n":1},{"name":"b","n":2}]}}`, `{"results":[["b"]]}`},
		{"http_fetch", "http_fetch", `{"url":"` + page.URL + `/page"}`, `{"url":"` + page.URL + `/page","status":200,"contentType":"text/html","text":"Tools\n\nfetched \u0026 reduced"}`},
		{"http_fetch unlisted", "http_fetch", `{"url":"` + unlisted.URL + `/"}`, `{"url":"` + unlisted.URL + `/","error":"refused: the URL's origin is not allowlisted by the operator, or it resolves to a private address"}`},
		{"http_fetch redirect", "http_fetch", `{"url":"` + page.URL + `/away"}`, `{"url":"` + page.URL + `/away","error":"refused: the server answered with a redirect, and redirects are not followed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forModes(t, c, toolRun(tc.tool, tc.args), func(t *testing.T, res *protocol.RunResult, evs []client.Event) {
				if res.Text != tc.want || res.Steps != 2 {
					t.Fatalf("text %s (steps %d), want %s", res.Text, res.Steps, tc.want)
				}
				if evs == nil {
					return
				}
				checkGrammar(t, evs, "run.completed")
				if countType(evs, "tool.called") != 1 || countType(evs, "tool.completed") != 1 {
					t.Fatalf("tool events: %d called, %d completed", countType(evs, "tool.called"), countType(evs, "tool.completed"))
				}
			})
		})
	}

	// The tool must be selected, and its arguments match its schema,
	// before anything runs.
	for _, tc := range []struct {
		req  *protocol.RunRequest
		code protocol.Code
	}{
		{runRequest(`tool:calculate:{"expression":"1"}`), protocol.CodeToolNotAllowed},
		{toolRun("calculate", `{"expr":"1"}`), protocol.CodeInvalidToolArguments},
		{toolRun("notes", `{"op":"put","key":"k"}`), protocol.CodeInvalidToolArguments},
		{toolRun("json_query", `{"query":"."}`), protocol.CodeInvalidToolArguments},
		// Dispatched, then stopped by the sandbox (compute watchdog):
		// the outcome is uncertain.
		{toolRun("json_query", `{"query":"[range(1e9)]","document":null}`), protocol.CodeToolOutcomeUncertain},
	} {
		_, err := c.Run(t.Context(), tc.req)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s %v: %v, want %s", tc.req.Input, tc.req.Tools, err, tc.code)
			continue
		}
		if uncertain := tc.code == protocol.CodeToolOutcomeUncertain; (ce.Outcome == "uncertain") != uncertain || ce.Retryable {
			t.Errorf("%s: outcome %q retryable %v", tc.req.Input, ce.Outcome, ce.Retryable)
		}
	}
}

// TestNotesTool: notes are per subject, kept in the host's store across
// a restart, and bounded.
func TestNotesTool(t *testing.T) {
	t.Parallel()
	s, alice, bob := toolSite(t)
	srv := startServer(t, s)
	ca, cb := newRunClient(t, srv, alice), newRunClient(t, srv, bob)
	notes := func(c *client.Client, args string) string {
		t.Helper()
		res, err := c.Run(t.Context(), toolRun("notes", args))
		if err != nil {
			t.Fatalf("notes %s: %v", args, err)
		}
		return res.Text
	}
	expect := func(c *client.Client, args, want string) {
		t.Helper()
		if got := notes(c, args); got != want {
			t.Errorf("notes %s = %s, want %s", args, got, want)
		}
	}
	expect(ca, `{"op":"put","key":"plan","value":"ship it"}`, `{"ok":true}`)
	expect(cb, `{"op":"get","key":"plan"}`, `{"found":false}`)
	expect(cb, `{"op":"put","key":"plan","value":"bob's"}`, `{"ok":true}`)
	expect(ca, `{"op":"get","key":"plan"}`, `{"found":true,"value":"ship it"}`)

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, srv.stderr)
	}
	srv = startServer(t, s)
	ca, cb = newRunClient(t, srv, alice), newRunClient(t, srv, bob)
	expect(ca, `{"op":"get","key":"plan"}`, `{"found":true,"value":"ship it"}`)
	expect(cb, `{"op":"list"}`, `{"keys":["plan"]}`)
	expect(ca, `{"op":"delete","key":"plan"}`, `{"deleted":true}`)
	expect(ca, `{"op":"list"}`, `{"keys":[]}`)
	expect(cb, `{"op":"get","key":"plan"}`, `{"found":true,"value":"bob's"}`)
}

// TestCLIRunTool: `adhost run --tool NAME 'tool:NAME:ARGS'` prints the
// tool's output.
func TestCLIRunTool(t *testing.T) {
	t.Parallel()
	s, alice, _ := toolSite(t)
	srv := startServer(t, s)
	tokenFile := filepath.Join(s.dir, "data", "alice-cli.token")
	if err := os.WriteFile(tokenFile, []byte(alice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := adhost(t, "run", "--url", srv.URL, "--token-file", tokenFile, "--provider", fixtureProvider, "--model", fixtureModel,
		"--tool", "calculate", `tool:calculate:{"expression":"0.1+0.2"}`)
	if code != 0 || strings.TrimSpace(stdout) != `{"result":"0.3"}` {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	// plugins list shows each tool extension's tools and which have side
	// effects, and its permissions.
	code, stdout, stderr = adhost(t, "plugins", "list", "--config", s.config, "--json")
	var rows []struct{ ID, Tools, Permissions string }
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || code != 0 {
		t.Fatalf("plugins list: %d %v %s", code, err, stderr)
	}
	want := map[string][2]string{
		"calculate":  {"calculate", "none"},
		"json-query": {"json_query", "none"},
		"http-fetch": {"http_fetch(side effects)", "network:+allowlist(allow_origins)"},
		"notes":      {"notes(side effects)", "kv"},
	}
	for _, r := range rows {
		if w, ok := want[r.ID]; ok {
			if r.Tools != w[0] || r.Permissions != w[1] {
				t.Errorf("%s: tools %q permissions %q, want %q %q", r.ID, r.Tools, r.Permissions, w[0], w[1])
			}
			delete(want, r.ID)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}

// TestToolStopped: a running tool extension is stopped, not waited for,
// when the run is cancelled or its idle timeout passes: the hanging
// request http_fetch made is aborted (the server sees it go away), and the
// run ends with the outcome uncertain.
func TestToolStopped(t *testing.T) {
	t.Parallel()
	started, aborted := make(chan struct{}, 4), make(chan struct{}, 4)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		aborted <- struct{}{}
	}))
	defer hang.Close()
	s, alice, _ := toolSite(t, hang.URL)
	srv := startServer(t, s)
	c := newRunClient(t, srv, alice)
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("the tool's request was never %s", what)
		}
	}

	t.Run("idle timeout", func(t *testing.T) {
		req := toolRun("http_fetch", `{"url":"`+hang.URL+`/hang"}`)
		idle := int64(500)
		req.IdleTimeoutMs = &idle
		_, err := c.Run(t.Context(), req)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != protocol.CodeIdleTimeout || ce.Outcome != "uncertain" {
			t.Fatalf("run: %v, want IDLE_TIMEOUT with outcome uncertain", err)
		}
		wait(started, "made")
		wait(aborted, "aborted")
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, err := c.Stream(ctx, toolRun("http_fetch", `{"url":"`+hang.URL+`/hang"}`), func(ev client.Event) error {
			if ev.Type == client.EventToolCalled {
				<-started // the tool is running: now cancel (the client disconnects)
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream: %v", err)
		}
		wait(aborted, "aborted")
	})
}
