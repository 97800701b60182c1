package runtime

import (
	"context"
	"encoding/json"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// TestToolOutputSchema: a tool that declares an output schema has its
// output checked after it ran; an output the schema refuses is no
// confirmed output (TOOL_OUTCOME_UNCERTAIN, outcome "uncertain"), and the
// schema is never offered to the model.
func TestToolOutputSchema(t *testing.T) {
	const out = `{"type":"object","properties":{"result":{"type":"string"}},"required":["result"],"additionalProperties":false}`
	for _, tc := range []struct {
		name   string
		output string
		want   protocol.Code
	}{
		{"matches", `{"result":"0.3"}`, ""},
		{"wrong type", `{"result":0.3}`, protocol.CodeToolOutcomeUncertain},
		{"extra member", `{"result":"1","x":1}`, protocol.CodeToolOutcomeUncertain},
		{"not an object", `"0.3"`, protocol.CodeToolOutcomeUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, toolCaller(1, 2), func(o *Options, _ *ProviderInstance) {
				set := o.Tools[0].Set.(*fakeTools)
				set.fns["calc"] = func(context.Context, json.RawMessage, func()) (json.RawMessage, error) {
					return json.RawMessage(tc.output), nil
				}
				o.Tools = append(o.Tools, &Tool{Set: set, Def: abi.ToolDef{
					Name: "calc", Description: "calc", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(out),
				}})
			})
			var offered []abi.ToolDef
			env.prov.complete = func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
				offered = in.Tools
				if in.Step == 2 {
					return &abi.CompleteOutput{Text: "done"}, nil
				}
				return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c", Name: "calc", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			evs := env.stream(t, req("x", withTools("calc")))
			last := terminalOf(evs)
			if codeOf(last) != string(tc.want) {
				t.Fatalf("terminal code %q, want %q", codeOf(last), tc.want)
			}
			if tc.want != "" && last.errorInfo()["outcome"] != "uncertain" {
				t.Fatalf("terminal %v", last)
			}
			if len(offered) != 1 || offered[0].Name != "calc" || offered[0].OutputSchema != nil {
				t.Fatalf("offered %+v", offered)
			}
		})
	}
}

func TestToolOutputSchemaInvalid(t *testing.T) {
	_, err := New(Options{Tools: []*Tool{{Set: &fakeTools{}, Def: abi.ToolDef{
		Name: "calc", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":12}`),
	}}}})
	if err == nil {
		t.Fatal("New accepted an invalid output schema")
	}
}

// TestToolsRunSerially: the calls of one step run one at a time, in the
// provider's order, each seeing the previous one finished.
func TestToolsRunSerially(t *testing.T) {
	var (
		mu       sync.Mutex
		inFlight int
		maxSeen  int
		order    []string
	)
	env := newEnv(t, toolCaller(1, 2), withTool("slow", `{"type":"object","properties":{"i":{"type":"string"}}}`, false,
		func(_ context.Context, args json.RawMessage, _ func()) (json.RawMessage, error) {
			mu.Lock()
			inFlight++
			maxSeen = max(maxSeen, inFlight)
			order = append(order, string(args))
			mu.Unlock()
			goruntime.Gosched() // give a concurrent call the chance to overlap
			mu.Lock()
			inFlight--
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		}))
	env.prov.complete = func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		if in.Step == 2 {
			return &abi.CompleteOutput{Text: "done"}, nil
		}
		var calls []abi.ToolCall
		for _, i := range []string{"a", "b", "c", "d"} {
			calls = append(calls, abi.ToolCall{ID: "c" + i, Name: "slow", Arguments: json.RawMessage(`{"i":"` + i + `"}`)})
		}
		return &abi.CompleteOutput{ToolCalls: calls}, nil
	}
	if _, err := env.start(t, req("x", withTools("slow")), ModeJSON).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if maxSeen != 1 || strings.Join(order, "") != `{"i":"a"}{"i":"b"}{"i":"c"}{"i":"d"}` {
		t.Fatalf("max in flight %d, order %v", maxSeen, order)
	}
}
