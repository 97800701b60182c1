package qualify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/manifest"
	"adhost/runtime/protocol"
)

// Scenario names, in the order they run.
const (
	ScenarioDiscovery    = "discovery"
	ScenarioText         = "text"
	ScenarioStructured   = "structured"
	ScenarioTools        = "tools"
	ScenarioPrivateError = "private-error"
	ScenarioCancel       = "cancel"
	ScenarioNative       = "native"
	// ScenarioCredential is added by Simulate: every request reached the
	// simulator with the host-injected credential.
	ScenarioCredential = "credential"
)

// Conformance inputs and markers (wire-core §16).
const (
	secretMarker   = "conformance-secret-marker"
	lookupTool     = "conformance_lookup"
	okSchema       = `{"type":"object","properties":{"ok":{"const":true}},"required":["ok"],"additionalProperties":false}`
	lookupSchema   = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"],"additionalProperties":false}`
	instanceID     = "qualify"
	qualifySubject = "adhost-qualify"
)

// Default per-scenario bounds: the spec's 5 s for the simulator; a real
// model gets longer.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultLiveTimeout = 120 * time.Second
)

// Options configure Run.
type Options struct {
	// Provider is the provider under test (a runtime/wasm binding of the
	// pinned extension to one instance). Required.
	Provider runtime.Provider
	// Manifest is the extension's manifest (capabilities, vendor, auth
	// mode, usage source). Required.
	Manifest *manifest.Manifest
	// SHA256 is the pinned digest of the module, for the report.
	SHA256 string
	// Endpoint is the URL the instance talks to; only its origin goes into
	// the report.
	Endpoint string
	// Model is the explicit model id the scenarios use. Required.
	Model string
	// Live relaxes the checks for a real service and skips private-error.
	Live bool
	// Timeout bounds each scenario (default DefaultTimeout, or
	// DefaultLiveTimeout when Live).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the engine's logs (default: discarded).
	Logger *slog.Logger
}

// Run runs every scenario and returns the report. The error is only for
// unusable options; a failed scenario is a Report with Passed false.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Provider == nil || opts.Manifest == nil || opts.Model == "" {
		return nil, errors.New("qualify: Provider, Manifest and Model are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
		if opts.Live {
			opts.Timeout = DefaultLiveTimeout
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := opts.Manifest
	rep := &Report{
		Schema:    ReportSchema,
		Extension: ExtensionInfo{ID: m.ID, Version: m.Version, SHA256: opts.SHA256, Vendor: m.Vendor},
		Endpoint:  origin(opts.Endpoint),
		Model:     opts.Model,
		Mode:      ModeSimulate,
		StartedAt: opts.Now().UTC(),
	}
	if opts.Live {
		rep.Mode = ModeLive
	}
	q := &qualifier{opts: opts}
	for _, sc := range q.scenarios() {
		rep.Scenarios = append(rep.Scenarios, q.runScenario(ctx, sc))
	}
	rep.FinishedAt = opts.Now().UTC()
	rep.finish()
	return rep, nil
}

// origin returns scheme://host[:port] of u, or "" when u is not a URL.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

type qualifier struct {
	opts Options
}

// scenario is one check. run returns the observed events and a failure
// reason ("" when it passed); skip, when not "", skips it with that reason.
type scenario struct {
	name string
	skip string
	run  func(ctx context.Context, sr *scenarioRun) error
}

func (q *qualifier) scenarios() []scenario {
	caps := q.opts.Manifest.Capabilities
	tools := ""
	if !caps["tools"] {
		tools = "the extension does not declare tools"
	}
	private := ""
	if q.opts.Live {
		private = "needs a synthetic failure; not run against a live service"
	}
	native := "the extension does not declare nativeContinuation"
	if caps["nativeContinuation"] {
		native = "native continuation is not served by this host yet"
	}
	return []scenario{
		{name: ScenarioDiscovery, run: q.discovery},
		{name: ScenarioText, run: q.text},
		{name: ScenarioStructured, run: q.structured},
		{name: ScenarioTools, skip: tools, run: q.tools},
		{name: ScenarioPrivateError, skip: private, run: q.privateError},
		{name: ScenarioCancel, run: q.cancel},
		{name: ScenarioNative, skip: native},
	}
}

// scenarioRun collects what one scenario observed.
type scenarioRun struct {
	start  time.Time
	events []ObservedEvent
	raw    []runtime.Event
	tool   *countingTools
}

func (q *qualifier) runScenario(ctx context.Context, sc scenario) ScenarioResult {
	res := ScenarioResult{Name: sc.name}
	if sc.skip != "" {
		res.Status, res.Reason = StatusSkipped, sc.skip
		return res
	}
	ctx, cancel := context.WithTimeoutCause(ctx, q.opts.Timeout, errScenarioTimeout)
	defer cancel()
	sr := &scenarioRun{start: time.Now()}
	err := sc.run(ctx, sr)
	res.DurationMs = time.Since(sr.start).Milliseconds()
	res.Events = sr.events
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		res.Status, res.Reason = StatusFailed, err.Error()
	} else {
		res.Status = StatusPassed
	}
	return res
}

var errScenarioTimeout = errors.New("scenario timed out")

// engine builds a fresh engine with the provider under test as the only
// instance (the model explicitly allowed) and the conformance tool.
func (q *qualifier) engine(sr *scenarioRun) (*runtime.Engine, *runtime.Principal, error) {
	m := q.opts.Manifest
	caps := map[string]bool{}
	for k, v := range m.Capabilities {
		caps[k] = v
	}
	sr.tool = &countingTools{}
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: instanceID, Name: m.Name, Vendor: m.Vendor, AuthMode: m.AuthMode,
			Models: []string{q.opts.Model}, Capabilities: caps, UsageSource: m.UsageSource,
			Provider: q.opts.Provider,
		}},
		Tools: []*runtime.Tool{{
			Def: abi.ToolDef{Name: lookupTool, Description: "Returns a receipt for a value: {\"receipt\": value}.",
				InputSchema: json.RawMessage(lookupSchema)},
			Set: sr.tool,
		}},
		HostID: "adhost-qualify",
		Logger: q.opts.Logger,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("engine: %w", err)
	}
	p := &runtime.Principal{Subject: qualifySubject,
		Providers: map[string]bool{instanceID: true}, Tools: map[string]bool{lookupTool: true}}
	return e, p, nil
}

// stream starts req in stream mode and collects its events until the end.
// onEvent may cancel the run.
func (q *qualifier) stream(ctx context.Context, sr *scenarioRun, req *protocol.RunRequest, onEvent func(*runtime.Run, runtime.Event)) error {
	e, p, err := q.engine(sr)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		e.Shutdown(sctx)
	}()
	req.Provider, req.Model = instanceID, q.opts.Model
	run, err := e.Start(ctx, p, req, runtime.ModeStream)
	if err != nil {
		return fmt.Errorf("run refused: %s", protocol.CodeOf(err))
	}
	for {
		ev, err := run.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			run.Cancel(err)
			return fmt.Errorf("reading events: %w", context.Cause(ctx))
		}
		sr.raw = append(sr.raw, ev)
		sr.events = append(sr.events, observe(ev, sr.start))
		if onEvent != nil {
			onEvent(run, ev)
		}
	}
	return checkStream(sr.raw)
}

// event is the parsed JSON of one event (the fields qualification reads).
type event struct {
	Type     string              `json:"type"`
	RunID    string              `json:"runId"`
	Sequence int64               `json:"sequence"`
	Text     string              `json:"text"`
	Result   *runResult          `json:"result"`
	Error    *protocol.ErrorInfo `json:"error"`
	Call     *abi.ToolCall       `json:"call"`
}

type runResult struct {
	Text   string          `json:"text"`
	Output json.RawMessage `json:"output"`
	Usage  json.RawMessage `json:"usage"`
}

func parse(ev runtime.Event) event {
	var e event
	json.Unmarshal(ev.Data, &e)
	return e
}

// checkStream applies the checks every scenario shares (wire-core §16):
// sequences 1..n, one runId, run.started first, one terminal event last.
func checkStream(evs []runtime.Event) error {
	if len(evs) == 0 {
		return errors.New("no events")
	}
	runID := ""
	for i, raw := range evs {
		ev := parse(raw)
		if ev.Sequence != int64(i+1) || raw.Sequence != int64(i+1) {
			return fmt.Errorf("event %d has sequence %d", i+1, ev.Sequence)
		}
		if i == 0 {
			if ev.Type != runtime.EventRunStarted {
				return fmt.Errorf("first event is %s, not run.started", ev.Type)
			}
			runID = ev.RunID
		}
		if ev.RunID == "" || ev.RunID != runID {
			return fmt.Errorf("event %d has another runId", i+1)
		}
		if raw.Terminal() != (i == len(evs)-1) {
			return fmt.Errorf("terminal event at %d of %d", i+1, len(evs))
		}
	}
	return nil
}

func terminal(sr *scenarioRun) event { return parse(sr.raw[len(sr.raw)-1]) }

func deltas(sr *scenarioRun) string {
	var b strings.Builder
	for _, raw := range sr.raw {
		if raw.Type == runtime.EventTextDelta {
			b.WriteString(parse(raw).Text)
		}
	}
	return b.String()
}

// completed returns the result of a run.completed terminal event.
func completed(sr *scenarioRun) (*runResult, error) {
	t := terminal(sr)
	switch {
	case t.Type == runtime.EventRunCompleted && t.Result != nil:
		return t.Result, nil
	case t.Error != nil:
		return nil, fmt.Errorf("run ended with %s %s", t.Type, t.Error.Code)
	}
	return nil, fmt.Errorf("run ended with %s", t.Type)
}

func ptr[T any](v T) *T { return &v }

func (q *qualifier) instructions(live, simulated string) *string {
	if q.opts.Live {
		return ptr(live)
	}
	return ptr(simulated)
}

func (q *qualifier) discovery(ctx context.Context, sr *scenarioRun) error {
	out, err := q.opts.Provider.Inspect(ctx)
	sr.events = append(sr.events, ObservedEvent{Type: "inspect", AtMs: time.Since(sr.start).Milliseconds()})
	if err != nil {
		return fmt.Errorf("inspect failed: %s", protocol.CodeOf(err))
	}
	ev := &sr.events[len(sr.events)-1]
	ev.Detail = fmt.Sprintf("%s, %d models, complete %v", out.Code, len(out.Models), out.Complete)
	switch out.Code {
	case "CATALOG_AVAILABLE":
	case "DISCOVERY_UNSUPPORTED":
		return nil // an extension without a probe is allowed
	default:
		return fmt.Errorf("inspect reported %s", out.Code)
	}
	if !q.opts.Live && !slices.Contains(out.Models, q.opts.Model) {
		return fmt.Errorf("model %q not in the catalog", q.opts.Model)
	}
	return nil
}

func (q *qualifier) text(ctx context.Context, sr *scenarioRun) error {
	req := &protocol.RunRequest{Input: "conformance:text",
		Instructions: q.instructions("Reply with exactly these two words and nothing else: Hello fixture", "conformance")}
	if err := q.stream(ctx, sr, req, nil); err != nil {
		return err
	}
	res, err := completed(sr)
	if err != nil {
		return err
	}
	if q.opts.Manifest.Capabilities["textStreaming"] && deltas(sr) != res.Text {
		return errors.New("streamed text differs from the result text")
	}
	if q.opts.Live {
		if strings.TrimSpace(res.Text) == "" {
			return errors.New("empty reply")
		}
		return nil
	}
	if res.Text != "Hello fixture" {
		return fmt.Errorf("text %q, want %q", res.Text, "Hello fixture")
	}
	if u := bytes.TrimSpace(res.Usage); string(u) != "{}" {
		return fmt.Errorf("usage %s, want {} (the scenario reports none)", u)
	}
	return nil
}

func (q *qualifier) structured(ctx context.Context, sr *scenarioRun) error {
	req := &protocol.RunRequest{Input: "conformance:structured", OutputSchema: json.RawMessage(okSchema),
		Instructions: q.instructions(`Reply with the JSON object {"ok":true} and nothing else.`, "conformance")}
	if err := q.stream(ctx, sr, req, nil); err != nil {
		return err
	}
	res, err := completed(sr)
	if err != nil {
		return err
	}
	var out map[string]any
	if json.Unmarshal(res.Output, &out) != nil || len(out) != 1 || out["ok"] != true {
		return fmt.Errorf("output %s, want {\"ok\":true}", res.Output)
	}
	if !q.opts.Live && res.Text != `{"ok":true}` {
		return fmt.Errorf("text %q, want {\"ok\":true}", res.Text)
	}
	return nil
}

func (q *qualifier) tools(ctx context.Context, sr *scenarioRun) error {
	req := &protocol.RunRequest{Input: "conformance:tools", Tools: []string{lookupTool},
		Instructions: q.instructions(`Call the conformance_lookup tool once with {"value":7}. Then reply with "tool receipt: " followed by the receipt it returned.`, "conformance")}
	if err := q.stream(ctx, sr, req, nil); err != nil {
		return err
	}
	res, err := completed(sr)
	if err != nil {
		return err
	}
	if n := sr.tool.calls.Load(); n != 1 {
		return fmt.Errorf("the tool ran %d times, want exactly 1", n)
	}
	want := "tool receipt: 7"
	if q.opts.Live {
		if !strings.Contains(res.Text, "7") {
			return fmt.Errorf("reply %q does not mention the receipt", res.Text)
		}
		return nil
	}
	if res.Text != want {
		return fmt.Errorf("text %q, want %q", res.Text, want)
	}
	return nil
}

func (q *qualifier) privateError(ctx context.Context, sr *scenarioRun) error {
	req := &protocol.RunRequest{Input: "conformance:private-error"}
	if err := q.stream(ctx, sr, req, nil); err != nil {
		return err
	}
	if t := terminal(sr); t.Type != runtime.EventRunFailed {
		return fmt.Errorf("run ended with %s, want run.failed", t.Type)
	}
	for _, raw := range sr.raw {
		if bytes.Contains(raw.Data, []byte(secretMarker)) {
			return fmt.Errorf("the private marker appears in event %d (%s)", raw.Sequence, raw.Type)
		}
	}
	return nil
}

func (q *qualifier) cancel(ctx context.Context, sr *scenarioRun) error {
	req := &protocol.RunRequest{Input: "conformance:cancel",
		Instructions: q.instructions("Count from 1 to 500, one number per line.", "conformance")}
	cancelled := false
	err := q.stream(ctx, sr, req, func(run *runtime.Run, ev runtime.Event) {
		// The harness cancels on the first run.progress; a live model
		// streams text instead, so the first text.delta counts too.
		if !cancelled && (ev.Type == runtime.EventRunProgress || (q.opts.Live && ev.Type == runtime.EventTextDelta)) {
			cancelled = true
			run.Cancel(context.Canceled)
		}
	})
	if err != nil {
		return err
	}
	if !cancelled {
		return errors.New("the adapter reported no progress to cancel on")
	}
	t := terminal(sr)
	if t.Type != runtime.EventRunCancelled || t.Error == nil || t.Error.Code != protocol.CodeCancelled {
		return fmt.Errorf("run ended with %s, want run.cancelled CANCELLED", t.Type)
	}
	return nil
}

// countingTools is the conformance tool: {"value": n} → {"receipt": n}.
type countingTools struct{ calls atomic.Int64 }

func (c *countingTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }

func (c *countingTools) Invoke(_ context.Context, call abi.ToolCall, _ func()) (json.RawMessage, error) {
	c.calls.Add(1)
	var a struct {
		Value json.Number `json:"value"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil || a.Value == "" {
		return nil, protocol.New(protocol.CodeToolFailed)
	}
	return json.RawMessage(`{"receipt":` + string(a.Value) + `}`), nil
}

// observe summarizes an event for the report: its type and a short detail
// (a text delta's first bytes, an error code, a tool name).
func observe(raw runtime.Event, start time.Time) ObservedEvent {
	ev := parse(raw)
	o := ObservedEvent{Sequence: raw.Sequence, Type: raw.Type, AtMs: time.Since(start).Milliseconds()}
	switch {
	case raw.Type == runtime.EventTextDelta:
		o.Detail = clip(ev.Text, 60)
	case ev.Error != nil:
		o.Detail = string(ev.Error.Code)
	case ev.Call != nil:
		o.Detail = ev.Call.Name + " " + clip(string(ev.Call.Arguments), 60)
	case ev.Result != nil:
		o.Detail = clip(ev.Result.Text, 60)
	}
	return o
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n-- // keep UTF-8 whole
	}
	return s[:n] + "…"
}
