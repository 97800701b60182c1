package main

import (
	"encoding/json"
	"errors"
	"strconv"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/calculate.toml (a test checks it).
const (
	ID      = "calculate"
	Version = "1.0.0"
)

// ToolName is the tool's name.
const ToolName = "calculate"

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterTools(tools{})
}

type tools struct{}

// List returns the definition the manifest declares; the host offers the
// manifest's (pinned) copy and checks that this one equals it.
func (tools) List() []abi.ToolDef {
	return []abi.ToolDef{{Name: ToolName, Description: description, InputSchema: json.RawMessage(inputSchema)}}
}

// description and inputSchema must equal manifests/calculate.toml.
const (
	description = "Evaluates an arithmetic expression exactly in decimal (0.1 + 0.2 is 0.3): + - * /, ^ with an integer exponent, unary minus, parentheses; 34 significant digits."
	inputSchema = `{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":1000}},"required":["expression"],"additionalProperties":false}`
)

type args struct {
	Expression string `json:"expression"`
}

// Invoke answers {"result": "…"} or, for an expression that is malformed
// or has no value, {"error": "…", "position": n}: that is the tool
// working as intended, reported to the model as output so it can correct
// the expression (a TOOL_FAILED would end the run instead).
func (tools) Invoke(_ *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	if in.Name != ToolName {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "unknown tool %q", in.Name)
	}
	var a args
	if err := json.Unmarshal(in.Arguments, &a); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "arguments do not decode")
	}
	return answer(a.Expression), nil
}

func answer(expr string) json.RawMessage {
	res, err := Evaluate(expr)
	if err == nil {
		return json.RawMessage(`{"result":` + strconv.Quote(res) + `}`)
	}
	var ee *EvalError
	if !errors.As(err, &ee) {
		ee = &EvalError{Msg: err.Error(), Pos: -1}
	}
	b, _ := json.Marshal(struct {
		Error    string `json:"error"`
		Position *int   `json:"position,omitempty"`
	}{ee.Msg, positionOf(ee)})
	return b
}

func positionOf(e *EvalError) *int {
	if e.Pos < 0 {
		return nil
	}
	return &e.Pos
}
