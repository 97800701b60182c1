package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/sdk-plugin/sdktest"
)

func TestBuildRequestMapping(t *testing.T) {
	in := &abi.CompleteInput{
		Model: "gemini-x", MaxOutputTokens: 7, Instructions: "sys",
		Messages: []abi.Message{
			{Role: abi.RoleUser, Content: "a"},
			{Role: abi.RoleUser, Content: "b"},
			{Role: abi.RoleAssistant, Content: "", ToolCalls: []abi.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}, {ID: "c2", Name: "g"}}},
			{Role: abi.RoleTool, Content: `{"r":1}`, ToolCallID: "c1", Name: "f"},
			{Role: abi.RoleTool, Content: `[1,2]`, ToolCallID: "c2"}, // name from the call, array wrapped
			{Role: abi.RoleTool, Content: `not json`, ToolCallID: "c2", Name: "g"},
			{Role: abi.RoleAssistant, Content: ""}, // dropped
		},
		Tools: []abi.ToolDef{{Name: "f", Description: "d", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`)}, {Name: "g"}},
		// Ignored on a turn with tools.
		OutputSchema: json.RawMessage(`{"type":"object"}`),
	}
	body, err := buildRequest(in, structuredAuto, map[string]string{"c2": "sig2"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[
		{"role":"user","parts":[{"text":"a"},{"text":"b"}]},
		{"role":"model","parts":[{"functionCall":{"name":"f","args":{"x":1}},"thoughtSignature":"skip_thought_signature_validator"},
			{"functionCall":{"name":"g","args":{}},"thoughtSignature":"sig2"}]},
		{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"r":1}}},{"functionResponse":{"name":"g","response":{"output":[1,2]}}},
			{"functionResponse":{"name":"g","response":{"output":"not json"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"f","description":"d","parametersJsonSchema":{"type":"object","additionalProperties":false}},
			{"name":"g","parametersJsonSchema":{"type":"object"}}]}],
		"generationConfig":{"maxOutputTokens":7}}`
	if eq, err := vendorsim.JSONEqual(body, []byte(want)); err != nil || !eq {
		t.Errorf("body = %s", body)
	}
}

func TestBuildRequestRejects(t *testing.T) {
	for _, in := range []*abi.CompleteInput{
		{Model: "m", MaxOutputTokens: 0, Messages: []abi.Message{{Role: abi.RoleUser, Content: "x"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: "system", Content: "x"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: abi.RoleTool, Content: "{}", ToolCallID: "unknown"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{{ID: "x"}}}}},
	} {
		if _, err := buildRequest(in, structuredAuto, nil); !errors.Is(err, errBadInput) {
			t.Errorf("buildRequest(%+v) = %v, want errBadInput", in, err)
		}
	}
}

func TestStructuredConfig(t *testing.T) {
	for _, tc := range []struct {
		name, schema, mode string
		mime               string
		sent               bool
	}{
		{"supported", `{"type":"object","properties":{"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":3}},"required":["ok"],"additionalProperties":false}`, structuredAuto, "application/json", true},
		{"draft marker dropped", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"string"}`, structuredAuto, "application/json", true},
		{"refs and anyOf", `{"$defs":{"n":{"type":"number","minimum":0}},"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}`, structuredAuto, "application/json", true},
		{"const", `{"type":"object","properties":{"ok":{"const":true}}}`, structuredAuto, "application/json", false},
		{"pattern", `{"type":"string","pattern":"^a"}`, structuredAuto, "application/json", false},
		{"allOf", `{"allOf":[{"type":"string"}]}`, structuredAuto, "application/json", false},
		{"boolean enum", `{"enum":[true]}`, structuredAuto, "application/json", false},
		{"bad properties", `{"properties":[1]}`, structuredAuto, "application/json", false},
		{"not an object", `true`, structuredAuto, "application/json", false},
		{"mime mode", `{"type":"object"}`, structuredMime, "application/json", false},
		{"off", `{"type":"object"}`, structuredOff, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mime, js := structuredConfig(json.RawMessage(tc.schema), tc.mode)
			if mime != tc.mime || (js != nil) != tc.sent {
				t.Fatalf("mime %q schema %s", mime, js)
			}
			if js != nil && strings.Contains(string(js), "$schema") {
				t.Errorf("$schema sent: %s", js)
			}
		})
	}
	deep := strings.Repeat(`{"items":`, 100) + `{}` + strings.Repeat(`}`, 100)
	if _, js := structuredConfig(json.RawMessage(deep), structuredAuto); js != nil {
		t.Error("a schema deeper than the bound was sent")
	}
}

func TestModelPath(t *testing.T) {
	for in, want := range map[string]string{
		"gemini-2.5-flash":        "models/gemini-2.5-flash",
		"models/gemini-2.5-flash": "models/gemini-2.5-flash",
		"../x?y#z":                "models/..%2Fx%3Fy%23z",
	} {
		if got := modelPath(in); got != want {
			t.Errorf("modelPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSignaturesThroughSimulator runs a two-step tool loop against the
// simulator, which refuses (like Gemini 3) a function call sent back
// without a thought signature.
func TestSignaturesThroughSimulator(t *testing.T) {
	s := vendorsim.MustNew(t, "gemini", vendorsim.Options{APIKey: testKey})
	opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`))
	in := input(vendorsim.ScenarioTools)
	in.Tools = []abi.ToolDef{lookupTool}
	r := sdktest.Complete(t, provider{}, in, opts)
	if r.Status != abi.StatusOK || len(r.Output.ToolCalls) != 1 {
		t.Fatalf("step 1: %d %+v %+v", r.Status, r.Output, r.Error)
	}
	if sigs := readNative(r.Output.Native); sigs["call_1_0"] != vendorsim.GeminiSignature {
		t.Fatalf("native = %s", r.Output.Native)
	}
	for _, withNative := range []bool{true, false} {
		in2 := input(vendorsim.ScenarioTools)
		in2.Tools, in2.Step = in.Tools, 2
		call := r.Output.ToolCalls[0]
		in2.Messages = append(in2.Messages,
			abi.Message{Role: abi.RoleAssistant, ToolCalls: r.Output.ToolCalls},
			abi.Message{Role: abi.RoleTool, Content: `{"receipt":7}`, ToolCallID: call.ID, Name: call.Name})
		want := skipSignature
		if withNative {
			in2.Native, want = r.Output.Native, vendorsim.GeminiSignature
		}
		r2 := sdktest.Complete(t, provider{}, in2, opts)
		if r2.Status != abi.StatusOK || r2.Output.Text != "tool receipt: 7" {
			t.Fatalf("step 2 (native %v): %d %+v %+v", withNative, r2.Status, r2.Output, r2.Error)
		}
		if sent := string(r2.Requests[0].Body); !strings.Contains(sent, `"thoughtSignature":"`+want+`"`) {
			t.Errorf("step 2 (native %v) sent %s", withNative, sent)
		}
	}
}

func TestNonStreaming(t *testing.T) {
	s := vendorsim.MustNew(t, "gemini", vendorsim.Options{APIKey: testKey})
	opts := hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`","stream":false}`))
	r := sdktest.Complete(t, provider{}, input(vendorsim.ScenarioText), opts)
	if r.Status != abi.StatusOK || r.Output.Text != "Hello fixture" || r.Output.Usage != nil {
		t.Fatalf("%d %+v %+v", r.Status, r.Output, r.Error)
	}
	if u := r.Requests[0].URL; !strings.HasSuffix(u, "/models/gemini-sim:generateContent") {
		t.Errorf("url = %s", u)
	}
	in := input(vendorsim.ScenarioTools)
	in.Tools = []abi.ToolDef{lookupTool}
	r = sdktest.Complete(t, provider{}, in, opts)
	if r.Status != abi.StatusOK || len(r.Output.ToolCalls) != 1 || string(r.Output.ToolCalls[0].Arguments) != `{"value":7}` {
		t.Fatalf("%d %+v %+v", r.Status, r.Output, r.Error)
	}
}

func TestStructuredThroughSimulator(t *testing.T) {
	s := vendorsim.MustNew(t, "gemini", vendorsim.Options{APIKey: testKey})
	in := input(vendorsim.ScenarioStructured)
	in.OutputSchema = json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`)
	r := sdktest.Complete(t, provider{}, in, hostOptions(t, []byte(`{"endpoint":"`+s.Endpoint()+`"}`)))
	if r.Status != abi.StatusOK || r.Output.Text != `{"ok":true}` {
		t.Fatalf("%d %+v %+v", r.Status, r.Output, r.Error)
	}
	body := string(r.Requests[0].Body)
	if !strings.Contains(body, `"responseMimeType":"application/json"`) || !strings.Contains(body, `"responseJsonSchema"`) {
		t.Errorf("request = %s", body)
	}
}
