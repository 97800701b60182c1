package main

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"adhost/abi"
	"adhost/internal/vendorsim"
)

func TestBuildRequestMerges(t *testing.T) {
	in := &abi.CompleteInput{
		Model:           "m",
		MaxOutputTokens: 10,
		Messages: []abi.Message{
			{Role: abi.RoleUser, Content: "first"},
			{Role: abi.RoleUser, Content: "second"}, // merged into one user message
			{Role: abi.RoleAssistant, Content: "", ToolCalls: []abi.ToolCall{
				{ID: "a", Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
				{ID: "b", Name: "g"}, // no arguments: {}
			}},
			{Role: abi.RoleTool, Content: `{"r":1}`, ToolCallID: "a", Name: "f"},
			{Role: abi.RoleTool, Content: `2`, ToolCallID: "b", Name: "g"},
			{Role: abi.RoleUser, Content: "thanks"},   // after the results, same message
			{Role: abi.RoleAssistant, Content: ""},    // empty: dropped
			{Role: abi.RoleUser, Content: "one more"}, // merged again
		},
	}
	body, err := buildRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","max_tokens":10,"messages":[
		{"role":"user","content":[{"type":"text","text":"first"},{"type":"text","text":"second"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{"x":1}},{"type":"tool_use","id":"b","name":"g","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"{\"r\":1}"},{"type":"tool_result","tool_use_id":"b","content":"2"},
			{"type":"text","text":"thanks"},{"type":"text","text":"one more"}]}],"stream":true}`
	if eq, err := vendorsim.JSONEqual(body, []byte(want)); err != nil || !eq {
		t.Errorf("body = %s\nwant %s", body, want)
	}
}

func TestBuildRequestToolResultsFirst(t *testing.T) {
	blocks := []apiBlock{{Type: "text", Text: "a"}, {Type: "tool_result", ToolUseID: "1"}, {Type: "text", Text: "b"}, {Type: "tool_result", ToolUseID: "2"}}
	toolResultsFirst(blocks)
	got := ""
	for _, b := range blocks {
		got += b.Type[:2] + b.Text + b.ToolUseID + " "
	}
	if got != "to1 to2 tea teb " {
		t.Errorf("order = %q", got)
	}
}

func TestBuildRequestToolsAndSystem(t *testing.T) {
	in := &abi.CompleteInput{
		Model: "m", MaxOutputTokens: 5, Instructions: "sys",
		Messages:     []abi.Message{{Role: abi.RoleUser, Content: "hi"}},
		Tools:        []abi.ToolDef{{Name: "t", InputSchema: nil}},
		OutputSchema: json.RawMessage(`{"type":"object"}`),
	}
	body, err := buildRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","max_tokens":5,"system":"sys","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
		"tools":[{"name":"t","input_schema":{"type":"object"}}],"stream":true}`
	if eq, _ := vendorsim.JSONEqual(body, []byte(want)); !eq {
		t.Errorf("body = %s", body)
	}
}

func TestBuildRequestRejects(t *testing.T) {
	for _, in := range []*abi.CompleteInput{
		{Model: "m", MaxOutputTokens: 0, Messages: []abi.Message{{Role: abi.RoleUser, Content: "x"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: "system", Content: "x"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: abi.RoleTool, Content: "x"}}},
		{Model: "m", MaxOutputTokens: 1, Messages: []abi.Message{{Role: abi.RoleAssistant, ToolCalls: []abi.ToolCall{{Name: "f"}}}}},
	} {
		if _, err := buildRequest(in); !errors.Is(err, errBadInput) {
			t.Errorf("buildRequest(%+v) = %v, want errBadInput", in, err)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := mustTime(t, "Mon, 30 Nov 2026 10:00:00 GMT")
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"", 0}, {"2", 2000}, {"0.5", 500}, {"-1", 0}, {"abc", 0}, {"999999999", 0},
		{"Mon, 30 Nov 2026 10:00:30 GMT", 30000}, {"Mon, 30 Nov 2026 09:00:00 GMT", 0},
	} {
		if got := retryAfterMs(tc.in, now); got != tc.want {
			t.Errorf("retryAfterMs(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC1123, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
