package wasm

import (
	"math"
	"strconv"

	"adhost/abi"
)

// decodeEmbedOutput decodes an embed result as decodeStrict would, fast
// for the form sdk-plugin writes: no whitespace, "vectors" first, numbers
// in JSON's grammar. encoding/json's reflection cost about as much host
// CPU per float as the guest's whole embedding computation (the largest
// host share of BenchmarkIngest after the guest's). Anything the fast path
// does not recognise — whitespace, another member order, an escape, a
// number strconv refuses — is decoded again by decodeStrict, which then
// gives the answer (and the error) it always gave: the fast path only
// ever accepts inputs decodeStrict accepts, with the same values.
func decodeEmbedOutput(b []byte) (*abi.EmbedOutput, error) {
	if out, ok := fastEmbedOutput(b); ok {
		return out, nil
	}
	var eo abi.EmbedOutput
	if err := decodeStrict(b, &eo); err != nil {
		return nil, err
	}
	return &eo, nil
}

func fastEmbedOutput(b []byte) (*abi.EmbedOutput, bool) {
	const head = `{"vectors":`
	if len(b) < len(head) || string(b[:len(head)]) != head {
		return nil, false
	}
	i := len(head)
	out := &abi.EmbedOutput{}
	switch {
	case hasAt(b, i, "null"):
		i += 4
	case i < len(b) && b[i] == '[':
		i++
		out.Vectors = [][]float32{}
		if i < len(b) && b[i] == ']' {
			i++
			break
		}
		for {
			var v []float32
			var ok bool
			if v, i, ok = fastVector(b, i); !ok {
				return nil, false
			}
			out.Vectors = append(out.Vectors, v)
			if i < len(b) && b[i] == ',' {
				i++
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return nil, false
		}
	default:
		return nil, false
	}
	if i == len(b)-1 && b[i] == '}' {
		return out, true
	}
	// Usage is small: its object goes through decodeStrict on its own.
	const usage = `,"usage":`
	if !hasAt(b, i, usage) || b[len(b)-1] != '}' {
		return nil, false
	}
	rest := b[i+len(usage) : len(b)-1]
	if len(rest) == 0 || rest[0] != '{' {
		return nil, false // null or another type: let decodeStrict say
	}
	var u abi.Usage
	if decodeStrict(rest, &u) != nil {
		return nil, false
	}
	out.Usage = &u
	return out, true
}

func hasAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// fastVector reads null or an array of JSON numbers at b[i:].
func fastVector(b []byte, i int) ([]float32, int, bool) {
	if hasAt(b, i, "null") {
		return nil, i + 4, true
	}
	if i >= len(b) || b[i] != '[' {
		return nil, i, false
	}
	i++
	v := []float32{}
	if i < len(b) && b[i] == ']' {
		return v, i + 1, true
	}
	for {
		j, ok := scanNumber(b, i)
		if !ok {
			return nil, i, false
		}
		f, ok := smallHalf(b[i:j])
		if !ok {
			g, err := strconv.ParseFloat(string(b[i:j]), 32)
			if err != nil {
				return nil, i, false
			}
			f = float32(g)
		}
		v = append(v, f)
		i = j
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == ']' {
			return v, i + 1, true
		}
		return nil, i, false
	}
}

// smallHalf parses a number of at most 7 integer digits, optionally
// followed by ".5" — what feature-hashing vectors are made of, exactly
// representable in a float32 — without strconv's general path.
func smallHalf(n []byte) (float32, bool) {
	neg := len(n) > 0 && n[0] == '-'
	if neg {
		n = n[1:]
	}
	half := len(n) > 2 && n[len(n)-2] == '.' && n[len(n)-1] == '5'
	if half {
		n = n[:len(n)-2]
	}
	if len(n) == 0 || len(n) > 7 {
		return 0, false
	}
	var x int32
	for _, c := range n {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + int32(c-'0')
	}
	f := float32(x)
	if half {
		f += 0.5
	}
	if neg {
		f = float32(math.Copysign(float64(f), -1))
	}
	return f, true
}

// scanNumber returns the end of the JSON number at b[i:]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}
