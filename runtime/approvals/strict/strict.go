// Package strict decodes the small strict JSON bodies of the
// interactive-approvals and application-tools endpoints the way the
// upstream schema validator sees them: exact member names, no nulls,
// JavaScript string lengths, numbers as doubles.
package strict

import (
	"bytes"
	"encoding/json"
	"math"

	"adhost/runtime/protocol"
)

// Object decodes raw as a JSON object whose members are all among
// names (case-sensitive, the last duplicate wins as with JSON.parse); a
// null member is absent-but-present, which no field here accepts.
func Object(raw []byte, names ...string) (map[string]json.RawMessage, bool) {
	if !IsObject(raw) {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false
	}
	for k, v := range m {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, false
		}
	}
	return m, true
}

func IsObject(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// String decodes m[k] as a JSON string into dst; an absent field is
// ok unless required.
func String(m map[string]json.RawMessage, k string, dst *string, required bool) bool {
	v, ok := m[k]
	if !ok {
		return !required
	}
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '"' && json.Unmarshal(t, dst) == nil
}

// MaxIDUnits bounds the ids of both endpoints (UTF-16 units).
const MaxIDUnits = 256

// ID decodes a required id string of 1..256 UTF-16 units.
func ID(m map[string]json.RawMessage, k string, dst *string) bool {
	if !String(m, k, dst, true) {
		return false
	}
	n := protocol.UTF16Len(*dst)
	return n >= 1 && n <= MaxIDUnits
}

// integer decodes an integral JSON number (8.0 counts, as for a double
// parser).
func Integer(raw []byte) (int64, bool) {
	var f float64
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) || json.Unmarshal(t, &f) != nil {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Lossless decodes a JSON value as a JavaScript client would see it
// (numbers as doubles) and reports false when that loses something: a
// number beyond the double range. Such arguments would not be preserved
// exactly by validation (§4.3 check 1).
func Lossless(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return toDoubles(v)
}

func toDoubles(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, false
		}
		return f, true
	case map[string]any:
		for k, e := range x {
			d, ok := toDoubles(e)
			if !ok {
				return nil, false
			}
			x[k] = d
		}
	case []any:
		for i, e := range x {
			d, ok := toDoubles(e)
			if !ok {
				return nil, false
			}
			x[i] = d
		}
	}
	return v, true
}
