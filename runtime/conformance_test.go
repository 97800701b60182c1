package runtime

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"adhost/runtime/protocol"
)

const okSchema = `{"type":"object","properties":{"ok":{"const":true}},"required":["ok"],"additionalProperties":false}`

// TestConformanceScenarios drives the scenarios of wire-core §16 through a
// fake provider that behaves like plugins/fixture, in both modes and with
// and without streaming.
func TestConformanceScenarios(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := "streaming"
		if !stream {
			name = "non-streaming"
		}
		t.Run(name, func(t *testing.T) {
			t.Run("text", func(t *testing.T) {
				env := newEnv(t, conformanceProvider(stream), func(_ *Options, p *ProviderInstance) {
					p.Capabilities["textStreaming"] = stream
				})
				evs := env.stream(t, req("conformance:text"))
				res := terminalOf(evs).result()
				if res["text"] != "Hello fixture" || textOf(evs) != "Hello fixture" {
					t.Fatalf("text %q, deltas %q", res["text"], textOf(evs))
				}
				if u := res["usage"].(map[string]any); len(u) != 0 {
					t.Fatalf("usage = %v, want {}", u)
				}
				if _, ok := res["output"]; ok {
					t.Fatal("output present without outputSchema")
				}
				got, err := env.start(t, req("conformance:text"), ModeJSON).Wait(t.Context())
				if err != nil || got.Text != "Hello fixture" || got.Steps != 1 || got.FinishReason != "stop" {
					t.Fatalf("JSON result %+v, %v", got, err)
				}
			})
			t.Run("structured", func(t *testing.T) {
				env := newEnv(t, conformanceProvider(stream), func(_ *Options, p *ProviderInstance) {
					p.Capabilities["textStreaming"] = stream
				})
				r := req("conformance:structured", func(r *protocol.RunRequest) { r.OutputSchema = json.RawMessage(okSchema) })
				evs := env.stream(t, r)
				res := terminalOf(evs).result()
				if res["text"] != `{"ok":true}` || !reflect.DeepEqual(res["output"], map[string]any{"ok": true}) {
					t.Fatalf("result %v", res)
				}
				got, err := env.start(t, r, ModeJSON).Wait(t.Context())
				if err != nil || string(got.Output) != `{"ok":true}` {
					t.Fatalf("JSON result %+v, %v", got, err)
				}
			})
			t.Run("tools", func(t *testing.T) {
				env := newEnv(t, conformanceProvider(stream), func(_ *Options, p *ProviderInstance) {
					p.Capabilities["textStreaming"] = stream
				})
				evs := env.stream(t, req("conformance:tools", withTools("conformance_lookup")))
				if got := terminalOf(evs).result()["text"]; got != "tool receipt: 7" {
					t.Fatalf("text %q", got)
				}
				if n := env.tools.count("conformance_lookup"); n != 1 {
					t.Fatalf("tool ran %d times, want 1", n)
				}
				want := []string{"run.started", "step.started", "tool.called", "tool.completed", "step.started", "text.delta", "run.completed"}
				if got := types(evs); !reflect.DeepEqual(got, want) {
					t.Fatalf("types %v\nwant  %v", got, want)
				}
				call := evs[2]["call"].(map[string]any)
				if !reflect.DeepEqual(call["arguments"], map[string]any{"value": json.Number("7")}) {
					t.Fatalf("call %v", call)
				}
				if !reflect.DeepEqual(evs[3]["output"], map[string]any{"receipt": json.Number("7")}) {
					t.Fatalf("output %v", evs[3]["output"])
				}
			})
			t.Run("private-error", func(t *testing.T) {
				env := newEnv(t, conformanceProvider(stream))
				for _, in := range []string{"conformance:private-error", "conformance:private-error-public"} {
					run := env.start(t, req(in), ModeStream)
					raw := collect(t, run)
					evs := checkStream(t, raw, "p", "m")
					if terminalOf(evs).typ() != EventRunFailed {
						t.Fatalf("%s: terminal %s", in, terminalOf(evs).typ())
					}
					for _, ev := range raw {
						if strings.Contains(string(ev.Data), secretMarker) {
							t.Fatalf("%s: marker in %s", in, ev.Data)
						}
					}
					_, err := env.start(t, req(in), ModeJSON).Wait(t.Context())
					pe, ok := err.(*protocol.Error)
					if !ok || strings.Contains(pe.Message, secretMarker) || strings.Contains(string(protocol.ErrorBody(pe)), secretMarker) {
						t.Fatalf("%s: JSON error %v", in, err)
					}
				}
			})
			t.Run("cancel", func(t *testing.T) {
				env := newEnv(t, conformanceProvider(stream))
				run := env.start(t, req("conformance:cancel"), ModeStream)
				var raw []Event
				for {
					ev, err := run.Next(t.Context())
					if err != nil {
						break
					}
					raw = append(raw, ev)
					if ev.Type == EventRunProgress {
						run.Cancel(context.Canceled)
					}
				}
				evs := checkStream(t, raw, "p", "m")
				last := terminalOf(evs)
				if last.typ() != EventRunCancelled || codeOf(last) != "CANCELLED" {
					t.Fatalf("terminal %v", last)
				}
			})
		})
	}
}
