package client_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// The upstream client fixtures (wire-core §17) are served from an
// httptest server exactly as ../shared/testdata/agenticdriver/README.md
// describes, and the client's outcome is compared with the expectation.

type fixtureCase struct {
	ID         string            `json:"id"`
	Operation  string            `json:"operation"`
	RawHex     *string           `json:"rawHex"`
	Raw        *string           `json:"raw"`
	JSON       json.RawMessage   `json:"json"`
	Events     []json.RawMessage `json:"events"`
	Multiline  bool              `json:"multiline"`
	LineEnding string            `json:"lineEnding"`
	BOM        bool              `json:"bom"`
	RepeatText *struct {
		Character string
		Count     int
	} `json:"repeatText"`
	ChunkSizes           []int           `json:"chunkSizes"`
	ContentType          string          `json:"contentType"`
	Redirect             bool            `json:"redirect"`
	Cancel               bool            `json:"cancel"`
	ExpectedError        string          `json:"expectedError"`
	ExpectTransportError bool            `json:"expectTransportError"`
	Retrieval            json.RawMessage `json:"retrieval"`
	Approvals            json.RawMessage `json:"approvals"`
	ApplicationTools     json.RawMessage `json:"applicationTools"`
	Tools                []string        `json:"tools"`
	Session              json.RawMessage `json:"session"`
	SessionCreate        json.RawMessage `json:"sessionCreate"`
	SessionIdentity      json.RawMessage `json:"sessionIdentity"`
	JobSubmit            json.RawMessage `json:"jobSubmit"`
	JobIdentity          json.RawMessage `json:"jobIdentity"`
	JobEvents            json.RawMessage `json:"jobEvents"`
	Decision             json.RawMessage `json:"decision"`
	ToolResult           json.RawMessage `json:"toolResult"`
	ToolIdentity         json.RawMessage `json:"toolIdentity"`

	// versioning.json
	Headers       map[string]string `json:"headers"`
	Status        int               `json:"status"`
	ExpectedTypes []string          `json:"expectedTypes"`
	Retryable     *bool             `json:"retryable"`
}

type fixtureFile struct {
	BaseEvents []json.RawMessage `json:"baseEvents"`
	Cases      []fixtureCase     `json:"cases"`
}

const fixtureToken = "fixture-token-0123456789abcdef0123456789"

// fixtureDir locates ../shared/testdata/agenticdriver from the module root.
func fixtureDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("module root not found")
		}
		dir = parent
	}
	d := filepath.Join(dir, "..", "shared", "testdata", "agenticdriver")
	if _, err := os.Stat(filepath.Join(d, "conformance.json")); err != nil {
		t.Skipf("client fixtures not present: %v", err)
	}
	return d
}

func loadFixtures(t *testing.T, name string) fixtureFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixtureFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// isExtensionCase reports a case of an operation this test does not drive.
// Every retrieval and ingestion case runs: the stream validator checks
// result.retrieval against the run's option (client/retrieval.go).
func isExtensionCase(c *fixtureCase) bool {
	return c.Operation != "" && c.Operation != "providers" && c.Operation != "protocol" && c.Operation != "ingest" &&
		!strings.HasPrefix(c.Operation, "session-") && !strings.HasPrefix(c.Operation, "job-") &&
		c.Operation != "approval" && c.Operation != "tool-result" && c.Operation != "tool-progress"
}

// fixtureSummary is TestClientFixtures's count, printed by TestMain.
var fixtureSummary string

func TestClientFixtures(t *testing.T) {
	versioning := loadFixtures(t, "versioning.json")
	conformance := loadFixtures(t, "conformance.json")
	var passed, failed, skipped int
	run := func(group string, base []json.RawMessage, c fixtureCase) {
		t.Run(group+"/"+c.ID, func(t *testing.T) {
			if err := runFixture(t, base, &c); err != nil {
				failed++
				t.Error(err)
				return
			}
			passed++
		})
	}
	for _, c := range versioning.Cases {
		run("versioning", nil, c)
	}
	for _, c := range conformance.Cases {
		if isExtensionCase(&c) {
			skipped++
			continue
		}
		run("conformance", conformance.BaseEvents, c)
	}
	fixtureSummary = fmt.Sprintf("client-fixtures: %d passed, %d failed, %d skipped", passed, failed, skipped)
	if failed > 0 {
		t.Fatalf("client-fixtures: %d failed", failed)
	}
}

// fixtureBody renders the response body of a case (README "JSON structure").
func fixtureBody(t *testing.T, base []json.RawMessage, c *fixtureCase, versioning bool) []byte {
	t.Helper()
	switch {
	case c.RawHex != nil:
		b, err := hex.DecodeString(*c.RawHex)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case c.Raw != nil:
		return []byte(*c.Raw)
	case c.JSON != nil:
		var buf bytes.Buffer
		if err := json.Compact(&buf, c.JSON); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	events := c.Events
	if events == nil {
		events = base
	}
	var out bytes.Buffer
	for i, raw := range events {
		if c.RepeatText != nil && i == 1 {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			m["text"] = strings.Repeat(c.RepeatText.Character, c.RepeatText.Count)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			raw = b
		}
		var js bytes.Buffer
		var err error
		if c.Multiline {
			err = json.Indent(&js, raw, "", "  ")
		} else {
			err = json.Compact(&js, raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !versioning {
			out.WriteString(": fixture comment\n")
		}
		for _, line := range strings.Split(js.String(), "\n") {
			out.WriteString("data: " + line + "\n")
		}
		out.WriteString("\n")
	}
	body := out.Bytes()
	if c.LineEnding != "" && c.LineEnding != "\n" {
		body = bytes.ReplaceAll(body, []byte("\n"), []byte(c.LineEnding))
	}
	if c.BOM {
		body = append([]byte("\ufeff"), body...)
	}
	return body
}

func runFixture(t *testing.T, base []json.RawMessage, c *fixtureCase) error {
	versioning := c.Headers != nil
	body := fixtureBody(t, base, c, versioning)

	var redirectHit, disconnected atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirectHit.Store(true)
	}))
	defer target.Close()
	gone := make(chan struct{})

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("AgenticDriver-Version") != "1.0" || r.Header.Get("AgenticDriver-Accept-Optional-Events") != "true" ||
			r.Header.Get("Authorization") != "Bearer "+fixtureToken {
			http.Error(w, "missing protocol request headers", http.StatusTeapot)
			return
		}
		if c.Redirect {
			http.Redirect(w, r, target.URL+"/v1/runs", http.StatusFound)
			return
		}
		ct := "text/event-stream"
		if c.Operation != "" || c.Status >= 300 {
			ct = "application/json"
		}
		if c.ContentType != "" {
			ct = c.ContentType
		}
		w.Header().Set("Content-Type", ct)
		for k, v := range c.Headers {
			w.Header().Set(k, v)
		}
		status := c.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		rc := http.NewResponseController(w)
		if len(c.ChunkSizes) == 0 {
			w.Write(body)
		} else {
			for i, rest := 0, body; len(rest) > 0; i++ {
				n := min(c.ChunkSizes[i%len(c.ChunkSizes)], len(rest))
				w.Write(rest[:n])
				rc.Flush()
				rest = rest[n:]
			}
		}
		rc.Flush()
		if c.Cancel {
			<-r.Context().Done()
			disconnected.Store(true)
			close(gone)
		}
	}))
	defer srv.Close()

	cl, err := client.New(srv.URL, client.WithToken(fixtureToken))
	if err != nil {
		return err
	}
	ctx := t.Context()
	var gotErr error
	var types []string
	switch c.Operation {
	case "providers":
		_, gotErr = cl.Providers(ctx, false)
	case "ingest":
		src := client.RetrievalSource{ID: "paper", Revision: "r1"}
		_, gotErr = cl.Ingest(ctx, "library", src, json.RawMessage(`{"type":"text","source":{"id":"paper","revision":"r1"},"mediaType":"text/plain","text":"x"}`))
	case "protocol":
		_, gotErr = cl.Protocol(ctx)
	case "":
		req := &protocol.RunRequest{
			Provider: "mock", Model: "demo", Input: "Hello", Tools: c.Tools,
			Retrieval: c.Retrieval, Approvals: c.Approvals, ApplicationTools: c.ApplicationTools, Session: c.Session,
		}
		errCancel := errors.New("fixture: cancel at first text.delta")
		var res *protocol.RunResult
		res, gotErr = cl.Stream(ctx, req, func(ev client.Event) error {
			types = append(types, ev.Type)
			if c.Cancel && ev.Type == client.EventTextDelta {
				return errCancel
			}
			return nil
		})
		if c.Cancel {
			if !errors.Is(gotErr, errCancel) {
				return fmt.Errorf("cancel: Stream returned %v, want the callback's error", gotErr)
			}
			<-gone
			if !disconnected.Load() {
				return errors.New("cancel: the host did not observe the disconnect")
			}
			return nil
		}
		if gotErr == nil && (res == nil || types[len(types)-1] != client.EventRunCompleted) {
			return errors.New("stream succeeded without run.completed")
		}
	case "session-create":
		var sc client.SessionCreate
		if err := json.Unmarshal(c.SessionCreate, &sc); err != nil {
			return err
		}
		_, gotErr = cl.CreateSession(ctx, &sc)
	case "session-read", "session-delete":
		var id struct{ ID string }
		if err := json.Unmarshal(c.SessionIdentity, &id); err != nil {
			return err
		}
		if c.Operation == "session-read" {
			_, gotErr = cl.ReadSession(ctx, id.ID)
		} else {
			gotErr = cl.DeleteSession(ctx, id.ID)
		}
	case "job-submit":
		var js struct {
			Key     string
			Request protocol.RunRequest
		}
		if err := json.Unmarshal(c.JobSubmit, &js); err != nil {
			return err
		}
		_, gotErr = cl.SubmitJob(ctx, js.Key, &js.Request)
	case "job-read", "job-cancel":
		var id struct{ ID string }
		if err := json.Unmarshal(c.JobIdentity, &id); err != nil {
			return err
		}
		if c.Operation == "job-read" {
			_, gotErr = cl.ReadJob(ctx, id.ID)
		} else {
			_, gotErr = cl.CancelJob(ctx, id.ID)
		}
	case "job-events":
		var ev struct {
			ID    string
			After int64
			Limit int
		}
		if err := json.Unmarshal(c.JobEvents, &ev); err != nil {
			return err
		}
		_, gotErr = cl.JobEvents(ctx, ev.ID, ev.After, ev.Limit)
	case "approval":
		var d struct {
			ApprovalID, RunID string
			Call              client.ToolCall
			Decision          string
		}
		if err := json.Unmarshal(c.Decision, &d); err != nil {
			return err
		}
		_, gotErr = cl.DecideApproval(ctx, &client.ApprovalRequest{ApprovalID: d.ApprovalID, RunID: d.RunID, Call: d.Call}, d.Decision)
	case "tool-result", "tool-progress":
		var x client.ToolExecution
		if err := json.Unmarshal(c.ToolIdentity, &x); err != nil {
			return err
		}
		if c.Operation == "tool-progress" {
			gotErr = cl.ReportToolProgress(ctx, x)
		} else {
			var r struct{ Output json.RawMessage }
			if err := json.Unmarshal(c.ToolResult, &r); err != nil {
				return err
			}
			gotErr = cl.SubmitToolResult(ctx, x, r.Output)
		}
	default:
		return fmt.Errorf("operation %q not supported", c.Operation)
	}

	switch {
	case c.ExpectTransportError:
		if gotErr == nil {
			return errors.New("want a transport error, got success")
		}
		if redirectHit.Load() {
			return errors.New("the redirect target was contacted")
		}
	case c.ExpectedError != "":
		if got := client.CodeOf(gotErr); string(got) != c.ExpectedError {
			return fmt.Errorf("error code = %q (%v), want %s", got, gotErr, c.ExpectedError)
		}
		if c.Retryable != nil {
			var ce *client.Error
			errors.As(gotErr, &ce)
			if ce.Retryable != *c.Retryable {
				return fmt.Errorf("retryable = %v, want %v", ce.Retryable, *c.Retryable)
			}
		}
	default:
		if gotErr != nil {
			return fmt.Errorf("want success, got %v", gotErr)
		}
		if c.ExpectedTypes != nil && strings.Join(types, ",") != strings.Join(c.ExpectedTypes, ",") {
			return fmt.Errorf("event types = %v, want %v", types, c.ExpectedTypes)
		}
	}
	return nil
}
