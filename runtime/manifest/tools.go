package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"adhost/abi"
)

// Tool is one [[tools]] entry of a tool extension's manifest: a tool the
// extension serves, declared where the pin covers it. The host offers the
// model exactly this definition (never what the guest says at run time),
// validates arguments against InputSchema before the tool runs and the
// tool's output against OutputSchema after.
type Tool struct {
	Name        string `toml:"name"`
	Description string `toml:"description"`
	// InputSchema is the JSON Schema (text) of the arguments object.
	InputSchema string `toml:"inputSchema"`
	// OutputSchema, when set, is the JSON Schema (text) the tool's output
	// must match; an output that does not is a failed call
	// (TOOL_OUTCOME_UNCERTAIN).
	OutputSchema string `toml:"outputSchema"`
	// SideEffects says whether a call may change something outside the
	// run (send a request, write a note). It is required, so every tool
	// says it explicitly; operators see it in `adhost plugins list` when
	// deciding which tools need approval.
	SideEffects *bool `toml:"sideEffects"`
}

// Bounds of declared tools.
const (
	MaxTools           = 64
	MaxToolDescription = 1024
	MaxToolSchemaBytes = 64_000
	toolSchemaURL      = "adhost:tool.json"
)

// ToolNamePattern is the shape of a tool name (the same as host.toml's).
var ToolNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)

func (m *Manifest) validateTools(bad func(key, format string, args ...any)) {
	if len(m.Tools) > 0 && m.Kind != abi.KindTool {
		bad("tools", "only a tool extension declares tools")
		return
	}
	if len(m.Tools) > MaxTools {
		bad("tools", "more than %d tools", MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range m.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		if !ToolNamePattern.MatchString(t.Name) {
			bad(key+".name", "%q does not match %s", t.Name, ToolNamePattern)
		} else if seen[t.Name] {
			bad(key+".name", "duplicate tool %q", t.Name)
		}
		seen[t.Name] = true
		if n := utf8.RuneCountInString(t.Description); n < 1 || n > MaxToolDescription {
			bad(key+".description", "must be 1..%d characters", MaxToolDescription)
		}
		if t.SideEffects == nil {
			bad(key+".sideEffects", "required: true when a call may change anything outside the run")
		}
		if _, err := compileToolSchema(t.InputSchema, true); err != nil {
			bad(key+".inputSchema", "%v", err)
		}
		if strings.TrimSpace(t.OutputSchema) != "" {
			if _, err := compileToolSchema(t.OutputSchema, false); err != nil {
				bad(key+".outputSchema", "%v", err)
			}
		}
	}
}

// compileToolSchema checks that text is a self-contained JSON Schema; an
// input schema must describe an object (arguments are a JSON object).
func compileToolSchema(text string, input bool) (*jsonschema.Schema, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("required")
	}
	if len(text) > MaxToolSchemaBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxToolSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, errors.New("not valid JSON")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if input && obj["type"] != "object" {
		return nil, errors.New(`must have "type": "object"`)
	}
	return compileSelfContained(doc, toolSchemaURL)
}

// compileSelfContained compiles a decoded schema with external references
// refused and draft-07 as the default.
func compileSelfContained(doc any, url string) (*jsonschema.Schema, error) {
	if obj, ok := doc.(map[string]any); ok {
		if s, ok := obj["$schema"]; ok {
			switch s {
			case "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
				"https://json-schema.org/draft/2020-12/schema":
			default:
				return nil, fmt.Errorf("$schema %v is not draft-07 or 2020-12", s)
			}
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.Is(err, ErrExternalRef) || (errors.As(err, &le) && errors.Is(le.Err, ErrExternalRef)) {
			return nil, ErrExternalRef
		}
		return nil, errors.New("not a valid JSON Schema")
	}
	return sch, nil
}

// ToolDefs returns the declared tools as definitions with compact JSON
// schemas, in manifest order (nil when the manifest declares none).
func (m *Manifest) ToolDefs() []abi.ToolDef {
	var defs []abi.ToolDef
	for _, t := range m.Tools {
		d := abi.ToolDef{Name: t.Name, Description: t.Description, InputSchema: compact(t.InputSchema)}
		if strings.TrimSpace(t.OutputSchema) != "" {
			d.OutputSchema = compact(t.OutputSchema)
		}
		defs = append(defs, d)
	}
	return defs
}

// Tool returns the declared tool called name, or nil.
func (m *Manifest) Tool(name string) *Tool {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i]
		}
	}
	return nil
}

// HasSideEffects reports the declared sideEffects of a tool (false when
// undeclared).
func (t *Tool) HasSideEffects() bool { return t.SideEffects != nil && *t.SideEffects }

func compact(text string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return json.RawMessage(text) // Validate refused it already
	}
	return b.Bytes()
}
