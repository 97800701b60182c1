package manifest

import (
	"strings"
	"testing"
)

const declaredTool = `
[[tools]]
name = "calc"
description = "Calculates."
inputSchema = '{"type":"object","properties":{"expression":{"type":"string"}}}'
outputSchema = '{ "type": "object" }'
sideEffects = false
`

func TestDeclaredTools(t *testing.T) {
	m, err := Parse([]byte(minimalTool + "kv = true\n" + declaredTool + strings.Replace(declaredTool, `"calc"`, `"fetch"`, 1) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	defs := m.ToolDefs()
	if len(defs) != 2 || defs[0].Name != "calc" || string(defs[0].OutputSchema) != `{"type":"object"}` ||
		string(defs[0].InputSchema) != `{"type":"object","properties":{"expression":{"type":"string"}}}` || !m.KV {
		t.Fatalf("defs %+v kv %v", defs, m.KV)
	}
	if m.Tool("calc").HasSideEffects() || m.Tool("nope") != nil {
		t.Fatal("Tool lookup")
	}
}

func TestDeclaredToolErrors(t *testing.T) {
	for name, tc := range map[string]struct{ toml, want string }{
		"provider":           {validProvider + declaredTool, "tools: only a tool extension declares tools"},
		"kv on provider":     {strings.Replace(validProvider, "kind", "kv = true\nkind", 1), "kv: only a tool extension may use kv"},
		"bad name":           {minimalTool + strings.Replace(declaredTool, `"calc"`, `"calc-1"`, 1), "tools[0].name"},
		"duplicate":          {minimalTool + declaredTool + declaredTool, `tools[1].name: duplicate tool "calc"`},
		"no description":     {minimalTool + strings.Replace(declaredTool, `"Calculates."`, `""`, 1), "tools[0].description"},
		"no sideEffects":     {minimalTool + strings.Replace(declaredTool, "sideEffects = false", "", 1), "tools[0].sideEffects: required"},
		"input not object":   {minimalTool + strings.Replace(declaredTool, `{"type":"object","properties":{"expression":{"type":"string"}}}`, `{"type":"string"}`, 1), `tools[0].inputSchema: must have "type": "object"`},
		"input missing":      {minimalTool + strings.Replace(declaredTool, "inputSchema", "#", 1), "tools[0].inputSchema: required"},
		"output invalid":     {minimalTool + strings.Replace(declaredTool, `{ "type": "object" }`, `{"type":12}`, 1), "tools[0].outputSchema: not a valid JSON Schema"},
		"output external":    {minimalTool + strings.Replace(declaredTool, `{ "type": "object" }`, `{"$ref":"https://example.com/s.json"}`, 1), "tools[0].outputSchema: external $ref refused"},
		"bad originsSetting": {minimalTool + "[network]\noriginsSetting = \"-x\"\n", "network.originsSetting"},
		"timeout":            {minimalTool + "[limits]\ntimeoutMs = -1\n", "limits.timeoutMs"},
	} {
		_, err := Parse([]byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}
