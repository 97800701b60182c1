package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// tool is the built notes module bound to a store, invoked as the engine
// does: the subject travels in the context (runtime.ToolSubject).
type tool struct {
	t  *testing.T
	ts runtime.ToolSet
}

func load(t *testing.T, kv durable.KV) *tool {
	t.Helper()
	ts, err := plugintest.LoadTools(t, "plugins/notes", ID, Version, wasm.Options{}, wasm.InstanceConfig{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	return &tool{t, ts}
}

func (tl *tool) call(subject, args string) (string, error) {
	ctx := runtime.WithToolSubject(tl.t.Context(), subject)
	out, err := tl.ts.Invoke(ctx, abi.ToolCall{ID: "c", Name: ToolName, Arguments: json.RawMessage(args)}, func() {})
	return string(out), err
}

func (tl *tool) expect(subject, args, want string) {
	tl.t.Helper()
	if got, err := tl.call(subject, args); err != nil || got != want {
		tl.t.Errorf("%s %.60s: %s %v, want %s", subject, args, got, err, want)
	}
}

// TestWasm: notes are per subject (the host's, never the guest's), kept
// in the store under encoded keys, and bounded per subject in keys and
// bytes at exactly the ABI's limits.
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	mem := durable.NewMemory()
	tl := load(t, mem)
	tl.expect("alice", `{"op":"put","key":"colour","value":"blue"}`, `{"ok":true}`)
	tl.expect("bob", `{"op":"put","key":"colour","value":"red"}`, `{"ok":true}`)
	tl.expect("alice", `{"op":"get","key":"colour"}`, `{"found":true,"value":"blue"}`)
	tl.expect("bob", `{"op":"get","key":"colour"}`, `{"found":true,"value":"red"}`)
	tl.expect("carol", `{"op":"get","key":"colour"}`, `{"found":false}`)
	tl.expect("alice", `{"op":"put","key":"ünïcode/../key","value":"x"}`, `{"ok":true}`)
	tl.expect("alice", `{"op":"list"}`, `{"keys":["colour","ünïcode/../key"]}`)
	tl.expect("bob", `{"op":"list"}`, `{"keys":["colour"]}`)
	tl.expect("alice", `{"op":"delete","key":"colour"}`, `{"deleted":true}`)
	tl.expect("alice", `{"op":"delete","key":"colour"}`, `{"deleted":false}`)
	tl.expect("bob", `{"op":"get","key":"colour"}`, `{"found":true,"value":"red"}`)

	// The store holds neither subjects nor keys in the clear.
	ents, err := mem.List(t.Context(), "kv/notes/", "", 0)
	if err != nil || len(ents) != 2 {
		t.Fatalf("store entries %v %v", ents, err)
	}
	for _, e := range ents {
		if strings.Contains(e.Key, "bob") || strings.Contains(e.Key, "colour") || durable.CheckKey(e.Key) != nil {
			t.Errorf("store key %q", e.Key)
		}
	}

	// Key count: 100 notes fit, the 101st does not; replacing one still does.
	for i := 0; i < abi.MaxKVKeys; i++ {
		tl.expect("dave", fmt.Sprintf(`{"op":"put","key":"k%03d","value":"v"}`, i), `{"ok":true}`)
	}
	full := `{"error":"the notebook is full: at most 100 notes and 65536 bytes of keys and notes"}`
	tl.expect("dave", `{"op":"put","key":"k100","value":"v"}`, full)
	tl.expect("dave", `{"op":"put","key":"k000","value":"replaced"}`, `{"ok":true}`)
	tl.expect("erin", `{"op":"put","key":"k100","value":"v"}`, `{"ok":true}`) // another subject is not affected

	// Bytes: 16 notes of 4 KiB minus their keys fill 65536 bytes exactly.
	val := strings.Repeat("x", 4096-2)
	for i := 0; i < 16; i++ {
		tl.expect("frank", fmt.Sprintf(`{"op":"put","key":"%02d","value":"%s"}`, i, val), `{"ok":true}`)
	}
	tl.expect("frank", `{"op":"put","key":"z","value":""}`, full)
	tl.expect("frank", `{"op":"put","key":"00","value":"`+val+`"}`, `{"ok":true}`)
}

// TestWasmDenied: without a store, or outside a run (no subject), the
// tool fails instead of writing anywhere.
func TestWasmDenied(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	for name, tc := range map[string]struct {
		kv      durable.KV
		subject string
	}{"no store": {nil, "alice"}, "no subject": {durable.NewMemory(), ""}} {
		_, err := load(t, tc.kv).call(tc.subject, `{"op":"list"}`)
		if protocol.CodeOf(err) != protocol.CodeToolFailed {
			t.Errorf("%s: %v, want TOOL_FAILED", name, err)
		}
	}
}

// TestWasmConcurrentBound: puts of one subject racing from several calls
// at once still stop at exactly MaxKVKeys notes.
func TestWasmConcurrentBound(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	tl := load(t, durable.NewMemory())
	const n = abi.MaxKVKeys + 50
	results := make(chan string, n)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 6 {
				out, err := tl.call("gina", fmt.Sprintf(`{"op":"put","key":"k%03d","value":"v"}`, i))
				if err != nil {
					out = err.Error()
				}
				results <- out
			}
		}()
	}
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for r := range results {
		counts[r]++
	}
	if counts[`{"ok":true}`] != abi.MaxKVKeys || counts[`{"error":"the notebook is full: at most 100 notes and 65536 bytes of keys and notes"}`] != 50 {
		t.Fatalf("outcomes %v", counts)
	}
}
