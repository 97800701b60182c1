package approvals

import (
	"encoding/json"
	"testing"

	"adhost/abi"
)

func abiCall(args string) abi.ToolCall {
	return abi.ToolCall{ID: "c1", Name: "t", Arguments: json.RawMessage(args)}
}

// FuzzParseDecision: any body either is refused or decodes to a decision
// whose fields are within their bounds, and decoding it again agrees.
func FuzzParseDecision(f *testing.F) {
	f.Add(`{"approvalId":"a","runId":"r","call":{"id":"c","name":"t","arguments":{"x":[1,2.5,"s",null,{"y":true}]}},"decision":"approve"}`)
	f.Add(`{"approvalId":"a","runId":"r","call":{"id":"c","name":"t","arguments":{}},"decision":"cancel","approvalId":"b"}`)
	f.Add(`{"approvalId":"\ud83c","runId":"r","call":{"id":"c","name":"t","arguments":{"n":1e308}},"decision":"deny"}`)
	f.Fuzz(func(t *testing.T, body string) {
		d, ok := parseDecision([]byte(body))
		if !ok {
			return
		}
		if d.approvalID == "" || d.runID == "" || d.callID == "" || d.callName == "" || d.outcome == 0 {
			t.Fatalf("accepted an incomplete decision %+v", d)
		}
		if _, ok := d.args.(map[string]any); !ok {
			t.Fatalf("arguments are not an object: %T", d.args)
		}
		again, ok := parseDecision([]byte(body))
		if !ok || again.approvalID != d.approvalID || again.outcome != d.outcome {
			t.Fatal("decoding is not deterministic")
		}
	})
}
