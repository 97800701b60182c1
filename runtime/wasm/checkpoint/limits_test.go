package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// instance instantiates the instrumented wasm with a no-op check function.
func instance(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	out, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(context.Background()) })
	if _, err := rt.NewHostModuleBuilder(Module).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(context.Context, []uint64) {}), nil, nil).
		Export(Name).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return mod
}

// tableModule has one funcref table of the given limits (max < 0: none)
// and exports grow(delta) = table.grow(ref.null, delta) and size().
func tableModule(minimum uint32, maximum int64) []byte {
	limits := cat([]byte{0x00}, u32(minimum))
	if maximum >= 0 {
		limits = cat([]byte{0x01}, u32(minimum), u32(uint32(maximum)))
	}
	return binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32}, []byte{0x60, 0, 1, i32})),
		sec(secFunction, vec(u32(0), u32(1))),
		sec(secTable, vec(cat([]byte{0x70}, limits))),
		sec(secExport, vec(cat(str("grow"), []byte{0x00}, u32(0)), cat(str("size"), []byte{0x00}, u32(1)))),
		sec(secCode, vec(
			body(vec(), []byte{0xD0, 0x70, 0x20, 0, 0xFC, 15, 0, end}), // table.grow 0 (ref.null func) n
			body(vec(), []byte{0xFC, 16, 0, end}),                      // table.size 0
		)),
	)
}

func TestTableBounds(t *testing.T) {
	threeTables := binary(sec(secTable, vec([]byte{0x70, 0, 0}, []byte{0x70, 0, 0}, []byte{0x70, 0, 0})))
	for _, c := range []struct {
		name string
		wasm []byte
		want string // in the error
	}{
		{"minimum", tableModule(MaxTableEntries+1, -1), "table 0 declares 100001 entries (at most 100000)"},
		{"maximum", tableModule(1, MaxTableEntries+1), "table 0 declares 100001 entries (at most 100000)"},
		{"huge", tableModule(100_000_000, -1), "table 0 declares 100000000 entries"},
		{"total", threeTables, "table 2 takes the tables past 200000 entries in total"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Instrument(c.wasm)
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want ErrLimit naming %q", err, c.want)
			}
		})
	}
	for _, wasm := range [][]byte{tableModule(MaxTableEntries, -1), tableModule(0, MaxTableEntries),
		binary(sec(secTable, vec([]byte{0x70, 0, 0}, []byte{0x6F, 0, 0})))} {
		if _, err := Instrument(wasm); err != nil {
			t.Errorf("tables at the bound: %v", err)
		}
	}
	imported := binary(sec(secImport, vec(cat(str("env"), str("t"), []byte{0x01, 0x70, 0x00, 1}))))
	if _, err := Instrument(imported); !errors.Is(err, ErrUnsupported) {
		t.Errorf("imported table: err = %v, want ErrUnsupported", err)
	}
}

// TestTableGrowBounded: a table declared without a maximum gets
// MaxTableEntries, which wazero's table.grow honours with -1; a declared
// maximum is kept.
func TestTableGrowBounded(t *testing.T) {
	ctx := t.Context()
	call := func(mod api.Module, fn string, args ...uint64) int32 {
		t.Helper()
		res, err := mod.ExportedFunction(fn).Call(ctx, args...)
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		return int32(res[0])
	}
	mod := instance(t, tableModule(1, -1))
	if got := call(mod, "grow", MaxTableEntries); got != -1 {
		t.Errorf("grow(%d) from 1 = %d, want -1", MaxTableEntries, got)
	}
	if got := call(mod, "grow", MaxTableEntries-1); got != 1 {
		t.Errorf("grow(%d) from 1 = %d, want 1 (the old size)", MaxTableEntries-1, got)
	}
	if got := call(mod, "grow", 1); got != -1 {
		t.Errorf("grow(1) at the bound = %d, want -1", got)
	}
	if got := call(mod, "size"); got != MaxTableEntries {
		t.Errorf("size = %d, want %d", got, MaxTableEntries)
	}

	mod = instance(t, tableModule(1, 10))
	if got := call(mod, "grow", 10); got != -1 {
		t.Errorf("grow(10) past a declared max of 10 = %d, want -1", got)
	}
	if got := call(mod, "grow", 9); got != 1 {
		t.Errorf("grow(9) to the declared max = %d, want 1", got)
	}
}

// recModule exports rec(n), which recurses n times (n+1 frames of one
// frame unit each) and returns n, and fail(), which traps on its own.
func recModule() []byte {
	return binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32}, []byte{0x60, 0, 0})),
		sec(secFunction, vec(u32(0), u32(1))),
		sec(secExport, vec(cat(str("rec"), []byte{0x00}, u32(0)), cat(str("fail"), []byte{0x00}, u32(1)))),
		sec(secCode, vec(
			body(vec(),
				[]byte{0x20, 0, 0x45, 0x04, i32, 0x41, 0, 0x05}, // if n == 0 { 0 } else {
				[]byte{0x20, 0, 0x41, 1, 0x6B, 0x10, 0},         //   rec(n-1)
				[]byte{0x41, 1, 0x6A, end, end},                 //   + 1 }
			),
			body(vec(), []byte{0x00, end}),
		)),
	)
}

// mutualModule exports a(n) = n through the cycle a -> b -> c ->
// call_indirect a, each leaving the function another way: a by return,
// b by br_if to its outermost label, c by br_table to it, all of them by
// their final end when n > 0.
func mutualModule() []byte {
	const (
		a, b, c = 0, 1, 2
		unary   = 0
	)
	rest := func(next []byte) []byte { // local.get 0; i32.const 1; i32.sub; <next>; i32.const 1; i32.add
		return cat([]byte{0x20, 0, 0x41, 1, 0x6B}, next, []byte{0x41, 1, 0x6A})
	}
	return binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32})),
		sec(secFunction, vec(u32(unary), u32(unary), u32(unary))),
		sec(secTable, vec([]byte{0x70, 0x00, 1})),
		sec(secExport, vec(cat(str("a"), []byte{0x00}, u32(a)))),
		sec(secElement, vec(cat(u32(0), []byte{0x41, 0, end}, vec(u32(a))))),
		sec(secCode, vec(
			body(vec(),
				[]byte{0x20, 0, 0x45, 0x04, 0x40, 0x41, 0, 0x0F, end}, // if n == 0 { return 0 }
				rest([]byte{0x10, b}), []byte{end}),
			body(vec(),
				[]byte{0x41, 0, 0x20, 0, 0x45, 0x0D, 0, 0x1A}, // br_if 0 (the function) with 0; drop
				rest([]byte{0x10, c}), []byte{end}),
			body(vec(),
				[]byte{0x02, i32, 0x41, 0, 0x20, 0, 0x0E, 1, 1, 0, end, 0x1A}, // block (result i32); br_table [1] 0: n == 0 returns 0; drop
				rest([]byte{0x41, 0, 0x11, unary, 0}), []byte{end}),           // call_indirect t[0] = a
		)),
	)
}

func TestDepthLimit(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name string
		wasm []byte
		fn   string
	}{
		{"recursion", recModule(), "rec"},
		{"mutual recursion through call_indirect", mutualModule(), "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mod := instance(t, c.wasm)
			f := mod.ExportedFunction(c.fn)
			// fn(n) runs n+1 frames. fn(k) for k < 3 leaves through each
			// way out once; had one of them not decremented the depth,
			// the next call at the limit would trap.
			for k := range uint64(3) {
				if res, err := f.Call(ctx, k); err != nil || res[0] != k {
					t.Fatalf("%s(%d) = %v, %v", c.fn, k, res, err)
				}
				res, err := f.Call(ctx, MaxDepth-1)
				if err != nil || res[0] != MaxDepth-1 {
					t.Fatalf("%s(%d) = %v, %v; want %d at depth %d", c.fn, MaxDepth-1, res, err, MaxDepth-1, MaxDepth)
				}
			}
			if StackLimited(mod) {
				t.Error("StackLimited after calls within the limit")
			}
			if hw, ok := DepthHighWater(mod); !ok || hw < MaxDepth-Interval || hw > MaxDepth {
				t.Errorf("high-water mark %d, %v; want within %d of %d", hw, ok, Interval, MaxDepth)
			}
			if _, err := f.Call(ctx, MaxDepth); err == nil {
				t.Fatalf("%s(%d) at depth %d: no trap", c.fn, MaxDepth, MaxDepth+1)
			}
			if !StackLimited(mod) {
				t.Error("StackLimited is false after the depth trap")
			}
		})
	}
	t.Run("other traps", func(t *testing.T) {
		mod := instance(t, recModule())
		if _, err := mod.ExportedFunction("fail").Call(ctx); err == nil {
			t.Fatal("fail() did not trap")
		}
		if StackLimited(mod) {
			t.Error("StackLimited after an unreachable of the guest's own")
		}
	})
}

// TestFrameWeight: a function with many locals counts for more frame
// units, so it reaches the limit at a proportionally smaller depth.
func TestFrameWeight(t *testing.T) {
	const locals = 15 * FrameUnitLocals // with the parameter: 1 + 15 = 16 units
	w := frameWeight(1, locals)
	if w != 16 {
		t.Fatalf("frameWeight(1, %d) = %d, want 16", locals, w)
	}
	m := recModule()
	m = binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32})),
		sec(secFunction, vec(u32(0))),
		sec(secExport, vec(cat(str("rec"), []byte{0x00}, u32(0)))),
		sec(secCode, vec(body(vec(cat(u32(locals), []byte{i32})),
			[]byte{0x20, 0, 0x45, 0x04, i32, 0x41, 0, 0x05},
			[]byte{0x20, 0, 0x41, 1, 0x6B, 0x10, 0},
			[]byte{0x41, 1, 0x6A, end, end},
		))),
	)
	mod := instance(t, m)
	f := mod.ExportedFunction("rec")
	frames := uint64(MaxDepth / w)
	if _, err := f.Call(t.Context(), frames-1); err != nil {
		t.Fatalf("%d frames of %d units: %v", frames, w, err)
	}
	if _, err := f.Call(t.Context(), frames); err == nil || !StackLimited(mod) {
		t.Fatalf("%d frames of %d units: err = %v, StackLimited %v", frames+1, w, err, StackLimited(mod))
	}
}

func TestMultiValueWrapper(t *testing.T) {
	// pair(n) = (n, n+1) returned by return, and swap via the final end.
	m := binary(
		sec(secType, vec([]byte{0x60, 1, i32, 2, i32, i32})),
		sec(secFunction, vec(u32(0), u32(0))),
		sec(secExport, vec(cat(str("pair"), []byte{0x00}, u32(0)), cat(str("early"), []byte{0x00}, u32(1)))),
		sec(secCode, vec(
			body(vec(), []byte{0x20, 0, 0x20, 0, 0x41, 1, 0x6A, end}),
			body(vec(), []byte{0x20, 0, 0x41, 7, 0x0F, end}),
		)),
	)
	mod := instance(t, m)
	for fn, want := range map[string][2]uint64{"pair": {5, 6}, "early": {5, 7}} {
		res, err := mod.ExportedFunction(fn).Call(t.Context(), 5)
		if err != nil || len(res) != 2 || res[0] != want[0] || res[1] != want[1] {
			t.Errorf("%s(5) = %v, %v; want %v", fn, res, err, want)
		}
	}
}
