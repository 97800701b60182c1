package main

import (
	"encoding/json"
	"os"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// TestWasm loads the built module with runtime/wasm: queries answer as in
// the unit tests, and a query that would compute or allocate without end
// is stopped by the sandbox (the call fails; the extension keeps serving).
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	ts, err := plugintest.LoadTools(t, "plugins/json-query", ID, Version, wasm.Options{}, wasm.InstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(args string) (json.RawMessage, error) {
		return ts.Invoke(t.Context(), abi.ToolCall{ID: "call_1", Name: ToolName, Arguments: json.RawMessage(args)}, func() {})
	}
	if out, err := invoke(`{"query":"[.[] | .n * 2]","document":[{"n":1},{"n":2.5}]}`); err != nil || string(out) != `{"results":[[2,5]]}` {
		t.Errorf("invoke: %s %v", out, err)
	}
	for _, hostile := range []string{`[range(1e9)]`, `last(range(1e12))`, `[repeat("xxxxxxxxxxxxxxxx")]`} {
		out, err := invoke(`{"query":` + string(must(json.Marshal(hostile))) + `,"document":null}`)
		if err == nil || protocol.CodeOf(err) != protocol.CodeToolFailed {
			t.Errorf("%s: %.100s %v, want TOOL_FAILED", hostile, out, err)
		}
	}
	if out, err := invoke(`{"query":".","document":1}`); err != nil || string(out) != `{"results":[1]}` {
		t.Errorf("after hostile queries: %s %v", out, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
