package wasm

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"adhost/abi"
)

// embedCases are embed results the fast path takes and ones it must hand
// to decodeStrict (which accepts some and refuses others).
var embedCases = []string{
	`{"vectors":[[0,1.5,-0.5,1e-7,3.4028235e+38,-0,0.1]]}`,
	`{"vectors":[[1],[2,3],[],null]}`,
	`{"vectors":[]}`,
	`{"vectors":null}`,
	`{"vectors":[[1]],"usage":{"inputTokens":4}}`,
	`{"vectors":[[1]],"usage":null}`,
	`{"vectors":[[1]],"usage":{"inputTokens":4},"vectors":[[2]]}`,
	`{"vectors":[[1]],"usage":{"nope":1}}`,
	`{"vectors":[[1]],"other":1}`,
	`{"usage":{"inputTokens":4},"vectors":[[1]]}`,
	`{"vectors": [[1]]}`,
	`{"vectors":[[1 ]]}`,
	`{"vectors":[[1]]} `,
	`{"vectors":[[1]]}{}`,
	`{"vectors":[[01]]}`,
	`{"vectors":[[+1]]}`,
	`{"vectors":[[.5]]}`,
	`{"vectors":[[1.]]}`,
	`{"vectors":[[1e]]}`,
	`{"vectors":[[0x10]]}`,
	`{"vectors":[[Infinity]]}`,
	`{"vectors":[[NaN]]}`,
	`{"vectors":[[1e39]]}`,
	`{"vectors":[["1"]]}`,
	`{"vectors":[[1],]}`,
	`{"vectors":[[1,]]}`,
	`{"vectors":[[1]]`,
	`{"vectors":[[1]}`,
	`{"vectors":1}`,
	`{"vect\u006frs":[[1]]}`,
	`{}`,
	``,
	`null`,
}

func TestDecodeEmbedOutputMatchesStrict(t *testing.T) {
	for _, c := range embedCases {
		checkEmbedDecode(t, []byte(c))
	}
	// A large well-formed output takes the fast path.
	o := abi.EmbedOutput{Vectors: make([][]float32, 32)}
	for i := range o.Vectors {
		o.Vectors[i] = make([]float32, 256)
		for j := range o.Vectors[i] {
			o.Vectors[i][j] = float32(math.Sin(float64(i*256+j))) * 3
		}
	}
	b, _ := json.Marshal(o)
	if _, ok := fastEmbedOutput(b); !ok {
		t.Error("json.Marshal's output missed the fast path")
	}
	checkEmbedDecode(t, b)
}

func checkEmbedDecode(t *testing.T, b []byte) {
	t.Helper()
	var want abi.EmbedOutput
	werr := decodeStrict(b, &want)
	got, gerr := decodeEmbedOutput(b)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%.80s: decodeStrict %v, decodeEmbedOutput %v", b, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(*got, want) {
		t.Fatalf("%.80s: got %+v, want %+v", b, *got, want)
	}
	if werr == nil {
		for i := range want.Vectors {
			for j := range want.Vectors[i] {
				if math.Signbit(float64(want.Vectors[i][j])) != math.Signbit(float64(got.Vectors[i][j])) {
					t.Fatalf("%.80s: sign of [%d][%d] differs", b, i, j)
				}
			}
		}
	}
}

func FuzzDecodeEmbedOutput(f *testing.F) {
	for _, c := range embedCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkEmbedDecode(t, b) })
}

func BenchmarkDecodeEmbedOutput(b *testing.B) {
	o := abi.EmbedOutput{Vectors: make([][]float32, 32)}
	for i := range o.Vectors {
		o.Vectors[i] = make([]float32, 256)
		for j := 0; j < 256; j += 6 {
			o.Vectors[i][j] = float32(j%5) - 1.5
		}
	}
	data, _ := json.Marshal(o)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			decodeEmbedOutput(data)
		}
	})
	b.Run("strict", func(b *testing.B) {
		for b.Loop() {
			var eo abi.EmbedOutput
			decodeStrict(data, &eo)
		}
	})
}
