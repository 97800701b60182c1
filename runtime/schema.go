package runtime

import (
	"encoding/json"

	"adhost/runtime/schema"
)

// validator is what the engine needs from a compiled JSON Schema
// (runtime/schema's *Schema).
type validator interface {
	ValidateJSON(raw []byte) error
}

// compileSchema compiles an output or tool input schema. Its error is an
// INVALID_SCHEMA *protocol.Error.
func compileSchema(raw json.RawMessage) (validator, error) {
	s, err := schema.Compile(raw)
	if err != nil {
		return nil, err
	}
	return s, nil
}
