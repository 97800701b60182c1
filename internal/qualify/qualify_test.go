package qualify

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/manifest"
	"adhost/runtime/protocol"
)

const fakeManifest = `
id = "fake"
name = "Fake provider"
version = "1.2.3"
kind = "provider"
contractVersion = "1.0"
vendor = "fake"
authMode = "none"
usageSource = "adapter-report"
inspect = true

[capabilities]
tools = true
textStreaming = true
`

// fake behaves like a conformant adapter in front of the simulator; the
// flaws switch on one misbehaviour each.
type fake struct {
	leakMarker   bool // put the private marker into visible text
	wrongText    bool
	toolTwice    bool
	noProgress   bool // the cancel scenario waits without reporting progress
	inspectError bool
}

func lastUser(in *abi.CompleteInput) string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == abi.RoleUser {
			return in.Messages[i].Content
		}
	}
	return ""
}

func (f *fake) Complete(ctx context.Context, in *abi.CompleteInput, sink runtime.TurnSink) (*abi.CompleteOutput, error) {
	switch lastUser(in) {
	case "conformance:text":
		text := "Hello fixture"
		if f.wrongText {
			text = "Hello world"
		}
		sink.Text(text[:5])
		sink.Text(text[5:])
		return &abi.CompleteOutput{Text: text, FinishReason: "stop"}, nil
	case "conformance:structured":
		sink.Text(`{"ok":true}`)
		return &abi.CompleteOutput{Text: `{"ok":true}`, FinishReason: "stop"}, nil
	case "conformance:tools":
		last := in.Messages[len(in.Messages)-1]
		if last.Role == abi.RoleTool && !(f.toolTwice && in.Step == 2) {
			sink.Text("tool receipt: 7")
			return &abi.CompleteOutput{Text: "tool receipt: 7", FinishReason: "stop"}, nil
		}
		sink.Progress()
		id := "call_" + string(rune('0'+in.Step))
		return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: id, Name: lookupTool, Arguments: json.RawMessage(`{"value":7}`)}}, FinishReason: "stop"}, nil
	case "conformance:private-error":
		if f.leakMarker {
			sink.Text("oops " + secretMarker)
		}
		return nil, protocol.Wrap(protocol.CodeProviderError, errors.New("upstream said "+secretMarker))
	case "conformance:cancel":
		if !f.noProgress {
			sink.Progress()
		}
		<-ctx.Done()
		return nil, protocol.Wrap(protocol.CodeCancelled, ctx.Err())
	}
	return nil, protocol.New(protocol.CodeProviderError)
}

func (f *fake) Inspect(context.Context) (*abi.InspectOutput, error) {
	if f.inspectError {
		return &abi.InspectOutput{Code: "AUTH_REJECTED"}, nil
	}
	return &abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{"fixture-model"}, Complete: true}, nil
}

func runFake(t *testing.T, f *fake, live bool) *Report {
	t.Helper()
	m, err := manifest.Parse([]byte(fakeManifest))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Options{Provider: f, Manifest: m, SHA256: "abc", Endpoint: "http://127.0.0.1:9/v1/",
		Model: "fixture-model", Live: live, Timeout: 2 * time.Second,
		Now: func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func statuses(rep *Report) map[string]string {
	m := map[string]string{}
	for _, s := range rep.Scenarios {
		m[s.Name] = s.Status
	}
	return m
}

func TestRunConformant(t *testing.T) {
	rep := runFake(t, &fake{}, false)
	if !rep.Passed {
		t.Fatalf("report failed: %s", rep.Markdown())
	}
	want := map[string]string{
		ScenarioDiscovery: StatusPassed, ScenarioText: StatusPassed, ScenarioStructured: StatusPassed,
		ScenarioTools: StatusPassed, ScenarioPrivateError: StatusPassed, ScenarioCancel: StatusPassed,
		ScenarioNative: StatusSkipped,
	}
	got := statuses(rep)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if rep.Endpoint != "http://127.0.0.1:9" || rep.Extension.ID != "fake" || rep.Extension.Version != "1.2.3" || rep.Mode != ModeSimulate {
		t.Errorf("header %+v", rep)
	}
	if rep.Summary != (Summary{Passed: 6, Skipped: 1}) {
		t.Errorf("summary %+v", rep.Summary)
	}
	// The report renders, and its JSON round-trips.
	b, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Schema != ReportSchema || len(back.Scenarios) != len(rep.Scenarios) {
		t.Fatalf("JSON round trip: %v", err)
	}
	md := string(rep.Markdown())
	for _, s := range []string{"fake@1.2.3: PASSED", "| tools | passed |", "`run.completed`", "abc"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
}

func TestRunDetectsFlaws(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        *fake
		scenario string
	}{
		{"leaked marker", &fake{leakMarker: true}, ScenarioPrivateError},
		{"wrong text", &fake{wrongText: true}, ScenarioText},
		{"tool twice", &fake{toolTwice: true}, ScenarioTools},
		{"no progress", &fake{noProgress: true}, ScenarioCancel},
		{"inspect rejected", &fake{inspectError: true}, ScenarioDiscovery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runFake(t, tc.f, false)
			if rep.Passed {
				t.Fatal("report passed")
			}
			for _, s := range rep.Scenarios {
				if s.Name == tc.scenario && (s.Status != StatusFailed || s.Reason == "") {
					t.Errorf("%s: %s (%q), want failed with a reason", s.Name, s.Status, s.Reason)
				}
				if strings.Contains(s.Reason, secretMarker) {
					t.Errorf("reason carries the marker: %q", s.Reason)
				}
			}
		})
	}
}

func TestRunLiveSkipsSyntheticFailure(t *testing.T) {
	rep := runFake(t, &fake{wrongText: true}, true)
	got := statuses(rep)
	if got[ScenarioPrivateError] != StatusSkipped || got[ScenarioText] != StatusPassed || rep.Mode != ModeLive {
		t.Fatalf("statuses %v mode %s", got, rep.Mode)
	}
}
