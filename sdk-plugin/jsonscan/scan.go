package jsonscan

import (
	"errors"
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
)

// scanString scans the string literal starting at d[i] == '"' and returns the
// index after its closing quote. It validates escapes and rejects control
// characters, like encoding/json's scanner; invalid UTF-8 is accepted (it
// decodes to U+FFFD).
func scanString(d []byte, i int) (end int, flags uint8, err error) {
	i++ // opening quote
	for {
		// Fast path: plain ASCII.
		for i < len(d) && plain[d[i]] {
			i++
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
		case c < 0x20:
			return i, flags, syntaxErr(i, "control character in string")
		default: // c >= 0x80
			flags |= strSlow
			i++
		}
	}
}

// plain marks the bytes a string holds as is: printable ASCII except '"'
// and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

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

// scanScalar scans a non-container value at d[i].
func scanScalar(d []byte, i int) (int, error) {
	if i >= len(d) {
		return i, unexpected(d, i, "value")
	}
	switch c := d[i]; {
	case c == '"':
		end, _, err := scanString(d, i)
		return end, err
	case c == 't':
		return scanLiteral(d, i, "true")
	case c == 'f':
		return scanLiteral(d, i, "false")
	case c == 'n':
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
	if i < len(d) && d[i] != '{' && d[i] != '[' {
		return scanScalar(d, i)
	}
	var st bitStack
	for {
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
			if obj {
				var err error
				if i, err = scanKey(d, i); err != nil {
					return i, err
				}
			}
			continue
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
				if obj {
					var err error
					if i, err = scanKey(d, i); err != nil {
						return i, err
					}
				}
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
	i, _, err := scanString(d, i)
	if err != nil {
		return i, err
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
