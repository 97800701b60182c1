package main

import (
	"encoding/json"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

// event is the part of a stream-json line the adapter reads. Lines are
// objects with a "type": system (init), stream_event (a raw Messages API
// stream event, with --include-partial-messages), assistant and user (whole
// messages of the CLI's agent loop), result (the last line: the final
// text, cost and usage, or an error subtype).
type event struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Event   *struct {
		Type  string `json:"type"`
		Delta *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	Message *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	} `json:"message"`
	IsError      bool     `json:"is_error"`
	Result       *string  `json:"result"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	Usage        *struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

// turn follows one run's events.
type turn struct {
	c      *sdk.Call
	text   *cliturn.Text
	deltas bool // a stream_event text delta arrived: whole messages repeat it
	// last is the text of the last whole assistant message, used when no
	// delta was streamed (a buffered turn).
	last   string
	result *event
}

func newTurn(c *sdk.Call, stream bool) *turn {
	return &turn{c: c, text: cliturn.NewText(c, stream)}
}

func (t *turn) Line(line []byte) error {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
		return cliturn.Malformed(vendor)
	}
	switch ev.Type {
	case "stream_event":
		if ev.Event != nil && ev.Event.Type == "content_block_delta" && ev.Event.Delta != nil && ev.Event.Delta.Type == "text_delta" {
			t.deltas = true
			return t.text.Add(ev.Event.Delta.Text)
		}
		return t.progress()
	case "assistant":
		if ev.Message != nil {
			s := ""
			for _, b := range ev.Message.Content {
				if b.Type == "text" {
					s += b.Text
				}
			}
			if s != "" {
				t.last = s
			}
		}
		return t.progress()
	case "result":
		if t.result != nil {
			return cliturn.Malformed(vendor)
		}
		t.result = &ev
		return nil
	}
	// system, user (tool results inside the CLI's own loop) and events of
	// later releases: the CLI is working.
	return t.progress()
}

func (t *turn) progress() error {
	if t.c.Progress() {
		return sdk.ErrCancelled
	}
	return nil
}

func (t *turn) Finish(exit int, stderr []byte) (*abi.CompleteOutput, error) {
	r := t.result
	switch {
	case r != nil && (r.IsError || r.Subtype != "success"):
		kind := "result error"
		if sdk.SafeToken(r.Subtype) {
			kind += " " + r.Subtype
		}
		msg := ""
		if r.Result != nil {
			msg = *r.Result
		}
		return nil, cliturn.Classify(vendor, kind, msg+"\n"+string(stderr))
	case exit != 0:
		return nil, cliturn.ExitError(vendor, exit, stderr)
	case r == nil:
		return nil, sdk.Errorf(sdk.CodeIncompleteStream, "%s: output ended without a result", vendor)
	}
	out := &abi.CompleteOutput{FinishReason: "stop"}
	switch {
	case t.text.Len() > 0:
		// What was streamed is the text (the host checks they are equal);
		// with tool use inside the CLI it spans every assistant message.
		out.Text = t.text.String()
	case r.Result != nil:
		out.Text = *r.Result
	default:
		out.Text = t.last
	}
	if r.Usage != nil || r.TotalCostUSD != nil {
		out.Usage = usage(r)
	}
	if r.Subtype == "error_max_turns" {
		out.FinishReason = "length"
	}
	return out, nil
}

// usage maps the result's usage. input_tokens excludes the cache reads and
// writes, which abi.Usage counts as input (as the anthropic adapter does).
// The CLI's total_cost_usd is what the run would cost at API prices; under
// a subscription nothing is billed per token, so it is the API-equivalent
// cost, not a charge.
func usage(r *event) *abi.Usage {
	u := &abi.Usage{}
	if r.TotalCostUSD != nil && *r.TotalCostUSD >= 0 {
		u.APIEquivalentCostUSD = cliturn.Float64(*r.TotalCostUSD)
	}
	if ru := r.Usage; ru != nil {
		if ru.InputTokens != nil {
			total := *ru.InputTokens
			if ru.CacheReadInputTokens != nil {
				total += *ru.CacheReadInputTokens
				u.CachedInputTokens = cliturn.Int64(*ru.CacheReadInputTokens)
			}
			if ru.CacheCreationInputTokens != nil {
				total += *ru.CacheCreationInputTokens
				u.CacheCreationInputTokens = cliturn.Int64(*ru.CacheCreationInputTokens)
			}
			u.InputTokens = cliturn.Int64(total)
		}
		u.OutputTokens = ru.OutputTokens
	}
	return u
}
