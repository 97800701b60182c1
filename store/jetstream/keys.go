package jetstream

import (
	"errors"
	"strings"
)

// encodeKey maps a durable key (durable.CheckKey: [A-Za-z0-9._/=-], '/'
// between levels) to a JetStream key or subject tail: each level becomes
// one subject token, so a level prefix is a subject filter ("a.b.>").
//
// JetStream keys use '.' between tokens and allow no empty token, so
// inside a level '.' is written "=d" and '=' is written "=e", and an empty
// level (a leading, trailing or doubled '/') is the token "=_". '=' never
// appears unescaped in an encoded level, so the mapping is one to one.
func encodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 4)
	for i, level := range strings.Split(key, "/") {
		if i > 0 {
			b.WriteByte('.')
		}
		if level == "" {
			b.WriteString("=_")
			continue
		}
		for j := 0; j < len(level); j++ {
			switch c := level[j]; c {
			case '.':
				b.WriteString("=d")
			case '=':
				b.WriteString("=e")
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

var errBadEncoding = errors.New("jetstream: key not written by this backend")

// decodeKey is encodeKey's inverse.
func decodeKey(enc string) (string, error) {
	var b strings.Builder
	b.Grow(len(enc))
	for i, tok := range strings.Split(enc, ".") {
		if i > 0 {
			b.WriteByte('/')
		}
		if tok == "=_" {
			continue
		}
		if tok == "" {
			return "", errBadEncoding
		}
		for j := 0; j < len(tok); j++ {
			c := tok[j]
			if c != '=' {
				b.WriteByte(c)
				continue
			}
			if j+1 == len(tok) {
				return "", errBadEncoding
			}
			j++
			switch tok[j] {
			case 'd':
				b.WriteByte('.')
			case 'e':
				b.WriteByte('=')
			default:
				return "", errBadEncoding
			}
		}
	}
	return b.String(), nil
}

// listFilter is the subject filter (relative to the bucket) covering every
// key that starts with prefix: the complete levels of prefix followed by
// ">", or ">" alone when prefix has no complete level. Keys matching it
// still have to be checked against prefix itself, whose last level may be
// partial.
func listFilter(prefix string) string {
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return ">"
	}
	return encodeKey(prefix[:i]) + ".>"
}
