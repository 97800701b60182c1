package protocol

// Patterns of wire-core §3.1, hand-compiled. Each is anchored at both ends,
// case-sensitive and ASCII-only, so checking bytes is the same as
// upstream's JavaScript RegExp over UTF-16 units: any non-ASCII byte fails.

// IsInstanceID reports whether s matches ^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$
// (provider instance ids, manifest ids, vendors, host ids).
func IsInstanceID(s string) bool {
	return matchID(s, isAlnum, isIDChar, 80)
}

// IsModelID reports whether s matches ^[a-zA-Z0-9][a-zA-Z0-9._:/\[\]-]{0,199}$,
// the wider model pattern of wire-core §18 (newer revisions accept '[' and
// ']', e.g. "model[1m]").
func IsModelID(s string) bool {
	return matchID(s, isAlnum, isModelChar, 200)
}

// IsToolName reports whether s matches ^[a-zA-Z_][a-zA-Z0-9_]{0,63}$.
func IsToolName(s string) bool {
	return matchID(s, func(c byte) bool { return isAlpha(c) || c == '_' },
		func(c byte) bool { return isAlnum(c) || c == '_' }, 64)
}

// IsCapabilityName reports whether s matches ^[a-zA-Z][a-zA-Z0-9._-]{0,79}$.
func IsCapabilityName(s string) bool {
	return matchID(s, isAlpha, isIDChar, 80)
}

// IsIdempotencyKey reports whether s matches ^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$.
func IsIdempotencyKey(s string) bool {
	return matchID(s, isAlnum, func(c byte) bool { return isIDChar(c) || c == ':' }, 128)
}

func matchID(s string, first, rest func(byte) bool, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isAlpha(c) || isDigit(c) }
func isIDChar(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-'
}
func isModelChar(c byte) bool {
	return isIDChar(c) || c == ':' || c == '/' || c == '[' || c == ']'
}

// UTF16Len returns the length of the UTF-8 string s in UTF-16 code units,
// which is what JavaScript's String.length (and so upstream's minLength and
// maxLength) counts: one unit per rune, two for a rune outside the BMP.
// s must be valid UTF-8 (the decoder guarantees it).
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c&0xC0 != 0x80 { // not a continuation byte: a rune starts here
			n++
			if c >= 0xF0 { // 4-byte sequence: a surrogate pair
				n++
			}
		}
	}
	return n
}

// DuplicateTools reports whether names repeats an entry. It is semantic
// check #14 of wire-core §3.3 (INVALID_REQUEST, but in semantic order: after
// UNKNOWN_PROVIDER, UNSUPPORTED_MODEL, UNSUPPORTED_CAPABILITY and
// UNSUPPORTED_TOOLS), which is why the decoder does not reject it.
func DuplicateTools(names []string) bool {
	if len(names) <= 8 {
		for i := 1; i < len(names); i++ {
			for j := 0; j < i; j++ {
				if names[i] == names[j] {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if _, dup := seen[n]; dup {
			return true
		}
		seen[n] = struct{}{}
	}
	return false
}
