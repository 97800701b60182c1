package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// AppendQuote appends s as a JSON string literal to dst: '"' and '\\'
// escaped, control characters as \n, \r, \t, \b, \f or \u00XX, and invalid
// UTF-8 bytes as \ufffd (as encoding/json does, so that what a host decodes
// is what encoding/json would have produced). Unlike encoding/json it does
// not escape '<', '>', '&', U+2028 or U+2029: the output is for programs,
// not for embedding in HTML.
//
// Runs of plain bytes are found eight at a time and copied whole: a loop
// per byte is what costs in a sandboxed guest.
func AppendQuote(dst []byte, s string) []byte {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	dst = append(dst, '"')
	start, i := 0, 0
	var acc uint64 // the bytes of the pending run, for its non-ASCII check
	for {
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			m := special8(v)
			if m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				acc |= v & (1<<(8*k) - 1)
				i += k
				break
			}
			acc |= v
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			acc |= uint64(b[i])
			i++
		}
		if acc&high == 0 {
			dst = append(dst, b[start:i]...) // ASCII: no call (calls cost in a guest)
		} else {
			dst = appendRun(dst, b[start:i])
		}
		if i >= len(b) {
			return append(dst, '"')
		}
		dst = appendEscape(dst, b[i])
		i++
		start, acc = i, 0
	}
}

// appendRun appends non-ASCII bytes that need no escape, replacing invalid
// UTF-8.
func appendRun(dst, run []byte) []byte {
	if utf8.Valid(run) {
		return append(dst, run...)
	}
	for len(run) > 0 {
		r, n := utf8.DecodeRune(run)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, run[:n]...)
		}
		run = run[n:]
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendEscape appends the escape of a control character, '"' or '\\'.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// AppendCompact appends the JSON value raw to dst without insignificant
// whitespace, as json.Compact does, after validating it: a malformed value
// is a *SyntaxError and dst comes back unchanged. A value without
// whitespace (the usual case) is copied as is.
func AppendCompact(dst, raw []byte) ([]byte, error) {
	if _, err := Parse(raw); err != nil {
		return dst, err
	}
	if !hasWS(raw) {
		return append(dst, raw...), nil
	}
	// Whitespace somewhere: copy token by token, skipping it outside
	// strings. raw is valid, so strings end where skipStringTrusted says.
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case isWS(c):
			i++
		case c == '"':
			end := skipStringTrusted(raw, i)
			dst = append(dst, raw[i:end]...)
			i = end
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst, nil
}

// hasWS reports whether b holds a JSON whitespace byte, eight bytes at a
// time.
func hasWS(b []byte) bool {
	zero := func(x uint64) uint64 { return (x - ones) &^ x & high }
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		if zero(v^' '*ones)|zero(v^'\t'*ones)|zero(v^'\n'*ones)|zero(v^'\r'*ones) != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if isWS(c) {
			return true
		}
	}
	return false
}
