package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/internal/testenv"
	"adhost/runtime/manifest"
	"adhost/runtime/protocol"
)

// The error matrix of wire-core §7.2 through the real binary: every code
// the core can produce, at its trigger, with its HTTP status, retryable
// flag and body shape (§7.1) — pipeline and validation errors with raw
// net/http, run failures with the Go client in JSON and SSE mode.
//
// Not produced by this host and therefore not here: HOST_STARTING (the
// listener opens after the host is ready), QUEUE_FULL and
// ADMISSION_IDENTITY_REQUIRED (no queue, no account admission),
// TOOL_STREAM_REQUIRED / APPROVAL_STREAM_REQUIRED (applicationTools and
// approvals are not implemented, so they are unknown fields:
// INVALID_REQUEST, checked below), RATE_LIMITED and the other PROVIDER_*
// codes (the fixture has no upstream), TOOL_OUTCOME_UNCERTAIN and
// TOOL_FAILED (the conformance tool cannot fail after its arguments
// validated), OUTPUT_BUFFER_LIMIT (the engine merges text deltas, so the
// fixture cannot fill the event queue deterministically), INTERNAL_ERROR.

// validRun is a run request body that passes every check.
const validRun = `{"provider":"fixture","model":"fixture-model","input":"conformance:text"}`

func TestErrorMatrix(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	// A token without any grant, and one with the provider but no tool.
	other := addSiteToken(t, s, "other", "other-user", nil, nil)
	notool := addSiteToken(t, s, "notool", "notool-user", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	tok := s.token

	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	auth := func(token string, kv ...string) http.Header {
		return hdr(append([]string{"Authorization", "Bearer " + token}, kv...)...)
	}
	jsonPost := func(token string, kv ...string) http.Header {
		return auth(token, append([]string{"Content-Type", "application/json"}, kv...)...)
	}
	run := func(fields string) string { // validRun with more fields
		return strings.TrimSuffix(validRun, "}") + "," + fields + "}"
	}

	type pipelineCase struct {
		name         string
		method, path string
		hdr          http.Header
		body         string
		status       int
		code         protocol.Code // "" for a success
		retryable    bool
	}
	cases := []pipelineCase{
		// UNAUTHORIZED 401: missing/invalid bearer, checked before routing
		// and before the version.
		{"no token", "GET", "/v1/protocol", nil, "", 401, protocol.CodeUnauthorized, false},
		{"wrong token", "GET", "/v1/protocol", auth(strings.Repeat("w", 40)), "", 401, protocol.CodeUnauthorized, false},
		{"lowercase bearer", "GET", "/v1/protocol", hdr("Authorization", "bearer "+tok), "", 401, protocol.CodeUnauthorized, false},
		{"two spaces", "GET", "/v1/protocol", hdr("Authorization", "Bearer  "+tok), "", 401, protocol.CodeUnauthorized, false},
		{"run without token", "POST", "/v1/runs", hdr("Content-Type", "application/json"), validRun, 401, protocol.CodeUnauthorized, false},
		{"unknown path without token", "GET", "/v1/nope", nil, "", 401, protocol.CodeUnauthorized, false},
		{"bad version without token", "GET", "/v1/protocol", hdr("AgenticDriver-Version", "2.0"), "", 401, protocol.CodeUnauthorized, false},

		// ORIGIN_DENIED 403 on every path, health and preflight included
		// (allowed_origins is empty).
		{"origin on health", "GET", "/health", hdr("Origin", "https://evil.example"), "", 403, protocol.CodeOriginDenied, false},
		{"origin preflight", "OPTIONS", "/v1/runs", hdr("Origin", "https://evil.example", "Access-Control-Request-Method", "POST"), "", 403, protocol.CodeOriginDenied, false},
		{"origin with token", "GET", "/v1/protocol", auth(tok, "Origin", "https://evil.example"), "", 403, protocol.CodeOriginDenied, false},

		// NOT_FOUND 404 after authentication; the raw target is matched
		// exactly.
		{"GET runs", "GET", "/v1/runs", auth(tok), "", 404, protocol.CodeNotFound, false},
		{"POST protocol", "POST", "/v1/protocol", jsonPost(tok), "{}", 404, protocol.CodeNotFound, false},
		{"unknown path", "GET", "/v1/nope", auth(tok), "", 404, protocol.CodeNotFound, false},
		{"trailing slash", "POST", "/v1/runs/", jsonPost(tok), validRun, 404, protocol.CodeNotFound, false},
		{"case", "POST", "/V1/runs", jsonPost(tok), validRun, 404, protocol.CodeNotFound, false},
		{"refresh=false", "GET", "/v1/providers?refresh=false", auth(tok), "", 404, protocol.CodeNotFound, false},
		{"query on protocol", "GET", "/v1/protocol?x=1", auth(tok), "", 404, protocol.CodeNotFound, false},
		{"extension endpoint", "POST", "/v1/jobs/submit", jsonPost(tok), "{}", 404, protocol.CodeNotFound, false},
		{"OPTIONS without origin", "OPTIONS", "/v1/runs", auth(tok), "", 404, protocol.CodeNotFound, false},

		// UNSUPPORTED_PROTOCOL_VERSION 400.
		{"version 2.0", "GET", "/v1/protocol", auth(tok, "AgenticDriver-Version", "2.0"), "", 400, protocol.CodeUnsupportedProtocolVersion, false},
		{"version 1", "GET", "/v1/providers", auth(tok, "AgenticDriver-Version", "1"), "", 400, protocol.CodeUnsupportedProtocolVersion, false},
		{"version empty", "POST", "/v1/runs", jsonPost(tok, "AgenticDriver-Version", ""), validRun, 400, protocol.CodeUnsupportedProtocolVersion, false},
		{"version twice", "GET", "/v1/protocol", auth(tok, "AgenticDriver-Version", "1.0", "AgenticDriver-Version", "1.0"), "", 400, protocol.CodeUnsupportedProtocolVersion, false},
		{"version 1.0", "GET", "/v1/protocol", auth(tok, "AgenticDriver-Version", "1.0"), "", 200, "", false},

		// INVALID_REQUEST 400: content type, encoding, JSON, UTF-8, schema.
		{"no content type", "POST", "/v1/runs", auth(tok), validRun, 400, protocol.CodeInvalidRequest, false},
		{"text/plain", "POST", "/v1/runs", auth(tok, "Content-Type", "text/plain"), validRun, 400, protocol.CodeInvalidRequest, false},
		{"application/jsonx", "POST", "/v1/runs", auth(tok, "Content-Type", "application/jsonx"), validRun, 400, protocol.CodeInvalidRequest, false},
		{"json with charset", "POST", "/v1/runs", auth(tok, "Content-Type", "application/json ; charset=utf-8"), validRun, 200, "", false},
		{"json upper case", "POST", "/v1/runs", auth(tok, "Content-Type", "Application/JSON"), validRun, 200, "", false},
		{"gzip", "POST", "/v1/runs", jsonPost(tok, "Content-Encoding", "gzip"), validRun, 400, protocol.CodeInvalidRequest, false},
		{"identity", "POST", "/v1/runs", jsonPost(tok, "Content-Encoding", "identity"), validRun, 200, "", false},
		{"bad JSON", "POST", "/v1/runs", jsonPost(tok), `{"provider":`, 400, protocol.CodeInvalidRequest, false},
		{"empty body", "POST", "/v1/runs", jsonPost(tok), ``, 400, protocol.CodeInvalidRequest, false},
		{"array", "POST", "/v1/runs", jsonPost(tok), `[]`, 400, protocol.CodeInvalidRequest, false},
		{"invalid UTF-8", "POST", "/v1/runs", jsonPost(tok), `{"provider":"fixture","model":"fixture-model","input":"a` + "\xff\xfe" + `"}`, 400, protocol.CodeInvalidRequest, false},
		{"unknown field", "POST", "/v1/runs", jsonPost(tok), run(`"bogus":1`), 400, protocol.CodeInvalidRequest, false},
		{"field case", "POST", "/v1/runs", jsonPost(tok), `{"Provider":"fixture","model":"fixture-model","input":"x"}`, 400, protocol.CodeInvalidRequest, false},
		{"messages field", "POST", "/v1/runs", jsonPost(tok), run(`"messages":[]`), 400, protocol.CodeInvalidRequest, false},
		{"null optional", "POST", "/v1/runs", jsonPost(tok), run(`"maxSteps":null`), 400, protocol.CodeInvalidRequest, false},
		{"fractional", "POST", "/v1/runs", jsonPost(tok), run(`"maxSteps":8.5`), 400, protocol.CodeInvalidRequest, false},
		{"maxSteps 65", "POST", "/v1/runs", jsonPost(tok), run(`"maxSteps":65`), 400, protocol.CodeInvalidRequest, false},
		{"duplicate tools", "POST", "/v1/runs", jsonPost(tok), run(`"tools":["conformance_lookup","conformance_lookup"]`), 400, protocol.CodeInvalidRequest, false},
		{"applicationTools (not implemented)", "POST", "/v1/runs", jsonPost(tok), run(`"applicationTools":[]`), 400, protocol.CodeInvalidRequest, false},
		{"attachments not an array", "POST", "/v1/runs", jsonPost(tok), run(`"attachments":{}`), 400, protocol.CodeInvalidRequest, false},

		// Semantic validation (§3.3), before authorization.
		{"unknown provider", "POST", "/v1/runs", jsonPost(tok), `{"provider":"nope","model":"fixture-model","input":"x"}`, 400, protocol.CodeUnknownProvider, false},
		{"unknown provider, no grant", "POST", "/v1/runs", jsonPost(other), `{"provider":"nope","model":"fixture-model","input":"x"}`, 400, protocol.CodeUnknownProvider, false},
		{"model outside allowlist", "POST", "/v1/runs", jsonPost(tok), `{"provider":"fixture","model":"other-model","input":"x"}`, 400, protocol.CodeUnsupportedModel, false},
		{"model outside allowlist, no grant", "POST", "/v1/runs", jsonPost(other), `{"provider":"fixture","model":"other-model","input":"x"}`, 400, protocol.CodeUnsupportedModel, false},
		{"capability missing", "POST", "/v1/runs", jsonPost(tok), run(`"requiredCapabilities":["tools","images"]`), 400, protocol.CodeUnsupportedCapability, false},
		{"capability unknown", "POST", "/v1/runs", jsonPost(tok), run(`"requiredCapabilities":["teleportation"]`), 400, protocol.CodeUnsupportedCapability, false},
		{"capabilities present", "POST", "/v1/runs", jsonPost(tok), run(`"requiredCapabilities":["tools","textStreaming"]`), 200, "", false},
		{"retries without safeRetries", "POST", "/v1/runs", jsonPost(tok), run(`"retry":{"maxAttempts":2}`), 400, protocol.CodeUnsupportedCapability, false},
		{"unknown tool", "POST", "/v1/runs", jsonPost(tok), run(`"tools":["no_such_tool"]`), 400, protocol.CodeUnknownTool, false},
		{"schema does not compile", "POST", "/v1/runs", jsonPost(tok), run(`"outputSchema":{"type":12}`), 400, protocol.CodeInvalidSchema, false},
		{"schema external ref", "POST", "/v1/runs", jsonPost(tok), run(`"outputSchema":{"$ref":"https://example.com/schema.json"}`), 400, protocol.CodeInvalidSchema, false},
		{"schema unknown dialect", "POST", "/v1/runs", jsonPost(tok), run(`"outputSchema":{"$schema":"https://example.com/my-meta-schema","type":"object"}`), 400, protocol.CodeInvalidSchema, false},
		{"idempotency without store", "POST", "/v1/runs", jsonPost(tok), run(`"idempotencyKey":"k-1"`), 400, protocol.CodeIdempotencyUnavailable, false},

		// FORBIDDEN 403: authorization after validation.
		{"provider not granted", "POST", "/v1/runs", jsonPost(other), validRun, 403, protocol.CodeForbidden, false},
		{"tool not granted", "POST", "/v1/runs", jsonPost(notool), run(`"tools":["conformance_lookup"]`), 403, protocol.CodeForbidden, false},
		{"providers filtered", "GET", "/v1/providers", auth(other), "", 200, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			modes := []string{"application/json"}
			if tc.method == "POST" && tc.path == "/v1/runs" {
				// §7.3: before the first event an SSE request gets the
				// same HTTP error.
				modes = append(modes, "text/event-stream")
			}
			for _, accept := range modes {
				h := tc.hdr.Clone()
				if h == nil {
					h = http.Header{}
				}
				h.Set("Accept", accept)
				resp, body := callRaw(t, tc.method, srv.URL+tc.path, h, tc.body)
				if tc.code == "" {
					if resp.StatusCode != tc.status {
						t.Errorf("Accept %s: status %d, want %d: %s", accept, resp.StatusCode, tc.status, body)
					}
					continue
				}
				checkErrorResponse(t, resp, body, tc.status, tc.code, tc.retryable)
				if tc.code == protocol.CodeOriginDenied && resp.Header.Get("Access-Control-Allow-Origin") != "" {
					t.Error("ORIGIN_DENIED response carries Access-Control-Allow-Origin")
				}
			}
		})
	}

	t.Run("providers without grant", func(t *testing.T) {
		ps, err := newRunClient(t, srv, other).Providers(t.Context(), false)
		if err != nil || len(ps) != 0 {
			t.Errorf("providers for a token without grants: %+v, %v", ps, err)
		}
	})

	t.Run("HEAD", func(t *testing.T) {
		// HEAD is never a route; its response has no body to check.
		for _, h := range []http.Header{nil, auth(tok)} {
			resp, _ := callRaw(t, "HEAD", srv.URL+"/v1/protocol", h, "")
			want := 401
			if h != nil {
				want = 404
			}
			if resp.StatusCode != want {
				t.Errorf("HEAD with auth=%v: %d, want %d", h != nil, resp.StatusCode, want)
			}
		}
	})

	// BODY_TOO_LARGE 413, over raw TCP so that what is sent is exact.
	t.Run("body at the limit", func(t *testing.T) {
		body := validRun + strings.Repeat(" ", 1_000_000-len(validRun))
		resp, b := callRaw(t, "POST", srv.URL+"/v1/runs", jsonPost(tok), body)
		if resp.StatusCode != 200 {
			t.Errorf("1,000,000-byte body: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("content-length over the limit", func(t *testing.T) {
		// Only the headers are sent: the host must answer without
		// waiting for the body.
		resp, body := rawTCP(t, srv.URL, tok, "Content-Length: 1000001\r\n", nil)
		checkErrorResponse(t, resp, body, 413, protocol.CodeBodyTooLarge, false)
	})
	t.Run("chunked over the limit", func(t *testing.T) {
		payload := []byte(validRun + strings.Repeat(" ", 1_000_001-len(validRun)))
		resp, body := rawTCP(t, srv.URL, tok, "Transfer-Encoding: chunked\r\n", payload)
		checkErrorResponse(t, resp, body, 413, protocol.CodeBodyTooLarge, false)
	})

	// Failures after run.started: HTTP errors in JSON mode (status from
	// §7.2), terminal events in SSE mode.
	c := newRunClient(t, srv, tok)
	for _, tc := range []struct {
		name      string
		req       *protocol.RunRequest
		status    int
		code      protocol.Code
		retryable bool
		terminal  string
		check     func(t *testing.T, evs []client.Event)
	}{
		{
			name: "INVALID_OUTPUT", status: 502, code: protocol.CodeInvalidOutput, terminal: client.EventRunFailed,
			req: withSchema(runRequest("conformance:text"), `{"type":"object"}`),
			check: func(t *testing.T, evs []client.Event) {
				// The text already streamed stays; never run.completed.
				if deltaText(evs) != "Hello fixture" {
					t.Errorf("deltas %q", deltaText(evs))
				}
			},
		},
		{
			name: "PROVIDER_FAILED", status: 502, code: protocol.CodeProviderFailed, terminal: client.EventRunFailed,
			req: runRequest("conformance:private-error"),
		},
		{
			name: "STEP_LIMIT", status: 502, code: protocol.CodeStepLimit, terminal: client.EventRunFailed,
			req: withTools(withMaxSteps(runRequest("conformance:tools"), 1), lookupTool),
			check: func(t *testing.T, evs []client.Event) {
				if n := countType(evs, client.EventToolCalled); n != 0 {
					t.Errorf("%d tool.called: the calls of the last step must not run", n)
				}
			},
		},
		{
			// The fixture reports progress once and then waits: only the
			// inactivity timer can end the run.
			name: "IDLE_TIMEOUT", status: 504, code: protocol.CodeIdleTimeout, retryable: true, terminal: client.EventRunCancelled,
			req: withIdle(runRequest("conformance:cancel"), 1000),
			check: func(t *testing.T, evs []client.Event) {
				if countType(evs, client.EventRunProgress) == 0 {
					t.Error("no run.progress before the idle timeout")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("json", func(t *testing.T) {
				_, err := c.Run(t.Context(), tc.req)
				checkClientError(t, err, tc.code, tc.status, tc.retryable)
				// The raw body has the §7.1 shape too.
				resp, body := postRaw(t, srv.URL, tok, mustJSON(t, tc.req), nil)
				checkErrorResponse(t, resp, body, tc.status, tc.code, tc.retryable)
			})
			t.Run("sse", func(t *testing.T) {
				var evs []client.Event
				_, err := c.Stream(t.Context(), tc.req, func(ev client.Event) error {
					evs = append(evs, ev)
					return nil
				})
				checkClientError(t, err, tc.code, 0, tc.retryable)
				if len(evs) == 0 {
					t.Fatal("no events")
				}
				checkGrammar(t, evs, tc.terminal)
				if last := evs[len(evs)-1]; last.Error == nil || last.Error.Code != tc.code || last.Error.Outcome != "" {
					t.Errorf("terminal %s", last.Raw)
				}
				if tc.check != nil {
					tc.check(t, evs)
				}
			})
		})
	}
	logs := srv.stderr.settled()
	for _, m := range []string{secretMarker, tok, other, notool} {
		if strings.Contains(logs, m) {
			t.Errorf("the host's log contains %.12q…", m)
		}
	}
}

// TestErrorMatrixUnsupportedTools needs a provider whose manifest declares
// tools = false. No shipped extension does, so the test re-embeds the
// fixture's module with a copy of its manifest that says so (the same
// id@version: the guest's info still matches) and serves only that.
func TestErrorMatrixUnsupportedTools(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	fx := s.plugins["fixture"]
	wasm, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(testenv.RepoRoot(t) + "/manifests/fixture.toml")
	if err != nil {
		t.Fatal(err)
	}
	noTools := bytes.Replace(orig, []byte("\ntools = true\n"), []byte("\ntools = false\n"), 1)
	if bytes.Equal(noTools, orig) {
		t.Fatal("manifests/fixture.toml has no `tools = true` line to flip")
	}
	mod := reembedManifest(t, wasm, orig, noTools)
	if err := os.WriteFile(fx.path, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte(fx.digest), []byte(digestOf(t, fx.path)), 1)
	if err := os.WriteFile(s.config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, s)

	ps, err := newRunClient(t, srv, s.token).Providers(t.Context(), false)
	if err != nil || len(ps) != 1 || ps[0].Capabilities["tools"] {
		t.Fatalf("providers = %+v, %v; want fixture with tools:false", ps, err)
	}
	for _, accept := range []string{"application/json", "text/event-stream"} {
		for _, body := range []string{
			`{"provider":"fixture","model":"fixture-model","input":"conformance:tools","tools":["conformance_lookup"]}`,
			// §3.3: the tools capability (13) is checked before the
			// tool names (20).
			`{"provider":"fixture","model":"fixture-model","input":"x","tools":["no_such_tool"]}`,
		} {
			resp, raw := postRaw(t, srv.URL, s.token, body, map[string]string{"Accept": accept})
			checkErrorResponse(t, resp, raw, 400, protocol.CodeUnsupportedTools, false)
		}
		resp, raw := postRaw(t, srv.URL, s.token, `{"provider":"fixture","model":"fixture-model","input":"x","requiredCapabilities":["tools"]}`, map[string]string{"Accept": accept})
		checkErrorResponse(t, resp, raw, 400, protocol.CodeUnsupportedCapability, false)
	}
}

// TestErrorMatrixLifecycle covers what needs its own host configuration or
// ends the host: APPROVAL_REQUIRED (a tool marked requires_approval with no
// approval source fails closed), BUSY with max_concurrent_runs_per_subject
// lowered to 1 (and the slot freed by a cancelled run), and SIGTERM with a
// run open (run.cancelled CANCELLED, HOST_SHUTTING_DOWN for a request that
// reaches admission after shutdown began, exit 0). It also checks that a
// JSON client's disconnect cancels its run and frees the slot.
func TestErrorMatrixLifecycle(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	editSiteConfig(t, s, `names = ["conformance_lookup"]`, `names = ["conformance_lookup"]`+"\n"+`requires_approval = ["conformance_lookup"]`)
	appendSiteConfig(t, s, "[limits]\nmax_concurrent_runs_per_subject = 1\n")
	busyTok := addSiteToken(t, s, "busy", "busy-user", []string{fixtureProvider}, nil)
	srv := startServer(t, s)
	c := newRunClient(t, srv, s.token)
	busy := newRunClient(t, srv, busyTok)

	t.Run("APPROVAL_REQUIRED", func(t *testing.T) {
		req := withTools(runRequest("conformance:tools"), lookupTool)
		_, err := c.Run(t.Context(), req)
		checkClientError(t, err, protocol.CodeApprovalRequired, 403, false)
		var evs []client.Event
		_, err = c.Stream(t.Context(), req, func(ev client.Event) error {
			evs = append(evs, ev)
			return nil
		})
		checkClientError(t, err, protocol.CodeApprovalRequired, 0, false)
		if n := countType(evs, client.EventToolCompleted); n != 0 {
			t.Errorf("%d tool.completed for a tool that needs approval", n)
		}
		if len(evs) > 0 {
			checkGrammar(t, evs, client.EventRunFailed)
			if last := evs[len(evs)-1]; last.Error == nil || last.Error.Outcome != "" {
				t.Errorf("terminal %s: the tool never ran, so the outcome is certain", last.Raw)
			}
		}
	})

	t.Run("BUSY", func(t *testing.T) {
		h := holdRun(t, busy)
		// The subject's only slot is taken: BUSY, before any stream.
		for _, accept := range []string{"application/json", "text/event-stream"} {
			resp, body := postRaw(t, srv.URL, busyTok, validRun, map[string]string{"Accept": accept})
			checkErrorResponse(t, resp, body, 429, protocol.CodeBusy, true)
		}
		_, err := busy.Run(t.Context(), runRequest("conformance:text"))
		checkClientError(t, err, protocol.CodeBusy, 429, true)
		// Another subject is not affected.
		if _, err := c.Run(t.Context(), runRequest("conformance:text")); err != nil {
			t.Errorf("another subject: %v", err)
		}
		// Closing the stream cancels the run and frees the slot: once its
		// usage record exists (written after the slot was released) the
		// subject can run again at the first attempt.
		runID := h.stop(t)
		if rec := waitUsageRecord(t, s, runID); rec["status"] != "cancelled" {
			t.Errorf("usage record status %v, want cancelled", rec["status"])
		}
		if res, err := busy.Run(t.Context(), runRequest("conformance:text")); err != nil || res.Text != "Hello fixture" {
			t.Errorf("run after the slot was freed: %v, %v", res, err)
		}
	})

	t.Run("JSON disconnect", func(t *testing.T) {
		// §13: closing the connection before a JSON response cancels the
		// run and frees its slot at once. J, a JSON conformance:cancel run,
		// holds the busy subject's only slot once a probe run from the
		// same subject is refused; a probe that got in first just runs,
		// and J, refused meanwhile, is sent again.
		seen := map[any]bool{}
		for _, rec := range usageRecords(t, s) {
			seen[rec["runId"]] = true
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		jdone := make(chan error, 1)
		sendJ := func() {
			go func() {
				_, err := busy.Run(ctx, runRequest("conformance:cancel"))
				jdone <- err
			}()
		}
		sendJ()
		for {
			_, err := busy.Run(t.Context(), runRequest("conformance:text"))
			if client.CodeOf(err) == protocol.CodeBusy {
				break
			}
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			select {
			case err := <-jdone:
				if client.CodeOf(err) != protocol.CodeBusy {
					t.Fatalf("J ended on its own: %v", err)
				}
				sendJ()
			default:
			}
		}
		cancel()
		if err := <-jdone; !errors.Is(err, context.Canceled) {
			t.Fatalf("J after the disconnect: %v", err)
		}
		rec := waitUsage(t, s, func(rec map[string]any) bool {
			return !seen[rec["runId"]] && rec["subject"] == "busy-user" && rec["status"] == "cancelled"
		})
		t.Logf("run %v cancelled by the disconnect", rec["runId"])
		if res, err := busy.Run(t.Context(), runRequest("conformance:text")); err != nil || res.Text != "Hello fixture" {
			t.Errorf("run after the disconnect: %v, %v", res, err)
		}
	})

	t.Run("SIGTERM", func(t *testing.T) {
		// A run open on a stream, and a second request that passed the
		// pipeline's state check and is blocked sending its body
		// (Expect: 100-continue tells when the host started reading it).
		h := holdRun(t, c)
		pr, pw := io.Pipe()
		defer pw.Close()
		got100 := make(chan struct{})
		tr := &http.Transport{ExpectContinueTimeout: time.Minute}
		defer tr.CloseIdleConnections()
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{Got100Continue: func() { close(got100) }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/runs", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+busyTok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		type result struct {
			resp *http.Response
			body []byte
			err  error
		}
		late := make(chan result, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				late <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			late <- result{resp, b, err}
		}()
		select {
		case <-got100:
		case r := <-late:
			t.Fatalf("request ended before the host read its body: %+v", r)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}

		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The open run ends with run.cancelled CANCELLED (the host
		// cancels running foreground runs with a terminal event).
		term := h.terminal(t)
		if term.Type != client.EventRunCancelled || term.Error == nil || term.Error.Code != protocol.CodeCancelled || term.Error.Retryable {
			t.Errorf("open run ended with %s, want run.cancelled CANCELLED", term.Raw)
		}
		// Shutdown had begun before that event: the blocked request now
		// reaches admission and is refused.
		if _, err := pw.Write([]byte(validRun)); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		r := <-late
		if r.err != nil {
			t.Fatalf("late request: %v", r.err)
		}
		checkErrorResponse(t, r.resp, r.body, 503, protocol.CodeHostShuttingDown, true)

		select {
		case <-srv.done:
		case <-time.After(time.Minute):
			t.Fatalf("adhost serve did not exit after SIGTERM:\n%s", srv.stderr)
		}
		if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0:\n%s", code, srv.stderr)
		}
		// The usage of the cancelled run was flushed before exit.
		if rec := waitUsageRecord(t, s, term.RunID); rec["status"] != "cancelled" {
			t.Errorf("usage record status %v, want cancelled", rec["status"])
		}
	})
}

// heldRun is a conformance:cancel run open on an SSE stream.
type heldRun struct {
	runID  string
	cancel context.CancelFunc
	events chan client.Event // every event after the first run.progress
	done   chan error
}

// holdRun starts a conformance:cancel stream and returns once its first
// run.progress arrived (the fixture then waits until cancelled).
func holdRun(t *testing.T, c *client.Client) *heldRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &heldRun{cancel: cancel, events: make(chan client.Event, 16), done: make(chan error, 1)}
	progressed := make(chan string, 1)
	go func() {
		seen := false
		_, err := c.Stream(ctx, runRequest("conformance:cancel"), func(ev client.Event) error {
			if seen {
				h.events <- ev
			} else if ev.Type == client.EventRunProgress {
				seen = true
				progressed <- ev.RunID
			}
			return nil
		})
		h.done <- err
	}()
	t.Cleanup(cancel)
	select {
	case h.runID = <-progressed:
		return h
	case err := <-h.done:
		t.Fatalf("held run ended before its first run.progress: %v", err)
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	return nil
}

// stop closes the stream (the client's cancellation) and returns the run id.
func (h *heldRun) stop(t *testing.T) string {
	t.Helper()
	h.cancel()
	<-h.done
	return h.runID
}

// terminal waits for the run's terminal event, sent by the host.
func (h *heldRun) terminal(t *testing.T) client.Event {
	t.Helper()
	for {
		select {
		case ev := <-h.events:
			if ev.Terminal() {
				<-h.done
				return ev
			}
		case err := <-h.done:
			// Stream returned; its callback queued every event before
			// that, and select may pick done first: drain the queue.
			for {
				select {
				case ev := <-h.events:
					if ev.Terminal() {
						return ev
					}
				default:
					t.Fatalf("stream ended without a terminal event: %v", err)
				}
			}
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// checkClientError checks a *client.Error's code, HTTP status (0: from a
// stream) and retryable flag.
func checkClientError(t *testing.T, err error, code protocol.Code, status int, retryable bool) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want %s", err, code)
	}
	if ce.Code != code || ce.Status != status || ce.Retryable != retryable {
		t.Errorf("error %v (retryable %v), want %s status %d retryable %v", err, ce.Retryable, code, status, retryable)
	}
}

// callRaw sends one request with exactly the given headers.
func callRaw(t *testing.T, method, rawURL string, h http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		req.Header = h
	}
	return doRaw(t, req)
}

// rawTCP writes a POST /v1/runs with the extra header lines and, when body
// is not nil, a chunked body (in 64 KiB chunks, concurrently with reading
// the answer), then reads one response.
func rawTCP(t *testing.T, baseURL, token, extra string, body []byte) (*http.Response, []byte) {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	head := "POST /v1/runs HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + token +
		"\r\nContent-Type: application/json\r\nConnection: close\r\n" + extra + "\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		go func() {
			// Errors are expected once the host stopped reading.
			for len(body) > 0 {
				n := min(len(body), 64<<10)
				if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", n, body[:n]); err != nil {
					return
				}
				body = body[n:]
			}
			io.WriteString(conn, "0\r\n\r\n")
		}()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, b
}

// reembedManifest replaces the manifest section testenv appended to a
// module: Embed appends one custom section at the end, so the raw module is
// the prefix that re-embedding orig reproduces exactly.
func reembedManifest(t *testing.T, mod, orig, repl []byte) []byte {
	t.Helper()
	empty := []byte("\x00asm\x01\x00\x00\x00")
	withOrig, err := manifest.Embed(empty, orig)
	if err != nil {
		t.Fatal(err)
	}
	section := len(withOrig) - len(empty)
	if section <= 0 || section >= len(mod) {
		t.Fatal("module shorter than its manifest section")
	}
	raw := mod[:len(mod)-section]
	if again, err := manifest.Embed(raw, orig); err != nil || !bytes.Equal(again, mod) {
		t.Fatalf("the module does not end with the manifest section testenv embeds (%v)", err)
	}
	out, err := manifest.Embed(raw, repl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// editSiteConfig replaces old with repl in the site's host.toml (exactly
// once).
func editSiteConfig(t *testing.T, s *site, old, repl string) {
	t.Helper()
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("host.toml has %d occurrences of %q, want 1", n, old)
	}
	if err := os.WriteFile(s.config, []byte(strings.Replace(string(b), old, repl, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func withSchema(r *protocol.RunRequest, schema string) *protocol.RunRequest {
	r.OutputSchema = json.RawMessage(schema)
	return r
}

func withTools(r *protocol.RunRequest, tools ...string) *protocol.RunRequest {
	r.Tools = tools
	return r
}

func withMaxSteps(r *protocol.RunRequest, n int) *protocol.RunRequest {
	r.MaxSteps = &n
	return r
}

func withIdle(r *protocol.RunRequest, ms int64) *protocol.RunRequest {
	r.IdleTimeoutMs = &ms
	return r
}
