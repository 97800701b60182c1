// Package attachmentstest holds the in-process provider the context and
// retrieval engine tests share: a run that calls one tool and then
// answers has two model steps, so a test can see what the model is given
// again on the second step (binary parts re-sent, evidence re-checked
// between the steps).
package attachmentstest

import (
	"context"
	"encoding/json"
	"sync"

	"adhost/abi"
	"adhost/runtime"
)

// ToolThenAnswer calls the tool Tool (default "t") with {} on step 1 and
// answers Answer on step 2, keeping every input it was given.
type ToolThenAnswer struct {
	Tool, Answer string

	mu  sync.Mutex
	ins []*abi.CompleteInput
}

// Complete implements runtime.Provider.
func (p *ToolThenAnswer) Complete(_ context.Context, in *abi.CompleteInput, _ runtime.TurnSink) (*abi.CompleteOutput, error) {
	p.mu.Lock()
	p.ins = append(p.ins, in)
	p.mu.Unlock()
	if in.Step == 1 {
		tool := p.Tool
		if tool == "" {
			tool = "t"
		}
		return &abi.CompleteOutput{ToolCalls: []abi.ToolCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(`{}`)}}}, nil
	}
	return &abi.CompleteOutput{Text: p.Answer, FinishReason: "stop"}, nil
}

// Inspect implements runtime.Provider: no discovery.
func (p *ToolThenAnswer) Inspect(context.Context) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: "DISCOVERY_UNSUPPORTED"}, nil
}

// Inputs is a copy of the inputs of every step so far, in order.
func (p *ToolThenAnswer) Inputs() []*abi.CompleteInput {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*abi.CompleteInput(nil), p.ins...)
}
