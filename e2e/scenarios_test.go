package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"adhost/abi/sse"
	"adhost/client"
	"adhost/runtime/protocol"
)

// The conformance scenarios of wire-core §16, driven through the real
// binary (`adhost serve` with the fixture and conformance-tools extensions)
// by the Go client, in JSON mode and in SSE mode.

const (
	fixtureProvider = "fixture"
	fixtureModel    = "fixture-model"
	lookupTool      = "conformance_lookup"
	// secretMarker is what conformance:private-error puts in its private
	// error; stateMarker is conformance:native's private state.
	secretMarker = "conformance-secret-marker"
	stateMarker  = "private-state-marker"
)

// coreFeatures is what /v1/protocol must advertise for the test site, in
// upstream order: the seven core features and the always-on context
// features (no other extension is configured there).
var coreFeatures = []string{
	"json-results", "event-stream", "cancel-on-disconnect",
	"optional-idle-timeout", "required-capabilities", "optional-events",
	"provider-discovery", "context-inputs", "draft-artifacts",
}

// structuredSchema requires exactly {"ok": true}.
const structuredSchema = `{"type":"object","properties":{"ok":{"const":true}},"required":["ok"],"additionalProperties":false}`

func TestConformanceScenarios(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	srv := startServer(t, s)
	c := newRunClient(t, srv, s.token)

	t.Run("protocol", func(t *testing.T) {
		info, err := c.Protocol(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Features, coreFeatures) {
			t.Errorf("features = %q, want exactly %q", info.Features, coreFeatures)
		}
		if info.Protocol != "agenticdriver" || info.Version != "1.0" || !slices.Equal(info.SupportedVersions, []string{"1.0"}) {
			t.Errorf("protocol document = %+v", info)
		}
	})

	t.Run("providers", func(t *testing.T) {
		for _, refresh := range []bool{false, true} {
			ps, err := c.Providers(t.Context(), refresh)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 || ps[0].ID != fixtureProvider {
				t.Fatalf("providers(refresh=%v) = %+v, want only %s", refresh, ps, fixtureProvider)
			}
			p := ps[0]
			if p.Vendor != "adhost" || p.AuthMode != "none" || !p.Capabilities["tools"] || !p.Capabilities["textStreaming"] {
				t.Errorf("entry = %+v (vendor, authMode, capabilities come from manifests/fixture.toml)", p)
			}
			if !slices.Equal(p.Models, []string{fixtureModel}) {
				t.Errorf("models = %q, want the host.toml allowlist", p.Models)
			}
			if p.Health == nil || p.Health.Status != "ready" || p.Health.Code != "CATALOG_AVAILABLE" || p.Health.CheckedAt.IsZero() {
				t.Errorf("health = %+v, want ready/CATALOG_AVAILABLE", p.Health)
			}
			want := &client.ModelCatalog{Source: "provider", Models: []string{fixtureModel}, Complete: true}
			if !reflect.DeepEqual(p.ModelCatalog, want) {
				t.Errorf("modelCatalog = %+v, want the probe's %+v", p.ModelCatalog, want)
			}
		}
	})

	t.Run("text", func(t *testing.T) {
		req := runRequest("conformance:text")
		forModes(t, c, req, func(t *testing.T, res *protocol.RunResult, evs []client.Event) {
			if res.Text != "Hello fixture" {
				t.Errorf("text = %q, want %q", res.Text, "Hello fixture")
			}
			if u := mustJSON(t, res.Usage); u != "{}" {
				t.Errorf("usage = %s, want {}", u)
			}
			if res.Steps != 1 || res.FinishReason != "stop" || res.Output != nil {
				t.Errorf("steps %d, finishReason %q, output %s", res.Steps, res.FinishReason, res.Output)
			}
			if evs == nil {
				return
			}
			if got := deltaText(evs); got != res.Text {
				t.Errorf("concatenated text.delta = %q, want the result text %q", got, res.Text)
			}
			if n := countType(evs, client.EventUsageReported); n != 0 {
				t.Errorf("%d usage.reported events for a turn without usage", n)
			}
			checkGrammar(t, evs, client.EventRunCompleted)
		})
		t.Run("sse-framing", func(t *testing.T) {
			// §1.7 and §5.6 as written on the wire: headers, and one
			// frame per event with id = sequence, event = type and one
			// compact data line.
			resp, raw := postRaw(t, srv.URL, s.token, mustJSON(t, req), map[string]string{"Accept": "text/event-stream"})
			for k, want := range map[string]string{
				"Content-Type":          "text/event-stream; charset=utf-8",
				"X-Accel-Buffering":     "no",
				"Cache-Control":         "no-store",
				"AgenticDriver-Version": "1.0",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			for i, f := range parseFrames(t, raw) {
				if f.ID != fmt.Sprint(i+1) || f.Sequence != int64(i+1) {
					t.Errorf("frame %d: id %q, sequence %d", i+1, f.ID, f.Sequence)
				}
			}
			for _, block := range strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n") {
				lines := strings.Split(block, "\n")
				if len(lines) != 3 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "event: ") || !strings.HasPrefix(lines[2], "data: {") {
					t.Errorf("frame %q is not id/event/data with LF line ends", block)
				}
			}
		})
	})

	t.Run("structured", func(t *testing.T) {
		req := runRequest("conformance:structured")
		req.OutputSchema = json.RawMessage(structuredSchema)
		forModes(t, c, req, func(t *testing.T, res *protocol.RunResult, evs []client.Event) {
			if res.Text != `{"ok":true}` {
				t.Errorf("text = %q", res.Text)
			}
			if !jsonEqual(res.Output, []byte(`{"ok":true}`)) {
				t.Errorf("output = %s, want {\"ok\":true}", res.Output)
			}
			if evs != nil {
				checkGrammar(t, evs, client.EventRunCompleted)
			}
		})
	})

	t.Run("tools", func(t *testing.T) {
		req := runRequest("conformance:tools")
		req.Tools = []string{lookupTool}
		forModes(t, c, req, func(t *testing.T, res *protocol.RunResult, evs []client.Event) {
			if res.Text != "tool receipt: 7" {
				t.Errorf("text = %q, want %q", res.Text, "tool receipt: 7")
			}
			// One tool round: step 1 calls the tool, step 2 answers.
			if res.Steps != 2 {
				t.Errorf("steps = %d, want 2", res.Steps)
			}
			if evs == nil {
				return
			}
			checkGrammar(t, evs, client.EventRunCompleted)
			var called, completed []client.Event
			for _, ev := range evs {
				switch ev.Type {
				case client.EventToolCalled:
					called = append(called, ev)
				case client.EventToolCompleted:
					completed = append(completed, ev)
				}
			}
			if len(called) != 1 || len(completed) != 1 {
				t.Fatalf("tool.called ×%d, tool.completed ×%d: the host tool must run exactly once", len(called), len(completed))
			}
			call := called[0].Call
			if call.Name != lookupTool || !jsonEqual(call.Arguments, []byte(`{"value":7}`)) {
				t.Errorf("tool.called = %+v", call)
			}
			if completed[0].CallID != call.ID || !jsonEqual(completed[0].Output, []byte(`{"receipt":7}`)) {
				t.Errorf("tool.completed callId %q output %s, want %q {\"receipt\":7}", completed[0].CallID, completed[0].Output, call.ID)
			}
			if called[0].Sequence > completed[0].Sequence {
				t.Error("tool.completed before tool.called")
			}
		})
	})

	t.Run("private-error", func(t *testing.T) {
		body := mustJSON(t, runRequest("conformance:private-error"))
		// JSON: an HTTP error with the fixed public message.
		resp, raw := postRaw(t, srv.URL, s.token, body, nil)
		info := checkErrorResponse(t, resp, raw, http.StatusBadGateway, protocol.CodeProviderFailed, false)
		if bytes.Contains(raw, []byte(secretMarker)) {
			t.Errorf("the private marker reached the JSON error body: %s", raw)
		}
		if info.Message == "" {
			t.Error("empty message")
		}
		// SSE: run.failed, and the marker is nowhere in the stream bytes.
		resp, raw = postRaw(t, srv.URL, s.token, body, map[string]string{"Accept": "text/event-stream"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("SSE status %d: %s", resp.StatusCode, raw)
		}
		last := lastFrame(t, raw)
		if last.Type != "run.failed" || last.Error == nil || last.Error.Code != protocol.CodeProviderFailed {
			t.Errorf("last event = %s, want run.failed PROVIDER_FAILED", last.Data)
		}
		if bytes.Contains(raw, []byte(secretMarker)) {
			t.Errorf("the private marker reached the event stream:\n%s", raw)
		}
		// And the client reports the code in both modes.
		req := runRequest("conformance:private-error")
		if _, err := c.Run(t.Context(), req); client.CodeOf(err) != protocol.CodeProviderFailed || statusOf(err) != http.StatusBadGateway {
			t.Errorf("client.Run: %v, want PROVIDER_FAILED (HTTP 502)", err)
		}
		if _, err := c.Stream(t.Context(), req, nil); client.CodeOf(err) != protocol.CodeProviderFailed {
			t.Errorf("client.Stream: %v, want PROVIDER_FAILED", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// Only SSE can see the first run.progress, the moment §16 cancels
		// at; cancelling the client context closes the connection, which
		// is the client's cancellation mechanism (§13).
		runID := cancelOnFirstProgress(t, c, runRequest("conformance:cancel"))
		// The run's usage record is written after the run ended and freed
		// its slot: the host observed the disconnect.
		rec := waitUsageRecord(t, s, runID)
		if rec["status"] != "cancelled" {
			t.Errorf("usage record of the cancelled run: status %v, want cancelled", rec["status"])
		}
		if res, err := c.Run(t.Context(), runRequest("conformance:text")); err != nil || res.Text != "Hello fixture" {
			t.Errorf("run after the cancel: %v, %v", res, err)
		}
	})

	t.Run("native", func(t *testing.T) {
		// The fixture declares nativeContinuation, but the host does not
		// implement conversation-sessions (not advertised), so the
		// two-run session scenario of §16 cannot run. What a plain run
		// must still do: show the visible reply and never the private
		// state the adapter returned with it.
		info, err := c.Protocol(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.HasFeature("conversation-sessions") {
			t.Fatal("conversation-sessions is advertised: this test must drive the native session scenario")
		}
		body := mustJSON(t, runRequest("conformance:native"))
		for _, accept := range []string{"application/json", "text/event-stream"} {
			resp, raw := postRaw(t, srv.URL, s.token, body, map[string]string{"Accept": accept})
			if resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte(`"first visible reply"`)) {
				t.Errorf("%s: status %d body %s", accept, resp.StatusCode, raw)
			}
			if bytes.Contains(raw, []byte(stateMarker)) {
				t.Errorf("%s: the private native state reached the client:\n%s", accept, raw)
			}
		}
		// Without a session nothing carries the state to the follow-up,
		// and the fixture says so.
		if _, err := c.Run(t.Context(), runRequest("conformance:native-followup")); client.CodeOf(err) != protocol.CodeProviderFailed {
			t.Errorf("follow-up without a session: %v, want PROVIDER_FAILED", err)
		}
		t.Log("native session round-trip (conformance:native → native-followup in one session) skipped: conversation-sessions is not implemented")
	})

	// Nothing private reached the log either. (stdout carries only the
	// "listening on" line; the logger writes to stderr.)
	log := srv.stderr.settled()
	for _, m := range []string{secretMarker, stateMarker, s.token} {
		if strings.Contains(log, m) {
			t.Errorf("the host's log contains %q", m)
		}
	}
}

// --- helpers shared by scenarios_test.go, errmatrix_test.go and
// cli_run_test.go (H9). Private and distinctly named so they do not clash
// with the harness in e2e_test.go.

func runRequest(input string) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: fixtureProvider, Model: fixtureModel, Input: input}
}

// newRunClient returns a Go client for srv with token.
func newRunClient(t *testing.T, srv *server, token string) *client.Client {
	t.Helper()
	c, err := client.New(srv.URL, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forModes runs req in JSON mode and in SSE mode and hands each result to
// check; evs is nil for JSON and every delivered event for SSE (the client
// has already validated sequence, runId, single terminal and payloads).
func forModes(t *testing.T, c *client.Client, req *protocol.RunRequest, check func(t *testing.T, res *protocol.RunResult, evs []client.Event)) {
	t.Run("json", func(t *testing.T) {
		res, err := c.Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		check(t, res, nil)
	})
	t.Run("sse", func(t *testing.T) {
		var evs []client.Event
		res, err := c.Stream(t.Context(), req, func(ev client.Event) error {
			evs = append(evs, ev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || evs[len(evs)-1].Result != res {
			t.Fatal("the result is not the last event's")
		}
		if evs[0].RunID != res.RunID {
			t.Errorf("result runId %s, stream %s", res.RunID, evs[0].RunID)
		}
		check(t, res, evs)
	})
}

// checkGrammar checks the parts of the §5.3 grammar the client does not:
// run.started, then steps that each begin with step.started(n) numbered
// 1.., tool blocks inside steps, and the terminal type last.
func checkGrammar(t *testing.T, evs []client.Event, terminal string) {
	t.Helper()
	if evs[0].Type != client.EventRunStarted {
		t.Errorf("first event %s", evs[0].Type)
	}
	if got := evs[len(evs)-1].Type; got != terminal {
		t.Errorf("last event %s, want %s", got, terminal)
	}
	step := 0
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Type {
		case client.EventStepStarted:
			step++
			if ev.Step != step {
				t.Errorf("step.started %d, want %d", ev.Step, step)
			}
		case client.EventTextDelta, client.EventRunProgress, client.EventUsageReported,
			client.EventToolCalled, client.EventToolCompleted:
			if step == 0 && !(ev.Type == client.EventRunProgress && ev.Phase == "context") {
				t.Errorf("%s before the first step.started", ev.Type)
			}
			if ev.Type == client.EventTextDelta && ev.Text == "" {
				t.Error("empty text.delta")
			}
		default:
			t.Errorf("unexpected %s inside the run", ev.Type)
		}
	}
}

func deltaText(evs []client.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == client.EventTextDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func countType(evs []client.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// cancelOnFirstProgress streams req, cancels the client context on the
// first run.progress and returns the run's id.
func cancelOnFirstProgress(t *testing.T, c *client.Client, req *protocol.RunRequest) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var runID string
	progressed := false
	_, err := c.Stream(ctx, req, func(ev client.Event) error {
		runID = ev.RunID
		if ev.Type == client.EventRunProgress {
			progressed = true
			cancel()
		}
		if ev.Terminal() {
			return fmt.Errorf("terminal %s before the client cancelled: %s", ev.Type, ev.Raw)
		}
		return nil
	})
	if !progressed {
		t.Fatalf("no run.progress before the stream ended: %v", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stream after cancel: %v, want the context's cancellation", err)
	}
	return runID
}

// waitUsageRecord waits for the usage record of runID in the site's JSONL
// sink and returns it. The engine writes it after the run's terminal event
// and after freeing its admission slot, so its presence proves the run
// ended.
func waitUsageRecord(t *testing.T, s *site, runID string) map[string]any {
	t.Helper()
	return waitUsage(t, s, func(rec map[string]any) bool { return rec["runId"] == runID })
}

// usageRecords reads the site's usage JSONL (none yet: nil).
func usageRecords(t *testing.T, s *site) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "usage.jsonl"))
	if err != nil {
		return nil
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// waitUsage waits for a usage record that satisfies match. The file is
// polled (there is no other signal from outside the process), bounded by
// 30 s.
func waitUsage(t *testing.T, s *site, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, rec := range usageRecords(t, s) {
			if match(rec) {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no matching usage record after 30 s")
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// postRaw sends POST /v1/runs with the protocol's headers (hdr overrides or
// adds; an empty value deletes) and returns the response and its whole
// body.
func postRaw(t *testing.T, baseURL, token, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, baseURL+"/v1/runs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("AgenticDriver-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return doRaw(t, req)
}

func doRaw(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL.Path, err)
	}
	return resp, b
}

// frame is one parsed SSE event of a raw stream.
type frame struct {
	Type     string
	ID       string // the frame's id: line
	Sequence int64  // the event's sequence
	Data     []byte
	Error    *protocol.ErrorInfo
}

// parseFrames parses a raw SSE body into frames (comments skipped).
func parseFrames(t *testing.T, raw []byte) []frame {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(raw))
	var out []frame
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SSE parse: %v\n%s", err, raw)
		}
		var env struct {
			Type     string              `json:"type"`
			Sequence int64               `json:"sequence"`
			Error    *protocol.ErrorInfo `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &env); err != nil {
			t.Fatalf("event data %q: %v", ev.Data, err)
		}
		if env.Type != ev.Name {
			t.Errorf("frame event: %q but data type %q", ev.Name, env.Type)
		}
		out = append(out, frame{Type: env.Type, ID: ev.ID, Sequence: env.Sequence, Data: bytes.Clone(ev.Data), Error: env.Error})
	}
}

func lastFrame(t *testing.T, raw []byte) frame {
	t.Helper()
	fs := parseFrames(t, raw)
	if len(fs) == 0 {
		t.Fatalf("no events in %q", raw)
	}
	return fs[len(fs)-1]
}

// checkErrorResponse checks an HTTP error: status, the §1.3 headers, and
// the §7.1 body {"error":{"code","message","retryable"[,"outcome"]}} with
// nothing else, and returns the ErrorInfo.
func checkErrorResponse(t *testing.T, resp *http.Response, body []byte, status int, code protocol.Code, retryable bool) protocol.ErrorInfo {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	for k, want := range map[string]string{
		"AgenticDriver-Version":  "1.0",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		"Content-Type":           "application/json; charset=utf-8",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(body, &outer); err != nil || len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("body %s is not {\"error\":{...}}", body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(outer["error"], &inner); err != nil {
		t.Fatalf("error %s is not an object", outer["error"])
	}
	for k := range inner {
		if k != "code" && k != "message" && k != "retryable" && k != "outcome" {
			t.Errorf("unexpected error field %q in %s", k, body)
		}
	}
	var info protocol.ErrorInfo
	if err := json.Unmarshal(outer["error"], &info); err != nil {
		t.Fatalf("error %s: %v", outer["error"], err)
	}
	if info.Code != code {
		t.Errorf("code %s, want %s (body %s)", info.Code, code, body)
	}
	if info.Message == "" {
		t.Errorf("empty message in %s", body)
	}
	if _, ok := inner["retryable"]; !ok || info.Retryable != retryable {
		t.Errorf("retryable %s, want %v", inner["retryable"], retryable)
	}
	return info
}

func statusOf(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// appendSiteConfig appends TOML to the site's host.toml (newSite writes no
// [limits] or [server] table, so a test may add them).
func appendSiteConfig(t *testing.T, s *site, doc string) {
	t.Helper()
	f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + doc + "\n"); err != nil {
		t.Fatal(err)
	}
}

// addSiteToken registers another bearer token (its own subject and grants)
// in the site's host.toml, with its value in a 0600 file, and returns the
// value.
func addSiteToken(t *testing.T, s *site, id, subject string, providers, tools []string) string {
	t.Helper()
	value := strings.Repeat(id+"-token-", 1+40/(len(id)+7))
	file := filepath.Join("data", id+".token")
	if err := os.WriteFile(filepath.Join(s.dir, file), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(xs []string) string {
		q := make([]string, len(xs))
		for i, x := range xs {
			q[i] = fmt.Sprintf("%q", x)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	appendSiteConfig(t, s, fmt.Sprintf("[[tokens]]\nid = %q\nsubject = %q\nsecret = { file = %q }\nproviders = %s\ntools = %s\n",
		id, subject, file, list(providers), list(tools)))
	return value
}
