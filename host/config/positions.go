package config

import (
	"strconv"
	"strings"
)

// positions maps key paths ("providers[1].extension", "server.listen",
// "tokens[0].grants.retrieval") to the 1-based line where they are defined.
//
// BurntSushi/toml keeps key positions private and reports them only for
// syntax and type errors, so unknown keys (MetaData.Undecoded) and
// validation errors would otherwise have no line. A small scanner that only
// tracks table headers, keys, inline tables and arrays recovers them. It is
// best effort: it runs only on documents toml.Decode already accepted, never
// panics, and a key it cannot place simply has no line.
type positions map[string]int

// line returns the line of path, or of its nearest ancestor that has one
// (a key inside an inline table reports the line it sits on anyway).
func (p positions) line(path string) int {
	for path != "" {
		if l, ok := p[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

// lookupKey returns the line of a toml.Key (no array indexes) as reported by
// MetaData.Undecoded: the first definition of that key path in document
// order, matching array elements by name only.
func (p positions) lookupKey(key []string) int {
	want := strings.Join(key, ".")
	best := 0
	for path, l := range p {
		if stripIndexes(path) == want && (best == 0 || l < best) {
			best = l
		}
	}
	return best
}

func stripIndexes(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	skip := false
	for _, r := range path {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scanPositions scans a TOML document for key positions.
func scanPositions(doc string) positions {
	s := &scanner{src: doc, line: 1, pos: positions{}, arrays: map[string]int{}}
	s.document()
	return s.pos
}

type scanner struct {
	src    string
	i      int
	line   int
	pos    positions
	arrays map[string]int // array-of-tables path → number of elements so far
	table  string         // current table path, with indexes
}

func (s *scanner) eof() bool { return s.i >= len(s.src) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

func (s *scanner) next() byte {
	c := s.peek()
	if !s.eof() {
		s.i++
		if c == '\n' {
			s.line++
		}
	}
	return c
}

// skipSpace skips blanks and, when nl is true, newlines and comments too.
func (s *scanner) skipSpace(nl bool) {
	for !s.eof() {
		switch c := s.peek(); {
		case c == ' ' || c == '\t' || c == '\r':
			s.next()
		case c == '\n' && nl:
			s.next()
		case c == '#' && nl:
			s.skipLine()
		default:
			return
		}
	}
}

func (s *scanner) skipLine() {
	for !s.eof() && s.peek() != '\n' {
		s.next()
	}
}

func (s *scanner) document() {
	for guard := 0; !s.eof() && guard < len(s.src)+1; guard++ {
		start := s.i
		s.skipSpace(true)
		if s.eof() {
			return
		}
		if s.peek() == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
		s.skipSpace(false)
		if s.peek() == '#' {
			s.skipLine()
		}
		if s.i == start {
			// Not a construct we understand: drop the rest of the line.
			s.skipLine()
			s.next()
		}
	}
}

func (s *scanner) header() {
	line := s.line
	s.next() // '['
	array := s.peek() == '['
	if array {
		s.next()
	}
	s.skipSpace(false)
	keys := s.keyPath()
	s.skipSpace(false)
	for !s.eof() && s.peek() == ']' {
		s.next()
	}
	if len(keys) == 0 {
		return
	}
	parent := s.resolve("", keys[:len(keys)-1])
	path := join(parent, keys[len(keys)-1])
	if array {
		n := s.arrays[path]
		s.arrays[path] = n + 1
		path += "[" + strconv.Itoa(n) + "]"
	} else if n, ok := s.arrays[path]; ok && n > 0 {
		path += "[" + strconv.Itoa(n-1) + "]"
	}
	s.table = path
	if _, ok := s.pos[path]; !ok {
		s.pos[path] = line
	}
}

// resolve joins keys onto base, stepping into the latest element of any
// array of tables on the way ([tokens.grants] after [[tokens]]).
func (s *scanner) resolve(base string, keys []string) string {
	path := base
	for _, k := range keys {
		path = join(path, k)
		if n, ok := s.arrays[path]; ok && n > 0 {
			path += "[" + strconv.Itoa(n-1) + "]"
		}
	}
	return path
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// keyPath reads a dotted key: bare, "basic" or 'literal' parts.
func (s *scanner) keyPath() []string {
	var keys []string
	for !s.eof() {
		s.skipSpace(false)
		var k string
		switch c := s.peek(); {
		case c == '"':
			k = s.basicString()
		case c == '\'':
			k = s.literalString()
		case isBare(c):
			st := s.i
			for !s.eof() && isBare(s.peek()) {
				s.next()
			}
			k = s.src[st:s.i]
		default:
			return keys
		}
		keys = append(keys, k)
		s.skipSpace(false)
		if s.peek() != '.' {
			return keys
		}
		s.next()
	}
	return keys
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (s *scanner) keyValue(base string) {
	line := s.line
	keys := s.keyPath()
	if len(keys) == 0 {
		return
	}
	path := s.resolve(base, keys)
	if _, ok := s.pos[path]; !ok {
		s.pos[path] = line
	}
	s.skipSpace(false)
	if s.peek() != '=' {
		return
	}
	s.next()
	s.skipSpace(false)
	s.value(path, 0)
}

const maxDepth = 64

func (s *scanner) value(path string, depth int) {
	if depth > maxDepth {
		s.skipLine()
		return
	}
	switch c := s.peek(); c {
	case '"':
		s.basicString()
	case '\'':
		s.literalString()
	case '{':
		s.inlineTable(path, depth)
	case '[':
		s.array(path, depth)
	default:
		for !s.eof() {
			c := s.peek()
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '#' {
				return
			}
			s.next()
		}
	}
}

func (s *scanner) inlineTable(path string, depth int) {
	s.next() // '{'
	for !s.eof() {
		s.skipSpace(true)
		switch s.peek() {
		case '}':
			s.next()
			return
		case ',':
			s.next()
			continue
		}
		start := s.i
		line := s.line
		keys := s.keyPath()
		if len(keys) == 0 || s.i == start {
			s.next()
			continue
		}
		p := path
		for _, k := range keys {
			p = join(p, k)
		}
		if _, ok := s.pos[p]; !ok {
			s.pos[p] = line
		}
		s.skipSpace(false)
		if s.peek() == '=' {
			s.next()
			s.skipSpace(false)
			s.value(p, depth+1)
		}
	}
}

func (s *scanner) array(path string, depth int) {
	s.next() // '['
	for n := 0; !s.eof(); {
		s.skipSpace(true)
		switch s.peek() {
		case ']':
			s.next()
			return
		case ',':
			s.next()
			continue
		}
		start := s.i
		elem := path + "[" + strconv.Itoa(n) + "]"
		if _, ok := s.pos[elem]; !ok {
			s.pos[elem] = s.line
		}
		s.value(elem, depth+1)
		n++
		if s.i == start {
			s.next()
		}
	}
}

// basicString reads "..." or """...""" and returns its (roughly) unescaped
// content; only key names need the value, and they are single-line.
func (s *scanner) basicString() string {
	if strings.HasPrefix(s.src[s.i:], `"""`) {
		s.i += 3
		for !s.eof() {
			if strings.HasPrefix(s.src[s.i:], `"""`) {
				s.i += 3
				for s.peek() == '"' {
					s.next()
				}
				return ""
			}
			if s.next() == '\\' {
				s.next()
			}
		}
		return ""
	}
	s.next()
	var b strings.Builder
	for !s.eof() {
		c := s.next()
		switch c {
		case '"', '\n':
			return b.String()
		case '\\':
			e := s.next()
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (s *scanner) literalString() string {
	if strings.HasPrefix(s.src[s.i:], `'''`) {
		s.i += 3
		for !s.eof() {
			if strings.HasPrefix(s.src[s.i:], `'''`) {
				s.i += 3
				for s.peek() == '\'' {
					s.next()
				}
				return ""
			}
			s.next()
		}
		return ""
	}
	s.next()
	st := s.i
	for !s.eof() {
		c := s.peek()
		if c == '\'' {
			v := s.src[st:s.i]
			s.next()
			return v
		}
		if c == '\n' {
			return s.src[st:s.i]
		}
		s.next()
	}
	return s.src[st:s.i]
}
