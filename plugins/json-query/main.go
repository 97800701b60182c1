package main

import (
	"context"
	"encoding/json"
	"errors"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/json-query.toml (a test checks it).
const (
	ID      = "json-query"
	Version = "1.0.0"
)

// ToolName is the tool's name.
const ToolName = "json_query"

// description and inputSchema must equal manifests/json-query.toml.
const (
	description = "Runs a jq query (https://jqlang.org/manual/) over a JSON document and returns every result: {\"results\": [...]}."
	inputSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":4096},"document":{}},"required":["query","document"],"additionalProperties":false}`
)

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterTools(tools{})
}

type tools struct{}

func (tools) List() []abi.ToolDef {
	return []abi.ToolDef{{Name: ToolName, Description: description, InputSchema: json.RawMessage(inputSchema)}}
}

type args struct {
	Query    string          `json:"query"`
	Document json.RawMessage `json:"document"`
}

// Invoke answers {"results": [...]} or, for a query that does not parse
// or fails on the document, {"error": "…"} (with "position" for a parse
// error): the model reads it and can correct the query.
func (tools) Invoke(_ *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	if in.Name != ToolName {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "unknown tool %q", in.Name)
	}
	var a args
	if err := json.Unmarshal(in.Arguments, &a); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "arguments do not decode")
	}
	// No context of its own: the host stops a cancelled or runaway guest
	// at its next checkpoint, wherever gojq is.
	return answer(context.Background(), a.Query, a.Document), nil
}

func answer(ctx context.Context, query string, doc json.RawMessage) json.RawMessage {
	res, err := Query(ctx, query, doc)
	if err == nil {
		return append(append(json.RawMessage(`{"results":`), res...), '}')
	}
	var qe *QueryError
	if !errors.As(err, &qe) {
		qe = &QueryError{Msg: err.Error(), Pos: -1}
	}
	out := struct {
		Error    string `json:"error"`
		Position *int   `json:"position,omitempty"`
	}{Error: qe.Msg}
	if qe.Pos >= 0 {
		out.Position = &qe.Pos
	}
	b, _ := json.Marshal(out)
	return b
}
