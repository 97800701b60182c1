package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/sdk-plugin/sdktest"
)

// TestBuffered: a turn the host marks Buffered (nothing reads its text as
// it streams) asks for one chat.completion and reads it; text, tool calls
// and usage come out as from the stream.
func TestBuffered(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		s, ho := sim(t, vendorsim.Options{})
		in := userTurn(vendorsim.ScenarioText)
		in.Buffered = true
		res := sdktest.Complete(t, provider{}, in, ho)
		if res.Status != abi.StatusOK || res.Output.Text != "Hello fixture" || len(res.Output.ToolCalls) != 0 {
			t.Fatalf("status %d output %+v error %+v", res.Status, res.Output, res.Error)
		}
		body := s.Requests()[0].Body
		if !bytes.Contains(body, []byte(`"stream":false`)) || bytes.Contains(body, []byte(`stream_options`)) {
			t.Errorf("request %s, want stream false without stream_options", body)
		}
	})
	t.Run("tools", func(t *testing.T) {
		_, ho := sim(t, vendorsim.Options{})
		in := userTurn(vendorsim.ScenarioTools)
		in.Tools = []abi.ToolDef{lookupTool}
		in.Buffered = true
		res := sdktest.Complete(t, provider{}, in, ho)
		if res.Status != abi.StatusOK || len(res.Output.ToolCalls) != 1 {
			t.Fatalf("status %d output %+v error %+v", res.Status, res.Output, res.Error)
		}
		call := res.Output.ToolCalls[0]
		if call.Name != vendorsim.ConformanceTool || call.ID == "" || !bytes.Equal(call.Arguments, []byte(`{"value":7}`)) {
			t.Fatalf("tool call %+v (%s)", call, call.Arguments)
		}
	})
	t.Run("request", func(t *testing.T) {
		in := userTurn("hi")
		in.Buffered = true
		b, err := buildRequest(&config{maxTokensField: maxCompletionTokens, includeUsage: true}, in)
		if err != nil {
			t.Fatal(err)
		}
		var req map[string]json.RawMessage
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if string(req["stream"]) != "false" || req["stream_options"] != nil {
			t.Errorf("request %s", b)
		}
	})
}
