// Package retrievaltest holds an in-process embedder for the retrieval
// tests: the same word and bigram feature hashing as plugins/local-hashing,
// without building a wasm module, plus knobs to make it misbehave.
package retrievaltest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// Embedder is a deterministic lexical embedder of Dim dimensions.
type Embedder struct {
	Dim int
	// Calls and Texts count Embed calls and the texts they carried.
	Calls, Texts atomic.Int64
	// Fail, when set, is returned by every call.
	Fail error
	// Mangle, when set, rewrites the vectors before they are returned.
	Mangle func([][]float32) [][]float32
	// Before, when set, runs at the start of every call (a test blocks
	// or reorders calls with it).
	Before func(inputs []string)

	mu      sync.Mutex
	batches []int
}

// Embed implements retrieval.Embedder.
func (e *Embedder) Embed(ctx context.Context, model string, inputs []string) ([][]float32, *abi.Usage, error) {
	if e.Before != nil {
		e.Before(inputs)
	}
	if ctx.Err() != nil {
		return nil, nil, protocol.Wrap(protocol.CodeCancelled, ctx.Err())
	}
	e.Calls.Add(1)
	e.Texts.Add(int64(len(inputs)))
	e.mu.Lock()
	e.batches = append(e.batches, len(inputs))
	e.mu.Unlock()
	if e.Fail != nil {
		return nil, nil, e.Fail
	}
	out := make([][]float32, len(inputs))
	for i, t := range inputs {
		out[i] = Vector(t, e.Dim)
	}
	if e.Mangle != nil {
		out = e.Mangle(out)
	}
	n := int64(len(inputs))
	return out, &abi.Usage{InputTokens: &n}, nil
}

// Batches returns the size of every call so far.
func (e *Embedder) Batches() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.batches...)
}

// Vector hashes text's lowercased words and bigrams into dim buckets.
func Vector(text string, dim int) []float32 {
	v := make([]float32, dim)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range words {
		add(v, "w\x00"+w, 1)
		if i > 0 {
			add(v, "b\x00"+words[i-1]+"\x00"+w, 0.5)
		}
	}
	if len(words) == 0 {
		add(v, "t\x00"+text, 1)
	}
	return v
}

func add(v []float32, feature string, w float32) {
	h := uint64(14695981039346656037)
	for i := 0; i < len(feature); i++ {
		h ^= uint64(feature[i])
		h *= 1099511628211
	}
	if h>>63 == 1 {
		w = -w
	}
	v[h%uint64(len(v))] += w
}
