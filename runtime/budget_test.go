package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

type budgetsFunc func(subject, account string) []Budget

func (f budgetsFunc) Budgets(subject, account string) []Budget { return f(subject, account) }

// usageProvider calls conformance_lookup once, then answers; every
// response reports u (nil: no usage).
func usageProvider(u *abi.Usage) *fakeProvider {
	return &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		if in.Messages[len(in.Messages)-1].Role == abi.RoleTool {
			return &abi.CompleteOutput{Text: "done", Usage: u}, nil
		}
		return &abi.CompleteOutput{Usage: u, ToolCalls: []abi.ToolCall{{ID: "c1", Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":7}`)}}}, nil
	}}
}

func tokens(in, out int64) *abi.Usage { return &abi.Usage{InputTokens: &in, OutputTokens: &out} }

// TestBudgets: a budget is checked after each model response, before its
// tools: at the edge the run goes on, one token over it fails with
// RESOURCE_LIMIT before the tool runs; reject stops at the first response
// that leaves a limited total unknown, allow goes on; the subject's and
// the account's budgets both hold.
func TestBudgets(t *testing.T) {
	cost := 0.5
	withCost := tokens(10, 5)
	withCost.CostUSD = &cost
	for _, tc := range []struct {
		name    string
		usage   *abi.Usage
		budgets []Budget
		code    protocol.Code // "" completed
		calls   int           // tool calls made
	}{
		{"under", tokens(10, 5), []Budget{{MaxTokens: 30}}, "", 1},
		{"edge of the first step", tokens(10, 5), []Budget{{MaxTokens: 15}}, protocol.CodeResourceLimit, 1},
		{"over before the tool", tokens(10, 5), []Budget{{MaxTokens: 14}}, protocol.CodeResourceLimit, 0},
		{"unknown rejected", nil, []Budget{{MaxTokens: 1000, RejectUnknown: true}}, protocol.CodeResourceUsageUnknown, 0},
		{"unknown allowed", nil, []Budget{{MaxTokens: 1000}}, "", 1},
		{"cost unknown rejected", tokens(1, 1), []Budget{{MaxCostUSD: 10, RejectUnknown: true}}, protocol.CodeResourceUsageUnknown, 0},
		{"cost unknown allowed", tokens(1, 1), []Budget{{MaxCostUSD: 10}}, "", 1},
		{"cost at the edge", withCost, []Budget{{MaxCostUSD: 1, RejectUnknown: true}}, "", 1},
		{"cost over", withCost, []Budget{{MaxCostUSD: 0.75}}, protocol.CodeResourceLimit, 1},
		{"tightest of two", tokens(10, 5), []Budget{{MaxTokens: 1000}, {MaxTokens: 14}}, protocol.CodeResourceLimit, 0},
		{"unlimited reject is nothing to establish", nil, []Budget{{RejectUnknown: true}}, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked [2]string
			env := newEnv(t, usageProvider(tc.usage), func(o *Options, _ *ProviderInstance) {
				o.Budgets = budgetsFunc(func(s, a string) []Budget { asked = [2]string{s, a}; return tc.budgets })
			})
			run := env.start(t, req("x", withTools("conformance_lookup")), ModeJSON)
			_, err := run.Wait(t.Context())
			if got := protocol.CodeOf(err); err != nil && got != tc.code || err == nil && tc.code != "" {
				t.Fatalf("outcome %v, want %q", err, tc.code)
			}
			if err != nil && protocol.HTTPStatus(protocol.CodeOf(err)) != 403 {
				t.Fatalf("status %d", protocol.HTTPStatus(protocol.CodeOf(err)))
			}
			if n := env.tools.count("conformance_lookup"); n != tc.calls {
				t.Fatalf("tool ran %d times, want %d", n, tc.calls)
			}
			if asked != [2]string{"alice", "acct"} {
				t.Fatalf("policy asked for %v", asked)
			}
		})
	}
}
