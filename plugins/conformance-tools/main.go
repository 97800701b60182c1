package main

import (
	"encoding/json"
	"strconv"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// ID and Version must equal manifests/conformance-tools.toml (a test checks
// it).
const (
	ID      = "conformance-tools"
	Version = "1.0.0"
)

// LookupName is the tool's name.
const LookupName = "conformance_lookup"

// lookupSchema is the tool's input schema: exactly one integer "value".
const lookupSchema = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"],"additionalProperties":false}`

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterTools(tools{})
}

type tools struct{}

func (tools) List() []abi.ToolDef {
	return []abi.ToolDef{{
		Name:        LookupName,
		Description: "Returns a receipt for an integer value (conformance scenario).",
		InputSchema: json.RawMessage(lookupSchema),
	}}
}

// Invoke answers {"receipt": value}. The host validated the arguments
// against the schema already; the checks here keep the tool correct when
// called directly.
func (tools) Invoke(_ *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	if in.Name != LookupName {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "unknown tool %q", in.Name)
	}
	args, err := jsonscan.Parse(in.Arguments)
	if err != nil || args.Kind() != jsonscan.Object {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "arguments are not a JSON object")
	}
	var value jsonscan.Value
	for it := args.Iter(); it.Next(); {
		if !it.Key().Equal("value") {
			return nil, sdk.Errorf(sdk.CodeToolFailed, "unexpected argument %s", it.Key().Raw())
		}
		value = it.Value() // the last "value" wins, as in encoding/json
	}
	if !value.Exists() {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "missing value")
	}
	v, err := value.Int()
	if err != nil {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "value is not an integer: %v", err)
	}
	return json.RawMessage(`{"receipt":` + strconv.FormatInt(v, 10) + `}`), nil
}
