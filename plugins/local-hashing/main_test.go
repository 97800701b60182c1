//go:build !wasip1

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"unicode"

	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func TestManifestMatches(t *testing.T) {
	m := plugintest.Manifest(t, ID)
	if m.ID != ID || m.Version != Version || m.Kind != "embedder" || m.HasNetwork() {
		t.Fatalf("manifest %s@%s kind %s network %v", m.ID, m.Version, m.Kind, m.HasNetwork())
	}
}

func TestDimensions(t *testing.T) {
	for model, want := range map[string]int{
		"hash-ngram-1": 1, "hash-ngram-256": 256, "hash-ngram-4096": 4096,
		"hash-ngram-4097": 0, "hash-ngram-0": 0, "hash-ngram-0256": 0, "hash-ngram-": 0,
		"hash-ngram--1": 0, "hash-ngram-+8": 0, "other-256": 0,
	} {
		if got, ok := Dimensions(model); got != want || ok != (want > 0) {
			t.Errorf("Dimensions(%q) = %d %v, want %d", model, got, ok, want)
		}
	}
}

func cos(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

// TestVectorIsLexical: shared words make texts close, case and
// punctuation do not matter, and no non-empty text is a zero vector.
func TestVectorIsLexical(t *testing.T) {
	a := Vector("The battery lifetime was measured in hours.", 256)
	b := Vector("the BATTERY lifetime, measured in hours", 256)
	c := Vector("Quarterly revenue grew in Europe", 256)
	if cos(a, b) < 0.7 || cos(a, c) > 0.4 {
		t.Errorf("cos(a,b) = %.3f, cos(a,c) = %.3f", cos(a, b), cos(a, c))
	}
	for _, s := range []string{"!!!", " ", "a"} {
		var n float64
		for _, x := range Vector(s, 8) {
			n += float64(x * x)
		}
		if n == 0 {
			t.Errorf("Vector(%q) is zero", s)
		}
	}
	if x, y := Vector("same text", 64), Vector("same text", 64); cos(x, y) != 1 {
		t.Error("not deterministic")
	}
}

// TestWasm runs the built module through runtime/wasm as the retrieval
// feature does: one vector per input, of the model's dimension, equal to
// the in-process computation.
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	e := plugintest.LoadEmbedder(t, "plugins/local-hashing", ID, Version, nil, "")
	inputs := []string{"first passage", "second passage about batteries", "!"}
	vecs, _, err := e.Embed(t.Context(), "hash-ngram-128", inputs)
	if err != nil || len(vecs) != len(inputs) {
		t.Fatalf("embed: %d vectors, %v", len(vecs), err)
	}
	for i, v := range vecs {
		want := Vector(inputs[i], 128)
		if len(v) != 128 || cos(v, want) < 0.999999 {
			t.Errorf("vector %d differs from the in-process one", i)
		}
	}
	if _, _, err := e.Embed(t.Context(), "hash-ngram-9999", inputs); protocol.CodeOf(err) != protocol.CodeProviderFailed {
		t.Errorf("unknown model: %v, want PROVIDER_FAILED", err)
	}
}

// BenchmarkIngest: documents of 256 chunks ingested through the retrieval
// service with this module as the embedder (extraction, chunking, wasm
// embedding in batches of 32, the store write and the index update),
// reported as chunks per second. Target (issue 12): ≥ 2,000 chunks/s.
func BenchmarkIngest(b *testing.B) {
	e := plugintest.LoadEmbedder(b, "plugins/local-hashing", ID, Version, nil, "")
	svc, err := retrieval.Open(b.Context(), durable.NewMemory(), []retrieval.Corpus{{ID: "docs", Embedder: e,
		Identity:   retrieval.Identity{ProviderID: "local", Vendor: "local", AccountID: "local", AuthMode: "none", Model: "hash-ngram-256", Dimensions: 256, Version: "v1"},
		ChunkBytes: 256, MaxChunks: 1_000_000, MaxPayloadBytes: 1 << 30}}, retrieval.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := &runtime.Principal{Subject: "bench", Ops: map[string]bool{"retrieval.index:docs": true}}
	var text strings.Builder
	for i := range 256 {
		fmt.Fprintf(&text, "Passage %d of the benchmark document talks about batteries, charging cycles and temperature %d.\n\n", i, i%40)
		fmt.Fprintf(&text, "It has a second line so that chunks hold whole lines, number %d.\n\n", i)
	}
	chunks := 0
	i := 0
	for b.Loop() {
		i++
		body := fmt.Sprintf(`{"corpus":"docs","document":{"type":"text","source":{"id":"doc-%d","revision":"r1"},"mediaType":"text/plain","text":%q}}`, i, text.String())
		out, err := svc.Ingest(b.Context(), p, []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		var res struct{ Chunks int }
		json.Unmarshal(out, &res)
		chunks += res.Chunks
	}
	b.ReportMetric(float64(chunks)/b.Elapsed().Seconds(), "chunks/s")
}

// vectorRef is Vector as first written, building every feature as a
// string: the stored vectors of every corpus were made by it, so the
// allocation-free Vector must equal it bit for bit (or the index identity
// would silently mean other vectors).
func vectorRef(text string, dim int) []float32 {
	hash := func(s string) uint64 {
		h := uint64(14695981039346656037)
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		return h
	}
	v := make([]float32, dim)
	prev, n := "", 0
	var ws []string
	start := -1
	for i, r := range text {
		w := unicode.IsLetter(r) || unicode.IsDigit(r)
		if w && start < 0 {
			start = i
		}
		if !w && start >= 0 {
			ws = append(ws, strings.ToLower(text[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		ws = append(ws, strings.ToLower(text[start:]))
	}
	for _, w := range ws {
		add(v, hash("w\x00"+w), 1)
		if prev != "" {
			add(v, hash("b\x00"+prev+"\x00"+w), 0.5)
		}
		prev = w
		n++
	}
	if n == 0 && text != "" {
		add(v, hash("t\x00"+text), 1)
	}
	return v
}

func TestVectorUnchanged(t *testing.T) {
	for _, text := range []string{
		"", " ", "!!!", "a", "The Battery LIFETIME was 812 hours.", "Straße ÄRGER İstanbul KELVIN \u212A Σίσυφος",
		"mixed ASCII and ünïcode Wörter, numbers 42 and x2", "tab\tseparated\nlines\r\nCRLF", "ǅ ǈ ǋ titlecase",
		strings.Repeat("Passage 7 of the benchmark document talks about batteries. ", 40),
	} {
		for _, dim := range []int{1, 7, 256, 4096} {
			got, want := Vector(text, dim), vectorRef(text, dim)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("Vector(%.30q, %d)[%d] = %v, want %v", text, dim, i, got[i], want[i])
				}
			}
		}
	}
}
