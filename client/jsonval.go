package client

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The helpers below read JSON the way upstream's JavaScript clients do:
// property names are matched exactly (encoding/json's struct decoding would
// fold case, and "keys differing only by case are extra fields"), null is a
// value of its own and never means "absent", and numbers are doubles.

// object is a decoded JSON object; a missing key yields a nil RawMessage.
type object map[string]json.RawMessage

// firstByte returns the first non-whitespace byte of raw, or 0.
func firstByte(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// parseObject decodes raw as a JSON object. It fails for invalid UTF-8,
// invalid JSON and every non-object value (null included).
func parseObject(raw []byte) (object, bool) {
	if firstByte(raw) != '{' || !utf8.Valid(raw) {
		return nil, false
	}
	var m object
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false
	}
	return m, true
}

// asObject is parseObject for an already extracted member.
func asObject(raw json.RawMessage) (object, bool) {
	if raw == nil {
		return nil, false
	}
	return parseObject(raw)
}

func asString(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func asNonEmptyString(raw json.RawMessage) (string, bool) {
	s, ok := asString(raw)
	return s, ok && s != ""
}

func asBool(raw json.RawMessage) (bool, bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func asNumber(raw json.RawMessage) (float64, bool) {
	c := firstByte(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER (2^53−1).
const maxSafeInteger = 1<<53 - 1

// asSafeInt accepts an integral JSON number within ±(2^53−1); 8.0 counts as
// 8, as it does for a double-based parser.
func asSafeInt(raw json.RawMessage) (int64, bool) {
	f, ok := asNumber(raw)
	if !ok || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return 0, false
	}
	return int64(f), true
}

func asStringArray(raw json.RawMessage) ([]string, bool) {
	if firstByte(raw) != '[' {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := asString(it)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func asArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	if firstByte(raw) != '[' {
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	return items, true
}

// asTimestamp accepts an RFC 3339 date-time with an explicit offset (Z or
// ±hh:mm), fractional seconds optional.
func asTimestamp(raw json.RawMessage) (time.Time, bool) {
	s, ok := asString(raw)
	if !ok || len(s) < len("2006-01-02T15:04:05Z") {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
