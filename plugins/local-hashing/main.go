// Command local-hashing is an embedder extension that needs no network and
// no credentials: each text becomes a signed feature-hashing vector of its
// lowercased words and word bigrams. It is lexical, not semantic — two
// passages are close when they share words, never because they mean the
// same thing — which is what a dev default that must work offline, and
// give the same vectors on every machine, can honestly offer.
package main

import (
	"strconv"
	"strings"
	"unicode"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/local-hashing.toml (a test checks it).
const (
	ID      = "local-hashing"
	Version = "1.0.0"
)

// ModelPrefix starts every model name; the rest is the dimension.
const ModelPrefix = "hash-ngram-"

// MaxDimensions is the largest dimension (wire-extensions §6.1).
const MaxDimensions = 4096

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterEmbedder(embedder{})
}

type embedder struct{}

func (embedder) Embed(_ *sdk.Call, in *abi.EmbedInput) (*abi.EmbedOutput, error) {
	dim, ok := Dimensions(in.Model)
	if !ok {
		return nil, sdk.Errorf(sdk.CodeProviderFailed, "unknown model %q", in.Model)
	}
	out := &abi.EmbedOutput{Vectors: make([][]float32, len(in.Inputs))}
	for i, text := range in.Inputs {
		out.Vectors[i] = Vector(text, dim)
	}
	return out, nil
}

// Dimensions parses a model name "hash-ngram-<d>".
func Dimensions(model string) (int, bool) {
	rest, ok := strings.CutPrefix(model, ModelPrefix)
	if !ok || rest == "" || rest[0] < '1' || rest[0] > '9' || len(rest) > 4 {
		return 0, false
	}
	d, err := strconv.Atoi(rest)
	if err != nil || d < 1 || d > MaxDimensions {
		return 0, false
	}
	return d, true
}

// Vector is the unnormalised hashing vector of text: +/-1 per word and
// +/-0.5 per word bigram at the bucket and sign a 64-bit FNV-1a hash of
// the feature picks. A text without words (only punctuation) hashes as one
// feature of its bytes, so no non-empty input yields a zero vector.
//
// The features are "w\x00"+word and "b\x00"+prev+"\x00"+word of the
// lowercased words. They are hashed piece by piece rather than built as
// strings: in the guest every allocation costs about a microsecond, and
// building them was most of an embedding call's compute (the vectors are
// bit-for-bit those of the concatenating version; a test keeps it).
func Vector(text string, dim int) []float32 {
	v := make([]float32, dim)
	prev := ""
	n := 0
	for w := range words(text) {
		add(v, fnvLower(fnvString(offset64, "w\x00"), w), 1)
		if prev != "" {
			h := fnvString(fnvLower(fnvString(offset64, "b\x00"), prev), "\x00")
			add(v, fnvLower(h, w), 0.5)
		}
		prev = w
		n++
	}
	if n == 0 && text != "" {
		add(v, fnvString(fnvString(offset64, "t\x00"), text), 1)
	}
	return v
}

func add(v []float32, h uint64, weight float32) {
	i := int(h % uint64(len(v)))
	if h>>63 == 1 {
		weight = -weight
	}
	v[i] += weight
}

// words yields the runs of letters and digits of text, to be hashed with
// fnvLower: an ASCII word as the slice of text it is (fnvLower lowers its
// letters as it hashes, with no allocation), any other word lowercased by
// strings.ToLower.
func words(text string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start := -1
		for i, r := range text {
			word := unicode.IsLetter(r) || unicode.IsDigit(r)
			if word && start < 0 {
				start = i
			}
			if !word && start >= 0 {
				if !yield(lower(text[start:i])) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			yield(lower(text[start:]))
		}
	}
}

// lower returns an ASCII word unchanged (fnvLower lowers it) and any
// other lowercased.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// fnvString continues a 64-bit FNV-1a hash h over s.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime64
	}
	return h
}

// fnvLower is fnvString over s with its ASCII capitals lowered: for an
// ASCII s, the hash of strings.ToLower(s); for an already lowercased s,
// the hash of s.
func fnvLower(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h ^= uint64(c)
		h *= prime64
	}
	return h
}
