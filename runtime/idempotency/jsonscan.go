package idempotency

import "strconv"

// The stored events are the engine's own encodings, kept byte for byte.
// A replay changes one member of each, its sequence, and reads two others
// (type, error). The scanner below finds a top-level member of a JSON
// object without decoding the rest, so a replayed event keeps every other
// byte the client saw the first time (text, tool output, result) and a
// large record costs one pass, not an unmarshal and a marshal per event.

// member returns the span [start, end) of the value of the first top-level
// member called name in the JSON object data. ok is false when data is not
// an object the scanner can walk or has no such member. Names are compared
// as written, escapes included: the event envelope names have none.
func member(data []byte, name string) (start, end int, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return 0, 0, false // also "}": no (more) members
		}
		ke, ok := skipString(data, i)
		if !ok {
			return 0, 0, false
		}
		key := data[i+1 : ke-1]
		i = skipSpace(data, ke)
		if i >= len(data) || data[i] != ':' {
			return 0, 0, false
		}
		vs := skipSpace(data, i+1)
		ve, ok := skipValue(data, vs)
		if !ok {
			return 0, 0, false
		}
		if string(key) == name {
			return vs, ve, true
		}
		i = skipSpace(data, ve)
		if i >= len(data) || data[i] != ',' {
			return 0, 0, false
		}
		i++
	}
}

// memberString returns the value of a top-level string member without
// escapes (event types and run ids have none); ok is false otherwise.
func memberString(data []byte, name string) (string, bool) {
	s, e, ok := member(data, name)
	if !ok || e-s < 2 || data[s] != '"' {
		return "", false
	}
	v := data[s+1 : e-1]
	for _, c := range v {
		if c == '\\' {
			return "", false
		}
	}
	return string(v), true
}

// renumber returns data with its top-level "sequence" member set to seq,
// every other byte unchanged. The member must hold a non-negative integer.
func renumber(data []byte, seq int64) ([]byte, bool) {
	s, e, ok := member(data, "sequence")
	if !ok || s == e {
		return nil, false
	}
	for _, c := range data[s:e] {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	out := make([]byte, 0, len(data)+20)
	out = append(out, data[:s]...)
	out = strconv.AppendInt(out, seq, 10)
	return append(out, data[e:]...), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// (which is '"').
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the value starting at b[i]:
// a string, an object or array (brackets matched, strings skipped), or a
// literal or number (up to the next delimiter).
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				e, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	s := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
			if i == s {
				return 0, false
			}
			return i, true
		}
		i++
	}
	return 0, false // a bare value cannot end the object
}
