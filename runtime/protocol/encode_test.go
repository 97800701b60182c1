package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func runResults() []*RunResult {
	return []*RunResult{
		{},
		{RunID: "0b1f4c7e-2a0d-4f3b-9c55-6f2e8e7d1a90", Provider: "fixture", Model: "fixture-model", Text: "Hello fixture", Steps: 1, FinishReason: "stop"},
		{
			RunID: "r", Provider: "p<&>", Model: "m\u2028\u2029", Text: "a\nb\t\"c\" \\ \b\f\x00\x1f\x7f <x> & é 日本 \xff bad",
			Output: json.RawMessage(` { "ok" : true, "h": "<b>&\u2028" } `),
			Usage: Usage{InputTokens: ptr[int64](3), OutputTokens: ptr[int64](0), CachedInputTokens: ptr[int64](-1), ReasoningTokens: ptr[int64](math.MaxInt64),
				CostUSD: ptr(0.000001), APIEquivalentCostUSD: ptr(1e21)},
			Steps: 64, FinishReason: "length",
		},
		{Usage: Usage{CostUSD: ptr(1.5e-7), APIEquivalentCostUSD: ptr(123456.789)}},
		{Usage: Usage{CostUSD: ptr(0.0), APIEquivalentCostUSD: ptr(-2.5e-300)}},
		{Usage: Usage{OutputTokens: ptr[int64](7)}},
		{RunID: "s", Session: json.RawMessage(`{"id":"x","revision":1}`),
			Retrieval: json.RawMessage(`{"corpus":"c","hits":[{"text":"<x> & y"}], "truncated":false}`),
			Sources:   json.RawMessage(`[{"id":"a<b>","revision":"r","mediaType":"text/plain","bytes":3,"sha256":"00","origin":"inline"}]`),
			Artifacts: json.RawMessage(` [ {"name":"a & b","content":"<p>\u2028"} ] `)},
	}
}

func encoderJSON(t testing.TB, v any, escapeHTML bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func TestAppendRunResultMatchesEncodingJSON(t *testing.T) {
	for i, r := range runResults() {
		for _, esc := range []bool{true, false} {
			want, err := encoderJSON(t, r, esc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendRunResult(nil, r, esc)
			if err != nil {
				t.Fatalf("%d: %v", i, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%d escapeHTML=%v:\n got %s\nwant %s", i, esc, got, want)
			}
		}
	}
	if m, _ := json.Marshal(runResults()[2]); !bytes.Equal(m, must(AppendRunResult(nil, runResults()[2], true))) {
		t.Error("escapeHTML=true differs from json.Marshal")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestAppendRunResultErrors(t *testing.T) {
	for _, r := range []*RunResult{
		{Output: json.RawMessage(`{"a":`)},
		{Usage: Usage{CostUSD: ptr(math.NaN())}},
		{Usage: Usage{APIEquivalentCostUSD: ptr(math.Inf(1))}},
	} {
		if _, err := encoderJSON(t, r, false); err == nil {
			t.Fatal("encoding/json accepted", r)
		}
		if _, err := AppendRunResult(nil, r, false); err == nil {
			t.Errorf("accepted %+v", r)
		}
	}
}

func FuzzAppendRunResult(f *testing.F) {
	f.Add("id", "text <&> \u2028", `{"a": 1}`, int64(5), 0.25, true)
	f.Add("", "\xff\x00", ``, int64(-1), 1e-9, false)
	f.Fuzz(func(t *testing.T, id, text, output string, n int64, cost float64, esc bool) {
		r := &RunResult{RunID: id, Provider: text, Model: id, Text: text, Output: json.RawMessage(output),
			Usage: Usage{InputTokens: &n, CostUSD: &cost}, Steps: int(n), FinishReason: text}
		want, werr := encoderJSON(t, r, esc)
		got, gerr := AppendRunResult(nil, r, esc)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: %v / %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkAppendJSONString: mostly-ASCII model text, the common case of
// every text.delta and JSON-mode answer.
func BenchmarkAppendJSONString(b *testing.B) {
	s := strings.Repeat("The quick brown fox jumps over the lazy dog, \"twice\".\n", 20)
	buf := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendJSONString(buf[:0], s, false)
	}
}
