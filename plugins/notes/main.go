package main

import (
	"encoding/json"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/notes.toml (a test checks it).
const (
	ID      = "notes"
	Version = "1.0.0"
)

// ToolName is the tool's name.
const ToolName = "notes"

// description and inputSchema must equal manifests/notes.toml.
const (
	description = "Keeps small text notes for the current user across runs: put a note under a key, get it, delete it, or list the keys (at most 100 notes of 4096 bytes)."
	inputSchema = `{"type":"object","properties":{"op":{"enum":["put","get","delete","list"]},"key":{"type":"string","minLength":1,"maxLength":128},"value":{"type":"string","maxLength":4096}},"required":["op"],"additionalProperties":false,"allOf":[{"if":{"properties":{"op":{"const":"put"}}},"then":{"required":["key","value"]}},{"if":{"properties":{"op":{"enum":["get","delete"]}}},"then":{"required":["key"]}}]}`
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

// Invoke runs one operation on the run's subject's notes: the host
// chooses the subject, so a note is only ever seen by the user who wrote
// it.
func (tools) Invoke(c *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	if in.Name != ToolName {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "unknown tool %q", in.Name)
	}
	return run(c.KV(), in.Arguments)
}
