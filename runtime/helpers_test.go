package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"adhost/abi"
	"adhost/runtime/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// completeFunc is a fake provider turn.
type completeFunc func(ctx context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error)

type fakeProvider struct {
	complete completeFunc
	calls    atomic.Int32
}

func (p *fakeProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
	p.calls.Add(1)
	return p.complete(ctx, in, sink)
}

func (p *fakeProvider) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE"}, nil
}

const secretMarker = "conformance-secret-marker"

// conformanceProvider mimics plugins/fixture for the scenarios of
// wire-core §16.
func conformanceProvider(stream bool) *fakeProvider {
	return &fakeProvider{complete: func(ctx context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
		last := in.Messages[len(in.Messages)-1]
		input := in.Messages[0].Content
		for _, m := range in.Messages {
			if m.Role == abi.RoleUser {
				input = m.Content
			}
		}
		switch input {
		case "conformance:text":
			if stream {
				sink.Text("Hello ")
				sink.Text("")
				sink.Text("fixture")
			}
			return &abi.CompleteOutput{Text: "Hello fixture"}, nil
		case "conformance:structured":
			if stream {
				sink.Text(`{"ok":`)
				sink.Text(`true}`)
			}
			return &abi.CompleteOutput{Text: `{"ok":true}`}, nil
		case "conformance:tools":
			if last.Role == abi.RoleTool {
				if last.Content != `{"receipt":7}` || last.Name != "conformance_lookup" || last.ToolCallID != "call_1" {
					return nil, protocol.New(protocol.CodeProviderFailed)
				}
				if stream {
					sink.Text("tool receipt: 7")
				}
				return &abi.CompleteOutput{Text: "tool receipt: 7"}, nil
			}
			return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "call_1", Name: "conformance_lookup", Arguments: json.RawMessage(`{ "value": 7 }`)}}}, nil
		case "conformance:private-error":
			return nil, errors.New("upstream body: " + secretMarker)
		case "conformance:private-error-public":
			return nil, protocol.Wrap(protocol.CodeProviderFailed, errors.New("upstream body: "+secretMarker))
		case "conformance:cancel":
			sink.Progress()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, protocol.New(protocol.CodeProviderFailed)
	}}
}

// fakeTools is a ToolSet whose tools are functions.
type fakeTools struct {
	mu    sync.Mutex
	fns   map[string]func(ctx context.Context, args json.RawMessage, progress func()) (json.RawMessage, error)
	calls map[string]int
}

func (f *fakeTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }

func (f *fakeTools) Invoke(ctx context.Context, call abi.ToolCall, progress func()) (json.RawMessage, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[call.Name]++
	fn := f.fns[call.Name]
	f.mu.Unlock()
	return fn(ctx, call.Arguments, progress)
}

func (f *fakeTools) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

const lookupSchema = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"],"additionalProperties":false}`

// testEnv is an engine with one provider "p" (model allowlist nil), the
// conformance_lookup tool and a principal granted everything.
type testEnv struct {
	e     *Engine
	prov  *fakeProvider
	inst  *ProviderInstance
	tools *fakeTools
	p     *Principal
	sink  *memSink
}

type envOption func(*Options, *ProviderInstance)

func newEnv(t testing.TB, prov *fakeProvider, opts ...envOption) *testEnv {
	t.Helper()
	env := &testEnv{prov: prov, sink: &memSink{}}
	env.tools = &fakeTools{fns: map[string]func(context.Context, json.RawMessage, func()) (json.RawMessage, error){
		"conformance_lookup": func(_ context.Context, args json.RawMessage, _ func()) (json.RawMessage, error) {
			var a struct{ Value int }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"receipt": ` + itoa(a.Value) + `}`), nil
		},
	}}
	env.inst = &ProviderInstance{
		ID: "p", Name: "P", Vendor: "fake", AuthMode: "none", AccountID: "acct",
		Capabilities: map[string]bool{"tools": true, "textStreaming": true},
		UsageSource:  "adapter-report",
		Provider:     prov,
	}
	o := Options{
		Providers: []*ProviderInstance{env.inst},
		Tools: []*Tool{{
			Def: abi.ToolDef{Name: "conformance_lookup", Description: "lookup", InputSchema: json.RawMessage(lookupSchema)},
			Set: env.tools,
		}},
		UsageSink: env.sink,
		HostID:    "test-host",
	}
	for _, f := range opts {
		f(&o, env.inst)
	}
	e, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.e = e
	env.p = &Principal{Subject: "alice", Providers: map[string]bool{}, Tools: map[string]bool{}}
	for _, pi := range o.Providers {
		env.p.Providers[pi.ID] = true
	}
	for _, tl := range o.Tools {
		env.p.Tools[tl.Def.Name] = true
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return env
}

func withTool(name, schema string, requiresApproval bool, fn func(context.Context, json.RawMessage, func()) (json.RawMessage, error)) envOption {
	return func(o *Options, _ *ProviderInstance) {
		var set *fakeTools
		for _, t := range o.Tools {
			set = t.Set.(*fakeTools)
		}
		set.fns[name] = fn
		o.Tools = append(o.Tools, &Tool{
			Def:              abi.ToolDef{Name: name, Description: name, InputSchema: json.RawMessage(schema)},
			RequiresApproval: requiresApproval,
			Set:              set,
		})
	}
}

func itoa(i int) string { return strings.TrimSpace(string(must(json.Marshal(i)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func req(input string, mods ...func(*protocol.RunRequest)) *protocol.RunRequest {
	r := &protocol.RunRequest{Provider: "p", Model: "m", Input: input}
	for _, f := range mods {
		f(r)
	}
	return r
}

func withTools(names ...string) func(*protocol.RunRequest) {
	return func(r *protocol.RunRequest) { r.Tools = names }
}

func intp(v int) *int { return &v }

func msDur(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// start starts a run and fails the test on error.
func (env *testEnv) start(t testing.TB, r *protocol.RunRequest, mode Mode) *Run {
	t.Helper()
	run, err := env.e.Start(context.Background(), env.p, r, mode)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return run
}

// stream runs r in ModeStream and returns its checked events.
func (env *testEnv) stream(t testing.TB, r *protocol.RunRequest) []wireEvent {
	t.Helper()
	run := env.start(t, r, ModeStream)
	return checkStream(t, collect(t, run), r.Provider, r.Model)
}

func collect(t testing.TB, run *Run) []Event {
	t.Helper()
	var evs []Event
	for {
		ev, err := run.Next(context.Background())
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		evs = append(evs, ev)
	}
}

// wireEvent is a decoded event object.
type wireEvent map[string]any

func (w wireEvent) typ() string { s, _ := w["type"].(string); return s }

func (w wireEvent) errorInfo() map[string]any { m, _ := w["error"].(map[string]any); return m }

func (w wireEvent) result() map[string]any { m, _ := w["result"].(map[string]any); return m }

func terminalOf(evs []wireEvent) wireEvent { return evs[len(evs)-1] }

func codeOf(ev wireEvent) string {
	s, _ := ev.errorInfo()["code"].(string)
	return s
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// checkStream is the reusable invariant checker: envelope, sequences,
// single runId, payload shapes, and the ordering grammar of wire-core §5.3.
func checkStream(t testing.TB, evs []Event, provider, model string) []wireEvent {
	t.Helper()
	const (
		stStart = iota
		stStarted
		stInStep   // streaming phase of a step
		stAfterUse // after usage.reported
		stAfterTxt // after the whole-text delta
		stInTool
		stToolDone
		stDone
	)
	state := stStart
	step := 0
	streamed := false
	runID := ""
	callID := ""
	out := make([]wireEvent, 0, len(evs))
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("event %d (%s): "+format, append([]any{i + 1, string(evs[i].Data)}, args...)...)
	}
	for i, ev := range evs {
		if bytes.ContainsAny(ev.Data, "\r\n") {
			fail(i, "data is not a single line")
		}
		dec := json.NewDecoder(bytes.NewReader(ev.Data))
		dec.UseNumber()
		var w wireEvent
		if err := dec.Decode(&w); err != nil {
			fail(i, "invalid JSON: %v", err)
		}
		if dec.More() {
			fail(i, "trailing data")
		}
		if w.typ() != ev.Type {
			fail(i, "type %q, Event.Type %q", w.typ(), ev.Type)
		}
		if seq, _ := w["sequence"].(json.Number); seq.String() != itoa(i+1) || ev.Sequence != int64(i+1) {
			fail(i, "sequence %v / %d, want %d", w["sequence"], ev.Sequence, i+1)
		}
		id, _ := w["runId"].(string)
		if id == "" || (runID != "" && id != runID) {
			fail(i, "runId %q, want %q", id, runID)
		}
		runID = id
		if ts, _ := w["timestamp"].(string); !timestampRE.MatchString(ts) {
			fail(i, "timestamp %q", ts)
		}
		if _, ok := w["optional"]; ok {
			fail(i, "core event marked optional")
		}
		if state == stDone {
			fail(i, "event after the terminal event")
		}
		if i == 0 && ev.Type != EventRunStarted {
			fail(i, "first event is not run.started")
		}
		switch ev.Type {
		case EventRunStarted:
			if i != 0 {
				fail(i, "run.started repeated")
			}
			if w["provider"] != provider || w["model"] != model {
				fail(i, "provider/model differ from the request")
			}
			state = stStarted
		case EventStepStarted:
			if state != stStarted && state != stToolDone {
				fail(i, "step.started out of order")
			}
			if n, _ := w["step"].(json.Number); n.String() != itoa(step+1) {
				fail(i, "step %v, want %d", w["step"], step+1)
			}
			step++
			state, streamed = stInStep, false
		case EventTextDelta:
			if s, ok := w["text"].(string); !ok || s == "" {
				fail(i, "empty or missing text")
			}
			switch {
			case state == stInStep:
				streamed = true
			case state == stAfterUse && !streamed:
				state = stAfterTxt
			default:
				fail(i, "text.delta out of order")
			}
		case EventRunProgress:
			switch w["phase"] {
			case PhaseModel:
				if state != stInStep {
					fail(i, "model progress out of order")
				}
			case PhaseTool:
				if state != stInTool {
					fail(i, "tool progress out of order")
				}
			default:
				fail(i, "bad phase")
			}
		case EventUsageReported:
			if state != stInStep {
				fail(i, "usage.reported out of order")
			}
			if n, _ := w["step"].(json.Number); n.String() != itoa(step) {
				fail(i, "usage step %v, want %d", w["step"], step)
			}
			checkUsage(t, w["usage"])
			state = stAfterUse
		case EventToolCalled:
			if state != stInStep && state != stAfterUse && state != stAfterTxt && state != stToolDone {
				fail(i, "tool.called out of order")
			}
			call, _ := w["call"].(map[string]any)
			callID, _ = call["id"].(string)
			if _, ok := call["arguments"].(map[string]any); !ok || callID == "" {
				fail(i, "bad call")
			}
			state = stInTool
		case EventToolCompleted:
			if state != stInTool || w["callId"] != callID {
				fail(i, "tool.completed out of order or for another call")
			}
			if _, ok := w["output"]; !ok {
				fail(i, "missing output")
			}
			state = stToolDone
		case EventRunCompleted:
			res := w.result()
			if res == nil || res["runId"] != runID || res["provider"] != provider || res["model"] != model {
				fail(i, "bad result")
			}
			if _, ok := res["text"].(string); !ok {
				fail(i, "result text")
			}
			if n, _ := res["steps"].(json.Number); n.String() != itoa(step) {
				fail(i, "result steps %v, want %d", res["steps"], step)
			}
			if fr := res["finishReason"]; fr != "stop" && fr != "length" {
				fail(i, "finishReason %v", fr)
			}
			checkUsage(t, res["usage"])
			state = stDone
		case EventRunFailed, EventRunCancelled:
			e := w.errorInfo()
			if c, _ := e["code"].(string); c == "" {
				fail(i, "missing error code")
			}
			if _, ok := e["message"].(string); !ok {
				fail(i, "missing message")
			}
			if _, ok := e["retryable"].(bool); !ok {
				fail(i, "missing retryable")
			}
			if o, ok := e["outcome"]; ok && o != "uncertain" {
				fail(i, "bad outcome")
			}
			state = stDone
		default:
			fail(i, "unknown event type")
		}
		out = append(out, w)
	}
	if state != stDone {
		t.Fatalf("stream has no terminal event (%d events)", len(evs))
	}
	return out
}

func checkUsage(t testing.TB, v any) {
	t.Helper()
	u, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("usage %v is not an object", v)
	}
	for k, val := range u {
		n, ok := val.(json.Number)
		if !ok {
			t.Fatalf("usage %s = %v", k, val)
		}
		if f, err := n.Float64(); err != nil || f < 0 {
			t.Fatalf("usage %s = %v", k, val)
		}
	}
}

// memSink records usage records.
type memSink struct {
	mu   sync.Mutex
	recs []*UsageRecord
	err  error
}

func (s *memSink) RecordUsage(_ context.Context, rec *UsageRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, rec)
	return s.err
}

func (s *memSink) records() []*UsageRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*UsageRecord(nil), s.recs...)
}

// textOf concatenates the text.delta events.
func textOf(evs []wireEvent) string {
	var b strings.Builder
	for _, w := range evs {
		if w.typ() == EventTextDelta {
			b.WriteString(w["text"].(string))
		}
	}
	return b.String()
}

func types(evs []wireEvent) []string {
	var s []string
	for _, w := range evs {
		s = append(s, w.typ())
	}
	return s
}

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int { return int(c.n.Add(1)) }
