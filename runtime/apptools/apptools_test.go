package apptools

import (
	"encoding/json"
	"strings"
	"testing"

	"adhost/runtime/protocol"
)

func TestDefinitions(t *testing.T) {
	s := New(Config{})
	ok := `{"name":"lookup","description":"d","inputSchema":{"type":"object"}}`
	defs, err := s.Definitions(json.RawMessage(`[` + ok + `,{"name":"save","description":"e","inputSchema":{},"outputSchema":{"type":"object"},"requiresApproval":true}]`))
	if err != nil || len(defs) != 2 || defs[0].Def.Name != "lookup" || defs[0].RequiresApproval ||
		!defs[1].RequiresApproval || string(defs[1].Def.OutputSchema) != `{"type":"object"}` || defs[0].Size != len(ok) {
		t.Fatalf("defs = %+v, %v", defs, err)
	}
	thirtyTwo := "[" + strings.TrimSuffix(strings.Repeat(ok+",", 32), ",") + "]"
	if defs, err := s.Definitions(json.RawMessage(thirtyTwo)); err != nil || len(defs) != 32 {
		t.Errorf("32 definitions: %d, %v", len(defs), err)
	}
	for _, raw := range []string{
		`[]`, `{}`, "[" + strings.Repeat(ok+",", 32) + ok + "]",
		`[{"name":"lookup","description":"","inputSchema":{}}]`,
		`[{"name":"1lookup","description":"d","inputSchema":{}}]`,
		`[{"name":"lookup","description":"d"}]`,
		`[{"name":"lookup","description":"d","inputSchema":[]}]`,
		`[{"name":"lookup","description":"d","inputSchema":{},"outputSchema":true}]`,
		`[{"name":"lookup","description":"d","inputSchema":{},"requiresApproval":"yes"}]`,
		`[{"name":"lookup","description":"d","inputSchema":{},"requiresApproval":null}]`,
		`[{"name":"lookup","description":"d","inputSchema":{},"InputSchema":{}}]`,
		`[{"name":"lookup","description":"` + strings.Repeat("é", 10_001) + `","inputSchema":{}}]`,
	} {
		if _, err := s.Definitions(json.RawMessage(raw)); protocol.CodeOf(err) != protocol.CodeInvalidRequest {
			t.Errorf("%.80s: %v", raw, err)
		}
	}
	// 10,000 UTF-16 units is the bound: a non-BMP character counts two.
	edge := `[{"name":"lookup","description":"` + strings.Repeat("😀", 5000) + `","inputSchema":{}}]`
	if _, err := s.Definitions(json.RawMessage(edge)); err != nil {
		t.Errorf("10,000 units: %v", err)
	}
	if _, err := s.Definitions(json.RawMessage(strings.Replace(edge, "😀", "😀a", 1))); err == nil {
		t.Error("10,001 units accepted")
	}
}

// FuzzDefinitions: whatever the array, an accepted definition has a tool
// name, a bounded description and object schemas.
func FuzzDefinitions(f *testing.F) {
	f.Add(`[{"name":"lookup","description":"d","inputSchema":{"type":"object"},"requiresApproval":false}]`)
	f.Add(`[{"name":"a","description":"\u0000","inputSchema":{},"outputSchema":{"x":[1]},"name":"b"}]`)
	s := New(Config{})
	f.Fuzz(func(t *testing.T, raw string) {
		defs, err := s.Definitions(json.RawMessage(raw))
		if err != nil {
			return
		}
		for _, d := range defs {
			if !protocol.IsToolName(d.Def.Name) || d.Def.Description == "" || protocol.UTF16Len(d.Def.Description) > maxDescription ||
				d.Def.InputSchema[0] != '{' || (d.Def.OutputSchema != nil && d.Def.OutputSchema[0] != '{') || d.Size <= 0 {
				t.Fatalf("accepted %+v", d)
			}
		}
	})
}
