package vendorsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/txtar"

	"adhost/abi"
)

// Event is one thing an adapter did during a call, as recorded in
// events.jsonl: exactly one field is set.
type Event struct {
	// Text is an EmitText delta.
	Text string `json:"text,omitempty"`
	// Progress is an EmitProgress.
	Progress bool `json:"progress,omitempty"`
	// ToolCallDelta is an EmitToolCallDelta.
	ToolCallDelta bool `json:"toolCallDelta,omitempty"`
	// Usage is an EmitUsage.
	Usage *abi.Usage `json:"usage,omitempty"`
	// Output is the successful result of a complete call (terminal).
	Output *abi.CompleteOutput `json:"output,omitempty"`
	// Inspect is the result of an inspect call (terminal).
	Inspect *abi.InspectOutput `json:"inspect,omitempty"`
	// Error is a failed call (terminal). Message is dropped when recorded:
	// tests compare codes, never messages.
	Error *abi.ErrorOutput `json:"error,omitempty"`
	// Cancelled is a call that returned the cancelled status (terminal).
	Cancelled bool `json:"cancelled,omitempty"`
}

// Op names of a Turn.
const (
	OpComplete = "complete"
	OpInspect  = "inspect"
)

// Turn is one call of a transcript and the one HTTP exchange it makes.
type Turn struct {
	N  int    // 1-based
	Op string // OpComplete or OpInspect

	// Input is the adapter's input (OpComplete).
	Input *abi.CompleteInput
	// Request is the expected request body (nil: not checked; GETs).
	Request []byte
	// Method, Path and Query are the expected request line (Path and
	// Query "" = unchecked).
	Method, Path, Query string

	// Status, Headers (name, value pairs), ContentType and Response are
	// what the server answers.
	Status      int
	Headers     [][2]string
	ContentType string
	Response    []byte
	// Repeat is written after Response until RepeatBytes bytes of body were
	// written; Tail follows.
	Repeat      []byte
	RepeatBytes int64
	Tail        []byte
	// Hold keeps the response open after the bytes until the client leaves.
	Hold bool
	// Continue marks a further HTTP exchange of the previous turn's call
	// (pagination): it has no input and no events of its own.
	Continue bool

	// Events are the expected adapter events (nil when the file is absent).
	Events []Event
}

// Case is a parsed transcript file.
type Case struct {
	Path     string
	Comment  string
	Settings json.RawMessage
	Turns    []*Turn
	archive  *txtar.Archive
}

// LoadCase reads and parses one transcript.
func LoadCase(path string) (*Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCase(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// ParseCase parses a transcript (see the package doc for the format).
func ParseCase(data []byte) (*Case, error) {
	a := txtar.Parse(data)
	c := &Case{Comment: string(a.Comment), Settings: json.RawMessage("{}"), archive: a}
	turns := map[int]*Turn{}
	turn := func(n int) *Turn {
		t, ok := turns[n]
		if !ok {
			t = &Turn{N: n, Op: OpComplete, Status: 200}
			turns[n] = t
		}
		return t
	}
	for i, line := range strings.Split(string(a.Comment), "\n") {
		n, key, val, ok := directive(line)
		if !ok {
			continue
		}
		t := turn(n)
		var err error
		switch key {
		case "op":
			if val != OpComplete && val != OpInspect {
				err = fmt.Errorf("unknown op %q", val)
			}
			t.Op = val
		case "status":
			t.Status, err = strconv.Atoi(val)
		case "header":
			name, v, found := strings.Cut(val, ":")
			if !found {
				err = fmt.Errorf("header %q: want name: value", val)
			}
			t.Headers = append(t.Headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(v)})
		case "method":
			t.Method = val
		case "path":
			t.Path = val
		case "query":
			t.Query = val
		case "repeat-bytes":
			t.RepeatBytes, err = strconv.ParseInt(val, 10, 64)
		case "hold":
			t.Hold, err = strconv.ParseBool(val)
		case "continue":
			t.Continue, err = strconv.ParseBool(val)
		default:
			continue // free text that happens to contain a colon
		}
		if err != nil {
			return nil, fmt.Errorf("comment line %d: %w", i+1, err)
		}
	}
	for _, f := range a.Files {
		n, name := 1, f.Name
		if pre, rest, ok := strings.Cut(f.Name, "/"); ok {
			k, err := strconv.Atoi(pre)
			if err != nil || k < 1 {
				return nil, fmt.Errorf("file %s: turn prefix must be a number ≥ 1", f.Name)
			}
			n, name = k, rest
		}
		if name == "settings.json" {
			if n != 1 || !json.Valid(f.Data) {
				return nil, fmt.Errorf("file %s: settings.json must be valid JSON without a turn prefix", f.Name)
			}
			c.Settings = bytes.TrimSpace(f.Data)
			continue
		}
		t := turn(n)
		switch name {
		case "input.json":
			t.Input = new(abi.CompleteInput)
			dec := json.NewDecoder(bytes.NewReader(f.Data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(t.Input); err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Name, err)
			}
		case "request.json":
			if !json.Valid(f.Data) {
				return nil, fmt.Errorf("file %s: invalid JSON", f.Name)
			}
			t.Request = f.Data
		case "response.sse":
			t.Response, t.ContentType = f.Data, "text/event-stream"
		case "response.json":
			t.Response, t.ContentType = f.Data, "application/json"
		case "response.txt":
			t.Response, t.ContentType = f.Data, "text/plain; charset=utf-8"
		case "response.repeat.sse":
			t.Repeat = f.Data
		case "response.tail.sse":
			t.Tail = f.Data
		case "events.jsonl":
			evs, err := ParseEvents(f.Data)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Name, err)
			}
			t.Events = evs
		default:
			return nil, fmt.Errorf("unknown file %s", f.Name)
		}
	}
	for n := 1; n <= len(turns); n++ {
		t, ok := turns[n]
		if !ok {
			return nil, fmt.Errorf("turn %d missing (turns must be numbered 1..n)", n)
		}
		if t.Method == "" {
			t.Method = "POST"
			if t.Op == OpInspect {
				t.Method = "GET"
			}
		}
		if t.Continue {
			if n == 1 || t.Input != nil || t.Events != nil {
				return nil, fmt.Errorf("turn %d: a continue turn follows another and has no input.json or events.jsonl", n)
			}
			t.Op = turns[n-1].Op
			if t.Method == "POST" && t.Op == OpInspect {
				t.Method = "GET"
			}
		} else if t.Op == OpComplete && t.Input == nil {
			return nil, fmt.Errorf("turn %d: input.json missing", n)
		}
		if len(t.Repeat) > 0 && t.RepeatBytes <= 0 {
			return nil, fmt.Errorf("turn %d: response.repeat.sse needs repeat-bytes", n)
		}
		c.Turns = append(c.Turns, t)
	}
	if len(c.Turns) == 0 {
		return nil, fmt.Errorf("no turns")
	}
	return c, nil
}

// directive parses "[n/]key: value".
func directive(line string) (n int, key, val string, ok bool) {
	line = strings.TrimSpace(line)
	k, v, found := strings.Cut(line, ":")
	if !found || strings.ContainsAny(k, " \t") {
		return 0, "", "", false
	}
	n = 1
	if pre, rest, has := strings.Cut(k, "/"); has {
		i, err := strconv.Atoi(pre)
		if err != nil || i < 1 {
			return 0, "", "", false
		}
		n, k = i, rest
	}
	return n, k, strings.TrimSpace(v), true
}

// ParseEvents parses events.jsonl (blank lines ignored).
func ParseEvents(data []byte) ([]Event, error) {
	evs := []Event{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var ev Event
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// FormatEvents renders events as events.jsonl, one compact object a line,
// with error messages dropped.
func FormatEvents(evs []Event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		ev = normalize(ev)
		line, err := json.Marshal(ev)
		if err != nil {
			panic(err) // Event always marshals
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func normalize(ev Event) Event {
	if ev.Error != nil {
		e := *ev.Error
		e.Message = ""
		ev.Error = &e
	}
	return ev
}

// SetFile sets turn n's file name (for example "events.jsonl") in the
// transcript to data, adding the file when absent and keeping each turn's
// files together in their canonical order. Format renders the result. This is
// how a replay in update mode (see internal/vendorsim/simtest) rewrites the
// recorded expectations without knowing the txtar layout.
func (c *Case) SetFile(n int, name string, data []byte) {
	if c.archive == nil {
		c.archive = &txtar.Archive{Comment: []byte(c.Comment)}
	}
	if n != 1 {
		name = strconv.Itoa(n) + "/" + name
	}
	a := c.archive
	for i := range a.Files {
		if a.Files[i].Name == name {
			a.Files[i].Data = data
			return
		}
	}
	a.Files = append(a.Files, txtar.File{Name: name, Data: data})
	// Keep turn files together: sort by turn, then by the canonical order.
	order := map[string]int{"settings.json": 0, "input.json": 1, "request.json": 2, "response.sse": 3,
		"response.json": 3, "response.txt": 3, "response.repeat.sse": 4, "response.tail.sse": 5, "events.jsonl": 6}
	key := func(f string) (int, int) {
		n := 1
		if pre, rest, ok := strings.Cut(f, "/"); ok {
			n, _ = strconv.Atoi(pre)
			f = rest
		}
		return n, order[f]
	}
	sort.SliceStable(a.Files, func(i, j int) bool {
		ni, oi := key(a.Files[i].Name)
		nj, oj := key(a.Files[j].Name)
		if ni != nj {
			return ni < nj
		}
		return oi < oj
	})
}

// Format renders the transcript as txtar: the file it was parsed from, with
// the changes made by SetFile.
func (c *Case) Format() []byte {
	if c.archive == nil {
		return txtar.Format(&txtar.Archive{Comment: []byte(c.Comment)})
	}
	return txtar.Format(c.archive)
}

// JSONEqual reports whether a and b hold the same JSON value (object key
// order and whitespace ignored, numbers compared by their text).
func JSONEqual(a, b []byte) (bool, error) {
	va, err := decodeAny(a)
	if err != nil {
		return false, err
	}
	vb, err := decodeAny(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(va, vb), nil
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
