package main

import (
	"bytes"

	"adhost/sdk-plugin/jsonscan"
)

// skim is a single-pass JSON reader for the per-event path.
//
// Why not jsonscan iterators alone: walking a chunk with nested Iter calls
// scans its bytes four or five times, and in the sandbox (wazero with
// close-on-context-done) a byte-at-a-time Go loop costs ~100 ns per byte,
// which put a 300-byte chunk at ~190 µs — ten times the 20 µs budget.
// skim reads each byte once and finds the ends of strings, which are most
// of a chunk, with bytes.IndexByte (a word-at-a-time memchr in assembly
// on wasm). Values it hands back are spans of the input; the few strings
// the adapter keeps are decoded exactly, with jsonscan when they hold
// escapes or non-ASCII bytes.
//
// It checks the structure of everything it reads (balanced containers,
// member and element separators, terminated strings with valid escapes,
// number grammar, literals, the end of input) but, unlike jsonscan, not
// control characters or UTF-8 inside strings it only skips: those never
// reach the host.
type skim struct {
	d   []byte
	i   int
	bad bool // sticky: a syntax error was found
}

// maxDepth bounds nesting, as jsonscan does, so that hostile input cannot
// grow the stack without limit.
const maxDepth = 10000

func (s *skim) reset(d []byte) { s.d, s.i, s.bad = d, 0, false }

// peek skips whitespace and returns the next byte (0 at the end).
func (s *skim) peek() byte {
	for s.i < len(s.d) {
		switch c := s.d[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// end reports whether only whitespace is left.
func (s *skim) end() bool { return s.peek() == 0 && s.i == len(s.d) }

// str reads a string; [a, b) is its body between the quotes, esc reports
// backslash escapes in it.
func (s *skim) str() (a, b int, esc bool) {
	if s.peek() != '"' {
		s.bad = true
		return 0, 0, false
	}
	s.i++
	a = s.i
	for {
		j := bytes.IndexByte(s.d[s.i:], '"')
		if j < 0 {
			s.bad = true
			return 0, 0, false
		}
		k := bytes.IndexByte(s.d[s.i:s.i+j], '\\')
		if k < 0 {
			b = s.i + j
			s.i = b + 1
			return a, b, esc
		}
		esc = true
		p := s.i + k + 1 // the escaped character
		if p >= len(s.d) {
			s.bad = true
			return 0, 0, false
		}
		switch s.d[p] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p++
		case 'u':
			if p+5 > len(s.d) || !isHex(s.d[p+1]) || !isHex(s.d[p+2]) || !isHex(s.d[p+3]) || !isHex(s.d[p+4]) {
				s.bad = true
				return 0, 0, false
			}
			p += 5
		default:
			s.bad = true
			return 0, 0, false
		}
		s.i = p
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a number per the JSON grammar.
func (s *skim) number() {
	d, i := s.d, s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		s.bad = true
		return
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			s.bad = true
			return
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			s.bad = true
			return
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	s.i = i
}

func (s *skim) literal(lit string) {
	if len(s.d)-s.i < len(lit) || string(s.d[s.i:s.i+len(lit)]) != lit {
		s.bad = true
		return
	}
	s.i += len(lit)
}

// value skips one value and returns its span.
func (s *skim) value() []byte {
	s.peek()
	start := s.i
	s.skip(0)
	if s.bad {
		return nil
	}
	return s.d[start:s.i]
}

func (s *skim) skip(depth int) {
	if depth > maxDepth {
		s.bad = true
		return
	}
	switch c := s.peek(); {
	case c == '"':
		s.str()
	case c == '{':
		s.i++
		for first := true; s.next('}', &first); {
			s.key()
			if s.bad {
				return
			}
			s.skip(depth + 1)
		}
	case c == '[':
		s.i++
		for first := true; s.next(']', &first); {
			s.skip(depth + 1)
		}
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || isDigit(c):
		s.number()
	default:
		s.bad = true
	}
}

// next advances inside the container whose opening byte was consumed:
// before the first element it checks for the closing byte, after an
// element it expects ',' or the closing byte. It returns false at the end
// (closing byte consumed) and on a syntax error (s.bad set). Use:
//
//	for first := true; s.next('}', &first); { k := s.key(); … consume the value … }
func (s *skim) next(closing byte, first *bool) bool {
	if s.bad {
		return false
	}
	c := s.peek()
	if *first {
		*first = false
		if c == closing {
			s.i++
			return false
		}
		return true
	}
	switch c {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
		return false
	}
	s.bad = true
	return false
}

// key reads a member's key and its colon. A key with escapes is decoded
// (vendors never send one; one that fails to decode matches nothing).
func (s *skim) key() []byte {
	a, b, esc := s.str()
	if s.bad || s.peek() != ':' {
		s.bad = true
		return nil
	}
	s.i++
	if esc {
		return unescapeKey(s.d[a-1 : b+1])
	}
	return s.d[a:b]
}

// enter consumes the opening byte of an object ('{') or array ('['),
// reporting false when the next value is something else.
func (s *skim) enter(open byte) bool {
	if s.peek() != open {
		return false
	}
	s.i++
	return true
}

// unescapeKey decodes a quoted key with escapes (vendors never send them;
// a key that fails to decode matches nothing).
func unescapeKey(quoted []byte) []byte {
	v, err := jsonscan.Parse(quoted)
	if err != nil {
		return nil
	}
	b, _ := v.AppendString(nil)
	return b
}

// appendDecoded appends the decoded value of the string literal span
// (quotes included) to dst. Plain ASCII without escapes is copied as is;
// anything else is decoded by jsonscan exactly as encoding/json would
// (escapes, surrogates, invalid UTF-8 → U+FFFD, control characters refused).
func appendDecoded(dst, quoted []byte) ([]byte, bool) {
	body := quoted[1 : len(quoted)-1]
	plain := true
	for _, c := range body {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, body...), true
	}
	v, err := jsonscan.Parse(quoted)
	if err != nil {
		return dst, false
	}
	out, err := v.AppendString(dst)
	return out, err == nil
}

// intOf parses an integer span as jsonscan.Value.Int does (no fraction or
// exponent).
func intOf(span []byte) (int64, bool) {
	v, err := jsonscan.Parse(span)
	if err != nil {
		return 0, false
	}
	n, err := v.Int()
	return n, err == nil
}

// topLevel finds the spans of the members choices, usage, error and object of a
// chunk's top-level object in one tight loop without function calls per
// token: in the sandbox each Go call costs about as much as scanning tens
// of bytes, and a chunk's top level (id, object, created, model,
// system_fingerprint …) is mostly bytes the adapter ignores.
//
// It checks the object's structure — member syntax, terminated strings,
// balanced and matching brackets, the end of input — but not the grammar of
// the scalars and escapes it skips; the spans it returns are read with the
// full checks of skim. slow reports input it does not handle (a key with
// escapes, nesting deeper than 64 inside a skipped member): the caller then
// reads the chunk with skim alone.
func topLevel(d []byte) (choices, usage, errv, object []byte, ok, slow bool) {
	i, n := 0, len(d)
	for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	if i >= n || d[i] != '{' {
		return
	}
	i++
	first := true
	for {
		for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
			i++
		}
		if i >= n {
			return
		}
		if first && d[i] == '}' {
			i++
			break
		}
		first = false
		// Key.
		if d[i] != '"' {
			return
		}
		i++
		ks := i
		j := bytes.IndexByte(d[i:], '"')
		if j < 0 {
			return
		}
		i += j
		key := d[ks:i]
		if bytes.IndexByte(key, '\\') >= 0 {
			slow = true
			return
		}
		i++
		for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
			i++
		}
		if i >= n || d[i] != ':' {
			return
		}
		i++
		for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
			i++
		}
		if i >= n {
			return
		}
		// Value.
		vs := i
		switch c := d[i]; c {
		case '"':
			if i = skipString(d, i+1); i < 0 {
				return
			}
		case '{', '[':
			var stack uint64 // bit per level: 1 = object
			depth := 0
			for i < n {
				c := d[i]
				switch c {
				case '"':
					if i = skipString(d, i+1); i < 0 {
						return
					}
					continue
				case '{', '[':
					if depth == 64 {
						slow = true
						return
					}
					stack = stack<<1 | b2u(c == '{')
					depth++
				case '}', ']':
					if depth == 0 || (stack&1 == 1) != (c == '}') {
						return
					}
					stack >>= 1
					depth--
				}
				i++
				if depth == 0 {
					break
				}
			}
			if depth != 0 {
				return
			}
		default:
			for i < n {
				c := d[i]
				if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
					break
				}
				if c == '"' || c == '{' || c == '[' || c == ':' {
					return
				}
				i++
			}
			if i == vs {
				return
			}
		}
		switch string(key) {
		case "choices":
			choices = d[vs:i]
		case "usage":
			usage = d[vs:i]
		case "error":
			if v := d[vs:i]; !isNull(v) {
				errv = v // the first non-null one fails the chunk
			}
		case "object":
			if v := d[vs:i]; string(v) == `"error"` {
				object = v
			}
		}
		for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
			i++
		}
		if i >= n {
			return
		}
		if d[i] == ',' {
			i++
			continue
		}
		if d[i] != '}' {
			return
		}
		i++
		break
	}
	for i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	ok = i == n
	return
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// skipString returns the index after the closing quote of the string whose
// body starts at i, or -1. Escapes are skipped, not checked. The quote is
// found with bytes.IndexByte (memchr in assembly on wasm); only a body with
// a backslash is walked byte by byte.
func skipString(d []byte, i int) int {
	j := bytes.IndexByte(d[i:], '"')
	if j < 0 {
		return -1
	}
	if bytes.IndexByte(d[i:i+j], '\\') < 0 {
		return i + j + 1
	}
	n := len(d)
	for i < n && d[i] != '"' {
		if d[i] == '\\' {
			i++ // the escaped byte cannot end the string
		}
		i++
	}
	if i >= n {
		return -1
	}
	return i + 1
}
