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
func Vector(text string, dim int) []float32 {
	v := make([]float32, dim)
	prev := ""
	n := 0
	for w := range words(text) {
		add(v, fnv("w\x00"+w), 1)
		if prev != "" {
			add(v, fnv("b\x00"+prev+"\x00"+w), 0.5)
		}
		prev = w
		n++
	}
	if n == 0 && text != "" {
		add(v, fnv("t\x00"+text), 1)
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

// words yields the lowercased runs of letters and digits of text.
func words(text string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start := -1
		for i, r := range text {
			word := unicode.IsLetter(r) || unicode.IsDigit(r)
			if word && start < 0 {
				start = i
			}
			if !word && start >= 0 {
				if !yield(strings.ToLower(text[start:i])) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			yield(strings.ToLower(text[start:]))
		}
	}
}

func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
