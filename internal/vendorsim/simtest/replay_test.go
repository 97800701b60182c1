package simtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/sdk-plugin/sdktest"
)

const testKey = "sk-simtest"

// echoRunner is an adapter stand-in: it posts {"model":<input model>} with
// the host's credential header and reports the response body as one text
// event, then an empty output.
func echoRunner(t *testing.T, c *Call) []vendorsim.Event {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	body, _ := json.Marshal(map[string]string{"model": c.Turn.Input.Model})
	req, err := http.NewRequest("POST", c.Endpoint+"chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	name, prefix := c.Server.Vendor().Credential()
	req.Header.Set(name, prefix+c.APIKey)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return []vendorsim.Event{{Text: strings.TrimSpace(string(b))}, {Output: &abi.CompleteOutput{}}}
}

// With Update, Replay records request.json and events.jsonl; replaying the
// rewritten transcript without Update then passes unchanged.
func TestReplayUpdateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "case.txtar")
	const src = "An echo.\n-- input.json --\n" +
		`{"model":"m1","messages":[{"role":"user","content":"hi"}],"maxOutputTokens":5,"step":1}` +
		"\n-- response.json --\n{\"ok\":true}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := ReplayOptions{Vendor: "openai", APIKey: testKey, Update: true, Run: echoRunner}
	Replay(t, path, opts)

	c, err := vendorsim.LoadCase(path)
	if err != nil {
		t.Fatal(err)
	}
	turn := c.Turns[0]
	if eq, err := vendorsim.JSONEqual(turn.Request, []byte(`{"model":"m1"}`)); err != nil || !eq {
		t.Errorf("request.json = %s", turn.Request)
	}
	want := vendorsim.FormatEvents([]vendorsim.Event{{Text: `{"ok":true}`}, {Output: &abi.CompleteOutput{}}})
	if got := vendorsim.FormatEvents(turn.Events); !bytes.Equal(got, want) {
		t.Errorf("events.jsonl = %s, want %s", got, want)
	}
	before, _ := os.ReadFile(path)

	opts.Update = false
	Replay(t, path, opts)
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Errorf("replay without Update rewrote the transcript:\n%s", after)
	}
}

// ReplayDir runs each transcript as a subtest named after the file.
func TestReplayDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		src := "-- input.json --\n{\"model\":\"" + name + "\",\"messages\":[],\"maxOutputTokens\":5,\"step\":1}\n" +
			"-- request.json --\n{\"model\":\"" + name + "\"}\n-- response.json --\n1\n" +
			"-- events.jsonl --\n{\"text\":\"1\"}\n{\"output\":{}}\n"
		if err := os.WriteFile(filepath.Join(dir, name+".txtar"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var ran []string
	ReplayDir(t, dir, ReplayOptions{Vendor: "openai", Run: func(t *testing.T, c *Call) []vendorsim.Event {
		ran = append(ran, filepath.Base(t.Name()))
		return echoRunner(t, c)
	}})
	if strings.Join(ran, ",") != "a,b" {
		t.Errorf("ran %v", ran)
	}
}

// The endpoint setting is filled in unless the case chose its own (cases
// that test endpoint validation do).
func TestWithEndpoint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{"endpoint":"http://sim/v1/"}`},
		{`null`, `{"endpoint":"http://sim/v1/"}`},
		{`{"x":1}`, `{"endpoint":"http://sim/v1/","x":1}`},
		{`{"endpoint":"ftp://nope"}`, `{"endpoint":"ftp://nope"}`},
	} {
		got, err := withEndpoint(json.RawMessage(tc.in), "http://sim/v1/")
		if err != nil || string(got) != tc.want {
			t.Errorf("withEndpoint(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := withEndpoint(json.RawMessage(`[]`), "x"); err == nil {
		t.Error("withEndpoint([]) succeeded")
	}
}

// EventsOf keeps what the host forwards, in order, and drops items emitted
// after cancellation.
func TestEventsOf(t *testing.T) {
	u := &abi.Usage{}
	got := EventsOf([]sdktest.Item{
		{Kind: abi.EmitText, Text: "a"},
		{Kind: abi.EmitProgress},
		{Kind: abi.EmitToolCallDelta},
		{Kind: abi.EmitUsage, Usage: u},
		{Kind: abi.EmitText, Text: "late", Dropped: true},
	})
	want := []vendorsim.Event{{Text: "a"}, {Progress: true}, {ToolCallDelta: true}, {Usage: u}}
	if string(vendorsim.FormatEvents(got)) != string(vendorsim.FormatEvents(want)) {
		t.Errorf("EventsOf = %s", vendorsim.FormatEvents(got))
	}
}

// HostOptions inject the vendor's credential header and allow only the
// simulator's origin.
func TestHostOptions(t *testing.T) {
	for vendor, header := range map[string]string{"openai": "Bearer k", "anthropic": "k", "gemini": "k"} {
		s := vendorsim.MustNew(t, vendor, vendorsim.Options{})
		ho := HostOptions(s, "k")
		name, _ := s.Vendor().Credential()
		if len(ho.Origins) != 1 || ho.Origins[0] != s.URL() || len(ho.Headers) != 1 || ho.Headers[name] != header {
			t.Errorf("%s: HostOptions = %+v", vendor, ho)
		}
		if ho := HostOptions(s, ""); ho.Headers != nil {
			t.Errorf("%s: no key but headers %v", vendor, ho.Headers)
		}
	}
}
