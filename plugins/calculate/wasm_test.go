package main

import (
	"encoding/json"
	"os"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/runtime/wasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// TestWasm loads the built module with runtime/wasm and runs the tool the
// way the engine does: the tools come from the manifest, the output is
// what the model sees.
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	ts, err := plugintest.LoadTools(t, "plugins/calculate", ID, Version, wasm.Options{}, wasm.InstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := ts.Tools(t.Context())
	if err != nil || len(defs) != 1 || defs[0].Name != ToolName || len(defs[0].OutputSchema) == 0 {
		t.Fatalf("tools: %+v %v", defs, err)
	}
	for args, want := range map[string]string{
		`{"expression":"0.1+0.2"}`:         `{"result":"0.3"}`,
		`{"expression":"2^9999/2^9998"}`:   `{"result":"2"}`,
		`{"expression":"(1+2)*3 - 4 / 8"}`: `{"result":"8.5"}`,
		`{"expression":"1/(3-3)"}`:         `{"error":"division by zero","position":1}`,
	} {
		out, err := ts.Invoke(t.Context(), abi.ToolCall{ID: "call_1", Name: ToolName, Arguments: json.RawMessage(args)}, func() {})
		if err != nil || string(out) != want {
			t.Errorf("invoke %s: %s %v, want %s", args, out, err, want)
		}
	}
}

// BenchmarkWasmInvoke is one calculate call through runtime/wasm, as the
// engine makes it (pooled instance, input, evaluation, output).
func BenchmarkWasmInvoke(b *testing.B) {
	ts, err := plugintest.LoadTools(b, "plugins/calculate", ID, Version, wasm.Options{}, wasm.InstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	call := abi.ToolCall{ID: "call_1", Name: ToolName, Arguments: json.RawMessage(`{"expression":"(1.5 + 2.25) * 4 / 3 - 2^10"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ts.Invoke(b.Context(), call, func() {}); err != nil {
			b.Fatal(err)
		}
	}
}
