package simtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/internal/vendorsim"
)

// Call is what a Runner gets for one turn.
type Call struct {
	Turn *vendorsim.Turn
	// Settings are the case's settings with "endpoint" set to the
	// simulator's endpoint (unless the case set one).
	Settings json.RawMessage
	// Endpoint is the simulator's endpoint.
	Endpoint string
	// Server is the simulator (for its recordings).
	Server *vendorsim.Server
	// APIKey is ReplayOptions.APIKey: the runner injects it the way the
	// host does (see SDKRunner).
	APIKey string
}

// Runner runs one call of an adapter and returns what it emitted, the
// terminal event last.
type Runner func(t *testing.T, c *Call) []vendorsim.Event

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Vendor is the simulated vendor's name.
	Vendor string
	// APIKey, when set, is checked like vendorsim.Options.APIKey (the runner
	// must then inject it the way the host does).
	APIKey string
	// Update rewrites events.jsonl and request.json from what happened.
	Update bool
	// Run runs the adapter.
	Run Runner
}

// ReplayDir runs every *.txtar in dir as a subtest.
func ReplayDir(t *testing.T, dir string, opts ReplayOptions) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no transcripts in %s", dir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			Replay(t, f, opts)
		})
	}
}

// Replay runs one transcript against an adapter: it serves the recorded
// responses from a fresh vendorsim.Server, calls opts.Run per turn, and
// compares the request sent and the events emitted with the transcript (or
// rewrites them with Update).
func Replay(t *testing.T, path string, opts ReplayOptions) {
	t.Helper()
	c, err := vendorsim.LoadCase(path)
	if err != nil {
		t.Fatal(err)
	}
	s := vendorsim.MustNew(t, opts.Vendor, vendorsim.Options{Script: c.Turns, APIKey: opts.APIKey})
	settings, err := withEndpoint(c.Settings, s.Endpoint())
	if err != nil {
		t.Fatalf("settings.json: %v", err)
	}
	changed := false
	for i := 0; i < len(c.Turns); {
		turn := c.Turns[i]
		exchanges := []*vendorsim.Turn{turn}
		for i++; i < len(c.Turns) && c.Turns[i].Continue; i++ {
			exchanges = append(exchanges, c.Turns[i])
		}
		before := len(s.Requests())
		got := opts.Run(t, &Call{Turn: turn, Settings: settings, Endpoint: s.Endpoint(), Server: s, APIKey: opts.APIKey})
		reqs := s.Requests()[before:]
		if len(reqs) != len(exchanges) {
			t.Errorf("turn %d: adapter made %d requests, want %d", turn.N, len(reqs), len(exchanges))
		}
		for k, ex := range exchanges {
			if k >= len(reqs) {
				break
			}
			if checkExchange(t, c, ex, reqs[k], opts) {
				changed = true
			}
		}
		gotText, wantText := vendorsim.FormatEvents(got), vendorsim.FormatEvents(turn.Events)
		if turn.Events == nil || !bytes.Equal(gotText, wantText) {
			if opts.Update {
				c.SetFile(turn.N, "events.jsonl", gotText)
				changed = true
			} else {
				t.Errorf("turn %d: events differ\n got:\n%s\nwant:\n%s", turn.N, gotText, wantText)
			}
		}
	}
	if changed {
		if err := os.WriteFile(c.Path, c.Format(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", c.Path)
	}
}

// checkExchange compares one recorded request with its turn; it reports
// whether the case was updated.
func checkExchange(t *testing.T, c *vendorsim.Case, turn *vendorsim.Turn, req vendorsim.Request, opts ReplayOptions) (changed bool) {
	t.Helper()
	if opts.APIKey != "" && req.Credential != vendorsim.CredentialOK {
		t.Errorf("turn %d: credential %s", turn.N, req.Credential)
	}
	if req.Method != turn.Method {
		t.Errorf("turn %d: method %s, want %s", turn.N, req.Method, turn.Method)
	}
	if turn.Path != "" && req.Path != turn.Path {
		t.Errorf("turn %d: path %s, want %s", turn.N, req.Path, turn.Path)
	}
	if turn.Query != "" && req.RawQuery != turn.Query {
		t.Errorf("turn %d: query %q, want %q", turn.N, req.RawQuery, turn.Query)
	}
	if turn.Request == nil && !(opts.Update && len(req.Body) > 0) {
		return false
	}
	if eq, err := vendorsim.JSONEqual(req.Body, turn.Request); err == nil && eq {
		return false
	}
	if opts.Update {
		c.SetFile(turn.N, "request.json", indentJSON(req.Body))
		return true
	}
	t.Errorf("turn %d: request body differs\n got: %s\nwant: %s", turn.N, compactJSON(req.Body), compactJSON(turn.Request))
	return false
}

// withEndpoint sets settings' "endpoint" to the simulator's unless the case
// chose one (cases that test endpoint validation do).
func withEndpoint(settings json.RawMessage, endpoint string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(settings, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	if _, ok := m["endpoint"]; !ok {
		b, _ := json.Marshal(endpoint)
		m["endpoint"] = b
	}
	return json.Marshal(m)
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

func indentJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") != nil {
		return b
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
