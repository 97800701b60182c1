package main

import (
	"encoding/json"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

// event is the part of a `codex exec --json` line the adapter reads (the
// ThreadEvent of codex-rs/exec: thread.started, turn.started,
// item.started/updated/completed, turn.completed with the turn's usage,
// turn.failed, error).
type event struct {
	Type string `json:"type"`
	Item *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Usage *struct {
		InputTokens           *int64 `json:"input_tokens"`
		CachedInputTokens     *int64 `json:"cached_input_tokens"`
		OutputTokens          *int64 `json:"output_tokens"`
		ReasoningOutputTokens *int64 `json:"reasoning_output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// turn follows one run. Codex prints an agent message whole, when it is
// completed, not as token deltas, so the adapter does not stream text
// (textStreaming = false): the messages are joined into the final text.
type turn struct {
	c         *sdk.Call
	text      []byte
	usage     *abi.Usage
	completed bool
	failure   *sdk.Error
}

func (t *turn) Line(line []byte) error {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		return cliturn.Malformed(vendor)
	}
	switch ev.Type {
	case "item.completed":
		if ev.Item != nil && ev.Item.Type == "agent_message" && ev.Item.Text != "" {
			if len(t.text) > 0 {
				t.text = append(t.text, "\n\n"...)
			}
			t.text = append(t.text, ev.Item.Text...)
		}
	case "turn.completed":
		t.completed = true
		if u := ev.Usage; u != nil {
			t.usage = &abi.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
				OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningOutputTokens}
		}
	case "turn.failed":
		msg := ""
		if ev.Error != nil {
			msg = ev.Error.Message
		}
		t.failure = cliturn.Classify(vendor, "turn failed", msg)
	case "error":
		// A stream error (a dropped connection the CLI retries) is
		// reported before the turn fails or recovers; only the turn's end
		// decides.
		if t.failure == nil {
			t.failure = cliturn.Classify(vendor, "error event", ev.Message)
		}
	}
	if t.c.Progress() {
		return sdk.ErrCancelled
	}
	return nil
}

func (t *turn) Finish(exit int, stderr []byte) (*abi.CompleteOutput, error) {
	switch {
	case t.completed && exit == 0:
		return &abi.CompleteOutput{Text: string(t.text), Usage: t.usage, FinishReason: "stop"}, nil
	case t.failure != nil:
		return nil, t.failure
	case exit != 0:
		return nil, cliturn.ExitError(vendor, exit, stderr)
	}
	return nil, sdk.Errorf(sdk.CodeIncompleteStream, "%s: output ended without turn.completed", vendor)
}
