package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendRunResult appends the JSON of r exactly as encoding/json encodes
// it (json.Marshal when escapeHTML is true; a json.Encoder with
// SetEscapeHTML(false), minus its newline, otherwise). A JSON-mode answer
// and run.completed encode one per run; doing it by hand saves the
// reflection. A test compares both encoders.
func AppendRunResult(b []byte, r *RunResult, escapeHTML bool) ([]byte, error) {
	b = append(b, `{"runId":`...)
	b = AppendJSONString(b, r.RunID, escapeHTML)
	b = append(b, `,"provider":`...)
	b = AppendJSONString(b, r.Provider, escapeHTML)
	b = append(b, `,"model":`...)
	b = AppendJSONString(b, r.Model, escapeHTML)
	b = append(b, `,"text":`...)
	b = AppendJSONString(b, r.Text, escapeHTML)
	if len(r.Output) > 0 {
		b = append(b, `,"output":`...)
		var c bytes.Buffer
		c.Grow(len(r.Output))
		if err := json.Compact(&c, r.Output); err != nil {
			return nil, err
		}
		if escapeHTML {
			var e bytes.Buffer
			e.Grow(c.Len())
			json.HTMLEscape(&e, c.Bytes())
			c = e
		}
		b = append(b, c.Bytes()...)
	}
	b = append(b, `,"usage":`...)
	var err error
	if b, err = AppendUsage(b, &r.Usage); err != nil {
		return nil, err
	}
	b = append(b, `,"steps":`...)
	b = strconv.AppendInt(b, int64(r.Steps), 10)
	b = append(b, `,"finishReason":`...)
	b = AppendJSONString(b, r.FinishReason, escapeHTML)
	if len(r.Session) > 0 {
		// Built by the host from its own strings (ids, timestamps):
		// compact, and nothing to escape for HTML.
		b = append(b, `,"session":`...)
		b = append(b, r.Session...)
	}
	for _, f := range [...]struct {
		name string
		raw  json.RawMessage
	}{{`,"retrieval":`, r.Retrieval}, {`,"sources":`, r.Sources}, {`,"artifacts":`, r.Artifacts}} {
		if len(f.raw) > 0 {
			b = append(b, f.name...)
			var err error
			if b, err = appendRaw(b, f.raw, escapeHTML); err != nil {
				return nil, err
			}
		}
	}
	return append(b, '}'), nil
}

// appendRaw appends raw as encoding/json marshals a json.RawMessage:
// compacted, and HTML-escaped when escapeHTML is set.
func appendRaw(b []byte, raw json.RawMessage, escapeHTML bool) ([]byte, error) {
	var c bytes.Buffer
	c.Grow(len(raw))
	if err := json.Compact(&c, raw); err != nil {
		return nil, err
	}
	if !escapeHTML {
		return append(b, c.Bytes()...), nil
	}
	var e bytes.Buffer
	e.Grow(c.Len())
	json.HTMLEscape(&e, c.Bytes())
	return append(b, e.Bytes()...), nil
}

// AppendUsage appends the JSON of u as encoding/json encodes it.
func AppendUsage(b []byte, u *Usage) ([]byte, error) {
	b = append(b, '{')
	mark := len(b)
	sep := func(b []byte, name string) []byte {
		if len(b) > mark {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		return append(b, '"', ':')
	}
	for _, f := range [...]struct {
		name string
		v    *int64
	}{
		{"inputTokens", u.InputTokens},
		{"outputTokens", u.OutputTokens},
		{"cachedInputTokens", u.CachedInputTokens},
		{"reasoningTokens", u.ReasoningTokens},
	} {
		if f.v != nil {
			b = strconv.AppendInt(sep(b, f.name), *f.v, 10)
		}
	}
	for _, f := range [...]struct {
		name string
		v    *float64
	}{
		{"costUsd", u.CostUSD},
		{"apiEquivalentCostUsd", u.APIEquivalentCostUSD},
	} {
		if f.v != nil {
			var err error
			if b, err = appendJSONFloat(sep(b, f.name), *f.v); err != nil {
				return nil, err
			}
		}
	}
	return append(b, '}'), nil
}

// appendJSONFloat formats f as encoding/json formats a float64.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe and htmlSafe mark the bytes AppendJSONString copies as they
// are: ASCII other than controls, quote and backslash (and, for htmlSafe,
// <, > and &). One table load per byte instead of a chain of comparisons
// doubles the speed of the common, all-ASCII text.
var jsonSafe, htmlSafe = safeTables()

func safeTables() (js, html [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		js[c] = c != '"' && c != '\\'
		html[c] = js[c] && c != '<' && c != '>' && c != '&'
	}
	return js, html
}

// AppendJSONString appends s as encoding/json encodes a string: quote,
// backslash and control characters escaped (\b \f \n \r \t in short form),
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by \ufffd, and <, >, &
// escaped when escapeHTML is set.
//
// It is the one string escaper of the host: events (escapeHTML false, as
// the engine writes them), JSON-mode bodies and the wasm boundary (true,
// byte-for-byte what json.Marshal writes) all use it.
func AppendJSONString(b []byte, s string, escapeHTML bool) []byte {
	safe := &jsonSafe
	if escapeHTML {
		safe = &htmlSafe
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if safe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
