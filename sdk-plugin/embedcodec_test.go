package sdk

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"adhost/abi"
)

// TestAppendEmbedOutput: the hand encoder writes exactly what json.Marshal
// writes, for the fast path's edges (zero, negative zero, halves, the
// largest exact half), values it leaves to strconv (thirds, tiny and huge
// exponents, subnormals, the float32 extremes) and random vectors; NaN and
// infinities fail.
func TestAppendEmbedOutput(t *testing.T) {
	n := int64(7)
	edge := []float32{0, float32(math.Copysign(0, -1)), 0.5, -0.5, 1, -1, 1.5, -2.5, 4194303.5, -4194303.5, 4194304, 8388607, 8388608, 16777216,
		1.0 / 3, -2.0 / 3, 1e-6, 9.99e-7, 1e-7, 1e-20, 1e20, 1e21, 123456.78, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.17549435e-38, 0.1, 0.2}
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]float32, 2000)
	for i := range random {
		switch i % 4 {
		case 0:
			random[i] = float32(r.NormFloat64())
		case 1:
			random[i] = float32(r.IntN(41)-20) / 2
		case 2:
			random[i] = math.Float32frombits(r.Uint32())
			if f := float64(random[i]); math.IsNaN(f) || math.IsInf(f, 0) {
				random[i] = 0
			}
		default:
			random[i] = float32(r.Float64() * 1e-5)
		}
	}
	for _, o := range []*abi.EmbedOutput{
		{},
		{Vectors: [][]float32{}},
		{Vectors: [][]float32{nil, {}}},
		{Vectors: [][]float32{edge, random}, Usage: &abi.Usage{InputTokens: &n}},
	} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEmbedOutput(nil, o)
		if err != nil || string(got) != string(want) {
			t.Fatalf("appendEmbedOutput:\n got %s (%v)\nwant %s", got, err, want)
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if _, err := appendEmbedOutput(nil, &abi.EmbedOutput{Vectors: [][]float32{{1, bad}}}); err == nil {
			t.Errorf("%v encoded", bad)
		}
	}
}

func BenchmarkAppendEmbedOutput(b *testing.B) {
	o := &abi.EmbedOutput{Vectors: make([][]float32, 32)}
	for i := range o.Vectors {
		o.Vectors[i] = make([]float32, 256)
		for j := 0; j < 256; j += 6 {
			o.Vectors[i][j] = float32(j%5) - 1.5
		}
	}
	var buf []byte
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			buf, _ = appendEmbedOutput(buf[:0], o)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			buf, _ = json.Marshal(o)
		}
	})
}
