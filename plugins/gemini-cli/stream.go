package main

import (
	"encoding/json"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

// event is the part of a stream-json line the adapter reads (the headless
// mode reference: init, message — user and assistant chunks, delta: true
// for streamed assistant text — tool_use, tool_result, error — warnings
// and errors — and result, the outcome with the run's token stats).
type event struct {
	Type     string `json:"type"`
	Role     string `json:"role"`
	Content  string `json:"content"`
	Delta    bool   `json:"delta"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Status   string `json:"status"`
	Error    *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
		Cached       *int64 `json:"cached"`
	} `json:"stats"`
}

type turn struct {
	c      *sdk.Call
	text   *cliturn.Text
	errMsg string // the last error event's message
	result *event
}

func (t *turn) Line(line []byte) error {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		return cliturn.Malformed(vendor)
	}
	switch ev.Type {
	case "message":
		if ev.Role == "assistant" {
			// Assistant text arrives as deltas; a whole message (no delta
			// flag) is the same text once more only when nothing streamed.
			if ev.Delta || t.text.Len() == 0 {
				return t.text.Add(ev.Content)
			}
		}
	case "error":
		if ev.Severity != "warning" {
			t.errMsg = ev.Message
		}
	case "result":
		if t.result != nil {
			return cliturn.Malformed(vendor)
		}
		t.result = &ev
		return nil
	}
	if t.c.Progress() {
		return sdk.ErrCancelled
	}
	return nil
}

func (t *turn) Finish(exit int, stderr []byte) (*abi.CompleteOutput, error) {
	r := t.result
	switch {
	case r != nil && r.Status != "success":
		msg := t.errMsg
		if r.Error != nil {
			msg = r.Error.Type + " " + r.Error.Message
		}
		return nil, cliturn.Classify(vendor, "result error", msg+"\n"+string(stderr))
	case r == nil && t.errMsg != "":
		return nil, cliturn.Classify(vendor, "error event", t.errMsg+"\n"+string(stderr))
	case exit != 0:
		return nil, cliturn.ExitError(vendor, exit, stderr)
	case r == nil:
		return nil, sdk.Errorf(sdk.CodeIncompleteStream, "%s: output ended without a result", vendor)
	}
	out := &abi.CompleteOutput{Text: t.text.String(), FinishReason: "stop"}
	if s := r.Stats; s != nil && (s.InputTokens != nil || s.OutputTokens != nil) {
		// input_tokens counts the cached part too; cached is that part.
		out.Usage = &abi.Usage{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CachedInputTokens: s.Cached}
	}
	return out, nil
}
