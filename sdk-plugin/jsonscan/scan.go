package jsonscan

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
)

// maxDepth is encoding/json's nesting limit: a document nested deeper is an
// error there, so it is one here too.
const maxDepth = 10000

var (
	// ErrNotFound reports that a path names no value: a missing key or an
	// index past the end of an array.
	ErrNotFound = errors.New("jsonscan: not found")
	// ErrType reports a value of another kind than asked for (String on a
	// number, a path stepping into a string, Int on a fraction).
	ErrType = errors.New("jsonscan: wrong type")
	// ErrRange reports a number that does not fit the asked-for type.
	ErrRange = errors.New("jsonscan: number out of range")
)

// SyntaxError is malformed JSON at byte Offset of the scanned value.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "jsonscan: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

func syntaxErr(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

// unexpected builds the error for a byte that cannot appear at d[i].
func unexpected(d []byte, i int, what string) error {
	if i >= len(d) {
		return syntaxErr(i, "unexpected end of input, want "+what)
	}
	return syntaxErr(i, "unexpected "+strconv.QuoteRune(rune(d[i]))+", want "+what)
}

// isWS reports JSON whitespace.
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(d []byte, i int) int {
	// Most tokens follow each other directly: answer that without
	// entering a loop, whose every iteration is costly in a guest.
	if i >= len(d) || d[i] > ' ' {
		return i
	}
	for i < len(d) && isWS(d[i]) {
		i++
	}
	return i
}

// Flags computed by scanString.
const (
	// strSlow: the string holds an escape or a non-ASCII byte, so its
	// decoded form may differ from its raw bytes.
	strSlow uint8 = 1
	// strKnown: strSlow was computed (a Value found by a trusting skip
	// computes it when it is first read).
	strKnown uint8 = 2
)

// SWAR constants: one byte's worth in each lane, and each lane's high bit.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// scanString scans the string literal starting at d[i] == '"' and returns the
// index after its closing quote. It validates escapes and rejects control
// characters, like encoding/json's scanner; invalid UTF-8 is accepted (it
// decodes to U+FFFD).
func scanString(d []byte, i int) (end int, flags uint8, err error) {
	i++ // opening quote
	var acc uint64
	for {
		// Eight bytes at a time, and the first byte that needs a look is
		// found without a byte loop: in a sandboxed guest every loop
		// iteration costs about as much as a dozen instructions.
		// Non-ASCII bytes stay on this path; acc collects them for the
		// flag.
		for i+8 <= len(d) {
			v := binary.LittleEndian.Uint64(d[i:])
			m := special8(v)
			if m == 0 {
				acc |= v
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) >> 3
			acc |= v & (1<<(8*k) - 1)
			i += k
			break
		}
		for i < len(d) && plain[d[i]] {
			acc |= uint64(d[i])
			i++
		}
		if acc&high != 0 {
			flags |= strSlow
		}
		if i >= len(d) {
			return i, flags, syntaxErr(i, "unterminated string")
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= strSlow
			if i+1 >= len(d) {
				return i + 1, flags, syntaxErr(i+1, "unterminated string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(d) {
						return k, flags, syntaxErr(k, "unterminated string")
					}
					if !isHex(d[k]) {
						return k, flags, syntaxErr(k, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i + 1, flags, syntaxErr(i+1, "invalid escape")
			}
		default: // c < 0x20
			return i, flags, syntaxErr(i, "control character in string")
		}
	}
}

// shortString is the fast path of scanString for a string that closes
// within the sixteen bytes after its opening quote d[i] and holds no escape
// or control character: most keys and many values. ok is false otherwise
// (scanString then decides). It is not small enough to inline, so it is
// one call where scanString's loop, its setup and the caller's fallback
// cost more in a guest; sixteen rather than eight bytes take names such as
// "finish_reason" and values such as "application/json" without a second
// call.
func shortString(d []byte, i int) (end int, flags uint8, ok bool) {
	if i+9 > len(d) {
		return 0, 0, false
	}
	w := binary.LittleEndian.Uint64(d[i+1:])
	m := special8(w)
	base := i + 1 // where w starts
	var acc uint64
	if m == 0 {
		if i+17 > len(d) {
			return 0, 0, false
		}
		acc = w
		w = binary.LittleEndian.Uint64(d[i+9:])
		if m = special8(w); m == 0 {
			return 0, 0, false
		}
		base = i + 9
	}
	k := bits.TrailingZeros64(m) >> 3
	if d[base+k] != '"' {
		return 0, 0, false
	}
	if (acc|w&(1<<(8*k)-1))&high != 0 {
		flags = strSlow
	}
	return base + k + 1, flags | strKnown, true
}

// plain marks the bytes a string holds as is: everything but control
// characters, '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x100; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// special8 flags the bytes of v (little-endian) that a string cannot hold
// as is: control characters, '"' and '\\'. The lowest flagged lane is
// always exact (the bit tricks can only flag lanes above a true one), which
// is all a scan needs. Bytes >= 0x80 are never flagged (each test masks
// with ^v or ^q, whose high bit is then clear).
func special8(v uint64) uint64 {
	q := v ^ ('"' * ones)
	b := v ^ ('\\' * ones)
	return ((v-0x20*ones)&^v | // a byte < 0x20
		(q-ones)&^q | // a '"'
		(b-ones)&^b) & high // a '\\'
}

// quote8 flags the '"' and '\\' bytes of v, lowest lane exact.
func quote8(v uint64) uint64 {
	q := v ^ ('"' * ones)
	b := v ^ ('\\' * ones)
	return ((q-ones)&^q | (b-ones)&^b) & high
}

// struct8 flags the bytes a container skip stops at: '"', '{', '[', '}'
// and ']', lowest lane exact. '[' and '{' differ in the 0x20 bit only, as
// do ']' and '}'.
func struct8(v uint64) uint64 {
	q := v ^ ('"' * ones)
	f := v | 0x20*ones
	o := f ^ ('{' * ones)
	c := f ^ ('}' * ones)
	return ((q-ones)&^q | (o-ones)&^o | (c-ones)&^c) & high
}

// The trusting skips below walk a value that Parse, Get, Pick or Iter has
// already validated: they find its end without checking its grammar again,
// so descending into a document costs a fraction of the first pass. They
// stay within d whatever its bytes (an index past the end comes back as
// len(d)), so a broken invariant could give a wrong span but never a panic.

// skipTrusted returns the end of the validated value at d[i].
func skipTrusted(d []byte, i int) int {
	if i >= len(d) {
		return len(d)
	}
	switch d[i] {
	case '"':
		return skipStringTrusted(d, i)
	case '{', '[':
	case 't', 'n':
		return min(i+4, len(d))
	case 'f':
		return min(i+5, len(d))
	default:
		for i++; i < len(d) && numByte[d[i]]; i++ {
		}
		return i
	}
	depth := 0
	for i < len(d) {
		switch d[i] | 0x20 {
		case '"' | 0x20: // '"' is 0x22: the 0x20 bit is set already
			// A string closing within eight bytes without a call (most
			// keys), else skipStringTrusted.
			if i+9 <= len(d) {
				if m := quote8(binary.LittleEndian.Uint64(d[i+1:])); m != 0 {
					if k := bits.TrailingZeros64(m) >> 3; d[i+1+k] == '"' {
						i += 2 + k
						break
					}
				}
			}
			i = skipStringTrusted(d, i)
		case '{':
			depth++
			i++
		case '}':
			if depth--; depth == 0 {
				return i + 1
			}
			i++
		default:
			i++
		}
		// Jump to the next quote or bracket, eight bytes at a time.
		for i+8 <= len(d) {
			m := struct8(binary.LittleEndian.Uint64(d[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
	}
	return len(d)
}

// numByte marks the bytes a number literal can hold.
var numByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789+-.eE") {
		t[c] = true
	}
	return t
}()

// skipStringTrusted returns the end of the validated string at d[i] == '"'.
func skipStringTrusted(d []byte, i int) int {
	i++
	for i < len(d) {
		for i+8 <= len(d) {
			m := quote8(binary.LittleEndian.Uint64(d[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			break
		}
		switch d[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2 // the escaped byte; \uXXXX's hex digits hold no quote
		default: // the last few bytes, one at a time
			i++
		}
	}
	return len(d)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans the number starting at d[i] with the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(d []byte, i int) (int, error) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i++
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return i, unexpected(d, i, "digit")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return i, unexpected(d, i, "digit after decimal point")
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
			return i, unexpected(d, i, "digit in exponent")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	return i, nil
}

func scanLiteral(d []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(d) || d[i+k] != lit[k] {
			return i + k, unexpected(d, i+k, "literal "+lit)
		}
	}
	return i + len(lit), nil
}

// The literals as little-endian words ("false" without its 'f').
const (
	litTrue = 't' | 'r'<<8 | 'u'<<16 | 'e'<<24
	litNull = 'n' | 'u'<<8 | 'l'<<16 | 'l'<<24
	litAlse = 'a' | 'l'<<8 | 's'<<16 | 'e'<<24
)

// scanScalar scans a non-container value at d[i].
func scanScalar(d []byte, i int) (int, error) {
	if i >= len(d) {
		return i, unexpected(d, i, "value")
	}
	switch c := d[i]; {
	case c == '"':
		end, _, err := scanString(d, i)
		return end, err
	// Literals are compared as one word when they are whole (the usual
	// case); scanLiteral's byte loop only finds where a wrong one goes
	// wrong.
	case c == 't':
		if i+4 <= len(d) && binary.LittleEndian.Uint32(d[i:]) == litTrue {
			return i + 4, nil
		}
		return scanLiteral(d, i, "true")
	case c == 'f':
		if i+5 <= len(d) && binary.LittleEndian.Uint32(d[i+1:]) == litAlse {
			return i + 5, nil
		}
		return scanLiteral(d, i, "false")
	case c == 'n':
		if i+4 <= len(d) && binary.LittleEndian.Uint32(d[i:]) == litNull {
			return i + 4, nil
		}
		return scanLiteral(d, i, "null")
	case c == '-' || isDigit(c):
		return scanNumber(d, i)
	}
	return i, unexpected(d, i, "value")
}

// skipValue validates the value starting at d[i] (no leading whitespace) and
// returns the index just after it. depth is the nesting of d[i]'s container.
// It is iterative, so hostile nesting cannot exhaust the stack; the kind of
// each open container (object or array) is kept as one bit, in a word for
// the first 64 levels and on the heap only beyond.
func skipValue(d []byte, i, depth int) (int, error) {
	// Scalars first, strings without a further call: in a sandboxed guest
	// each call costs as much as a dozen bytes of scanning.
	if i < len(d) {
		switch d[i] {
		case '"':
			end, _, err := scanString(d, i)
			return end, err
		case '{', '[':
		default:
			return scanScalar(d, i)
		}
	}
	var st bitStack
	key := false // a member's key comes first
	for {
		if key {
			// `"key":` — a short key without a call (see shortString).
			key = false
			k := 8
			if i+9 <= len(d) && d[i] == '"' {
				if m := special8(binary.LittleEndian.Uint64(d[i+1:])); m != 0 {
					k = bits.TrailingZeros64(m) >> 3
				}
			}
			if k < 8 && d[i+1+k] == '"' && i+2+k < len(d) && d[i+2+k] == ':' {
				i = skipWS(d, i+3+k)
			} else {
				var err error
				if i, err = scanKey(d, i); err != nil {
					return i, err
				}
			}
		}
		// A value is expected at d[i].
		if i >= len(d) {
			return i, unexpected(d, i, "value")
		}
		switch d[i] {
		case '{', '[':
			obj := d[i] == '{'
			if depth+st.n+1 > maxDepth {
				return i, syntaxErr(i, "exceeded max depth")
			}
			st.push(obj)
			i = skipWS(d, i+1)
			if i < len(d) && (obj && d[i] == '}' || !obj && d[i] == ']') {
				i++
				st.n--
				break // an empty container is a complete value
			}
			key = obj
			continue
		case '"':
			// A short string, without a call (see shortString).
			if i+9 <= len(d) {
				if m := special8(binary.LittleEndian.Uint64(d[i+1:])); m != 0 {
					if k := bits.TrailingZeros64(m) >> 3; d[i+1+k] == '"' {
						i += 2 + k
						break
					}
				}
			}
			var err error
			if i, _, err = scanString(d, i); err != nil {
				return i, err
			}
		default:
			var err error
			if i, err = scanScalar(d, i); err != nil {
				return i, err
			}
		}
		// After a complete value: close containers or move to the next
		// element.
		for {
			if st.n == 0 {
				return i, nil
			}
			i = skipWS(d, i)
			if i >= len(d) {
				return i, unexpected(d, i, "',' or closing bracket")
			}
			obj := st.top()
			c := d[i]
			if c == ',' {
				i = skipWS(d, i+1)
				key = obj
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				i++
				st.n--
				continue
			}
			if obj {
				return i, unexpected(d, i, "',' or '}'")
			}
			return i, unexpected(d, i, "',' or ']'")
		}
	}
}

// scanKey scans `"key" :` followed by whitespace, leaving i at the member's
// value.
func scanKey(d []byte, i int) (int, error) {
	if i >= len(d) || d[i] != '"' {
		return i, unexpected(d, i, "object key")
	}
	if end, _, ok := shortString(d, i); ok {
		i = end
	} else {
		var err error
		if i, _, err = scanString(d, i); err != nil {
			return i, err
		}
	}
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ':' {
		return i, unexpected(d, i, "':'")
	}
	return skipWS(d, i+1), nil
}

// bitStack holds the kind of each open container (1 = object) as one bit:
// a word for the first 64 levels, the heap only beyond.
type bitStack struct {
	small uint64
	deep  []uint64
	n     int
}

func (s *bitStack) push(obj bool) {
	var w *uint64
	var b uint
	if s.n < 64 {
		w, b = &s.small, uint(s.n)
	} else {
		k := (s.n - 64) / 64
		for len(s.deep) <= k {
			s.deep = append(s.deep, 0)
		}
		w, b = &s.deep[k], uint((s.n-64)%64)
	}
	if obj {
		*w |= 1 << b
	} else {
		*w &^= 1 << b
	}
	s.n++
}

func (s *bitStack) top() bool {
	l := s.n - 1
	if l < 64 {
		return s.small>>uint(l)&1 == 1
	}
	return s.deep[(l-64)/64]>>uint((l-64)%64)&1 == 1
}
