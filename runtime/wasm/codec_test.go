package wasm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"adhost/abi"
)

func completeInputs() []*abi.CompleteInput {
	return []*abi.CompleteInput{
		{},
		{Model: "m", Messages: []abi.Message{}, MaxOutputTokens: 1, Step: 1},
		{Model: "fixture-model", Messages: []abi.Message{{Role: abi.RoleUser, Content: "conformance:text"}}, MaxOutputTokens: 4096, Step: 1},
		{Model: "m", Messages: []abi.Message{{Role: abi.RoleUser, Content: "x"}}, MaxOutputTokens: 1, Step: 2, Buffered: true},
		{
			Model:        "m<&>\u2028\u2029",
			Instructions: "line\nbreak\t\"quoted\" \\ \b\f\x00\x1f\x7f <tag> & é 日本 \xff\xfe bad",
			Messages: []abi.Message{
				{Role: "system", Content: ""},
				{Role: abi.RoleAssistant, Content: "calling", ToolCalls: []abi.ToolCall{
					{ID: "c1", Name: "t", Arguments: json.RawMessage(` { "a" : "<b>&" , "u":"\u2028" } `)},
					{ID: "c2", Name: "t"},
				}},
				{Role: abi.RoleTool, Content: `{"receipt":7}`, ToolCallID: "c1", Name: "t"},
				{Role: abi.RoleUser, Content: "look", Parts: []abi.Part{
					{Type: abi.PartText, Text: "label <&>"}, {Type: abi.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
					{Type: abi.PartPDF, MediaType: "application/pdf", Data: "JVBERi0=", Name: "a.pdf"},
				}},
			},
			Tools: []abi.ToolDef{
				{Name: "t", Description: "d <x>", InputSchema: json.RawMessage("{\n  \"type\": \"object\"\n}")},
				{Name: "u"},
			},
			MaxOutputTokens: 65536,
			OutputSchema:    json.RawMessage(`{"type":"object", "properties": {"ok": {"const": true}}}`),
			Native:          json.RawMessage(`[1, 2.5e3, null, true, "x&y"]`),
			Step:            -3,
		},
	}
}

// The hand-written encoder must write what json.Marshal writes.
func TestAppendCompleteInputMatchesMarshal(t *testing.T) {
	for i, in := range completeInputs() {
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendCompleteInput(nil, in)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestAppendCompleteInputInvalidRaw(t *testing.T) {
	in := &abi.CompleteInput{Model: "m", Native: json.RawMessage(`{"a":`)}
	if _, err := json.Marshal(in); err == nil {
		t.Fatal("json.Marshal accepted invalid raw JSON")
	}
	if _, err := appendCompleteInput(nil, in); err == nil {
		t.Fatal("invalid raw JSON accepted")
	}
}

func FuzzAppendCompleteInput(f *testing.F) {
	f.Add("m", "instr", "hello", "{}", "<&>\u2028")
	f.Add("", "", "\xff\x00\"\\", "[1, 2]", "")
	f.Add("x", "y", "z", `{"a" : "b"}`, "\t\n")
	f.Fuzz(func(t *testing.T, model, instr, content, raw, name string) {
		in := &abi.CompleteInput{
			Model: model, Instructions: instr, MaxOutputTokens: len(content), Step: len(raw),
			Messages: []abi.Message{{Role: "user", Content: content, Name: name, ToolCallID: instr,
				ToolCalls: []abi.ToolCall{{ID: name, Name: model, Arguments: json.RawMessage(raw)}}}},
			Tools:        []abi.ToolDef{{Name: name, Description: content, InputSchema: json.RawMessage(raw)}},
			OutputSchema: json.RawMessage(raw),
			Native:       json.RawMessage(raw),
		}
		want, werr := json.Marshal(in)
		got, gerr := appendCompleteInput(nil, in)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: marshal %v, append %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

var completeOutputs = []string{
	`{"text":"Hello fixture","finishReason":"stop"}`,
	`{}`,
	` { "text" : "" , "finishReason" : "length" } `,
	`{"text":"héllo 日本","usage":{"inputTokens":3,"outputTokens":0,"cachedInputTokens":-1,"reasoningTokens":9007199254740993,"cacheCreationInputTokens":2}}`,
	`{"text":"x","usage":{}}`,
	`{"text":"x","native":{"state":"s","n":[1,{"a":"}"}]}}`,
	`{"text":"x","native":[]}`,
	`{"text":"x","native":null}`,
	`{"text":"x","native":"str"}`,
	`{"text":"x","native":{"a":1}`,
	`{"text":"x","native":{"a":}}`,
	`{"text":"x","usage":null}`,
	`{"text":"x","usage":{"costUsd":0.5,"inputTokens":1}}`,
	`{"text":"x","usage":{"inputTokens":1.5}}`,
	`{"text":"x","usage":{"inputTokens":1e3}}`,
	`{"text":"x","usage":{"inputTokens":01}}`,
	`{"text":"x","usage":{"inputTokens":-0}}`,
	`{"text":"x","usage":{"inputTokens":99999999999999999999}}`,
	`{"text":"x","usage":{"inputTokens":"1"}}`,
	`{"text":"x","usage":{"inputTokens":1,"inputTokens":2}}`,
	`{"text":"x","usage":{"inputTokens":1},"usage":{"outputTokens":2}}`,
	`{"text":"x","usage":{"unknown":1}}`,
	`{"text":"x","toolCalls":[{"id":"1","name":"t","arguments":{"a":1}}]}`,
	`{"text":"a\nb"}`,
	`{"text":"a\u0041"}`,
	"{\"text\":\"a\x01\"}",
	"{\"text\":\"a\xff\"}",
	`{"Text":"case folded"}`,
	`{"text":"x","extra":1}`,
	`{"text":1}`,
	`{"text":null}`,
	`{"text":"a","text":"b"}`,
	`{"text":"x"} trailing`,
	`{"text":"x"}{}`,
	`{"text":"x",}`,
	`{"text":"x"`,
	`[]`,
	`null`,
	``,
	`{"finishReason":"other"}`,
}

// The fast decoder must agree with decodeStrict on every input: same
// value, and an error exactly when decodeStrict fails.
func TestDecodeCompleteOutputMatchesStrict(t *testing.T) {
	for _, in := range completeOutputs {
		checkDecodeCompleteOutput(t, []byte(in))
	}
}

func checkDecodeCompleteOutput(t *testing.T, in []byte) {
	t.Helper()
	var want, got abi.CompleteOutput
	werr := decodeStrict(in, &want)
	gerr := decodeCompleteOutput(in, &got)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: decodeStrict error %v, fast error %v", in, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %+v\nwant %+v", in, got, want)
	}
}

func FuzzDecodeCompleteOutput(f *testing.F) {
	for _, in := range completeOutputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecodeCompleteOutput(t, in)
	})
}

func BenchmarkCompleteCodec(b *testing.B) {
	in := completeInputs()[2]
	b.Run("append-input", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = appendCompleteInput(buf[:0], in)
		}
	})
	out := []byte(`{"text":"Hello fixture","finishReason":"stop"}`)
	b.Run("decode-output", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var co abi.CompleteOutput
			if err := decodeCompleteOutput(out, &co); err != nil {
				b.Fatal(err)
			}
		}
	})
}
