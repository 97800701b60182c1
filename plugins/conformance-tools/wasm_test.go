package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"adhost/abi"
	"adhost/internal/testenv"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// TestWasm loads the built module with runtime/wasm and runs the tool the
// way the engine does.
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	path := testenv.BuildPlugin(t, "plugins/conformance-tools")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: ID, Version: Version, Path: path, SHA256: hex.EncodeToString(sum[:])}, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(context.Background())
	ts, err := x.ToolSet(wasm.InstanceConfig{ID: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := ts.Tools(t.Context())
	if err != nil || len(defs) != 1 || defs[0].Name != LookupName {
		t.Fatalf("tools: %+v %v", defs, err)
	}
	out, err := ts.Invoke(t.Context(), abi.ToolCall{ID: "call_1", Name: LookupName, Arguments: json.RawMessage(`{"value":7}`)}, func() {})
	if err != nil || string(out) != `{"receipt":7}` {
		t.Errorf("invoke: %s %v", out, err)
	}
	_, err = ts.Invoke(t.Context(), abi.ToolCall{ID: "call_2", Name: LookupName, Arguments: json.RawMessage(`{"value":"x"}`)}, func() {})
	if protocol.CodeOf(err) != protocol.CodeToolFailed {
		t.Errorf("invoke with a bad value: %v, want TOOL_FAILED", err)
	}
}
