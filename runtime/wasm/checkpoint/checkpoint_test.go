package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"adhost/internal/testenv"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Hand-assembled modules. Each helper returns the binary encoding of one
// construct, so a test module reads like its text format.

func u32(v uint32) []byte { return appendU32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func vec(items ...[]byte) []byte { return cat(u32(uint32(len(items))), cat(items...)) }

func str(s string) []byte { return cat(u32(uint32(len(s))), []byte(s)) }

func sec(id byte, payload ...[]byte) []byte {
	p := cat(payload...)
	return cat([]byte{id}, u32(uint32(len(p))), p)
}

func binary(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// body is a function body: local groups, then the instructions.
func body(locals []byte, code ...[]byte) []byte {
	b := cat(locals, cat(code...))
	return cat(u32(uint32(len(b))), b)
}

const (
	i32 = 0x7F
	end = 0x0B
)

// sumModule exports sum(n) = n + (n-1) + … + 1, computed in a loop.
func sumModule() []byte {
	return binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32})),
		sec(secFunction, vec(u32(0))),
		sec(secExport, vec(cat(str("sum"), []byte{0x00}, u32(0)))),
		sec(secCode, vec(body(vec(cat(u32(1), []byte{i32})),
			[]byte{0x02, 0x40},                      // block
			[]byte{0x03, 0x40},                      //   loop
			[]byte{0x20, 0, 0x45, 0x0D, 1},          // local.get 0; i32.eqz; br_if 1
			[]byte{0x20, 1, 0x20, 0, 0x6A, 0x21, 1}, // acc += n
			[]byte{0x20, 0, 0x41, 1, 0x6B, 0x21, 0}, // n -= 1
			[]byte{0x0C, 0, end, end},               // br 0; end; end
			[]byte{0x20, 1, end},                    // local.get 1
		))),
	)
}

// run instantiates wasm with a checkpoint host function counting its calls
// (and the host functions in env) and calls the export fn.
func run(t *testing.T, wasm []byte, env map[string]api.GoFunction, fn string, args ...uint64) (uint64, int) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	checks := 0
	if _, err := rt.NewHostModuleBuilder(Module).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(context.Context, []uint64) { checks++ }), nil, nil).
		Export(Name).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	if len(env) > 0 {
		b := rt.NewHostModuleBuilder("env")
		for name, f := range env {
			b.NewFunctionBuilder().WithGoFunction(f, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	res, err := mod.ExportedFunction(fn).Call(ctx, args...)
	if err != nil {
		t.Fatalf("call %s: %v", fn, err)
	}
	return res[0], checks
}

func TestCountsLoopIterationsAndEntries(t *testing.T) {
	orig := sumModule()
	out, err := Instrument(orig)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{0, 1022, 1023, 5000, 100_000} {
		want, checks := run(t, orig, nil, "sum", n)
		if checks != 0 {
			t.Fatalf("the original module called the check")
		}
		got, checks := run(t, out, nil, "sum", n)
		if got != want || got != n*(n+1)/2%(1<<32) {
			t.Errorf("sum(%d) = %d instrumented, %d original", n, got, want)
		}
		// One function entry and n+1 entries into the loop body.
		if wantChecks := int((n + 2) / Interval); checks != wantChecks {
			t.Errorf("sum(%d): %d checks, want %d", n, checks, wantChecks)
		}
	}
	again, err := Instrument(orig)
	if err != nil || !bytes.Equal(again, out) {
		t.Error("the rewrite is not deterministic (the compilation cache keys on it)")
	}
	if _, err := Instrument(out); !errors.Is(err, ErrUnsupported) {
		t.Errorf("instrumenting twice: err = %v, want ErrUnsupported (reserved import)", err)
	}
}

// indicesModule uses every place a function index occurs: an import
// (env.double), calls, a table filled by two element segments (one of
// function indices, one of ref.func expressions), a funcref global
// initialised with ref.func, exports and the name section.
// f2() = double(t[0]()) + t[1]() + g0, with g0 = 1.
func indicesModule() []byte {
	const (
		tI32   = 0 // () -> i32
		tUnary = 1 // (i32) -> i32
		tVoid  = 2 // () -> ()
		double = 0 // imported
		f1     = 1 // returns 7
		f2     = 2
		f3     = 3 // returns nothing
	)
	return binary(
		sec(secType, vec([]byte{0x60, 0, 1, i32}, []byte{0x60, 1, i32, 1, i32}, []byte{0x60, 0, 0})),
		sec(secImport, vec(cat(str("env"), str("double"), []byte{0x00}, u32(tUnary)))),
		sec(secFunction, vec(u32(tI32), u32(tI32), u32(tVoid))),
		sec(4, vec([]byte{0x70, 0x00, 2})), // table funcref min 2
		sec(secGlobal, vec(
			[]byte{i32, 1, 0x41, 1, end},   // g0: mut i32 = 1
			[]byte{0x70, 0, 0xD2, f1, end}, // g1: funcref = ref.func f1
		)),
		sec(secExport, vec(cat(str("f2"), []byte{0x00}, u32(f2)), cat(str("g0"), []byte{0x03}, u32(0)))),
		sec(secElement, vec(
			cat(u32(0), []byte{0x41, 0, end}, vec(u32(f1))),               // t[0] = f1
			cat(u32(4), []byte{0x41, 1, end}, vec([]byte{0xD2, f1, end})), // t[1] = ref.func f1
		)),
		sec(secCode, vec(
			body(vec(), []byte{0x41, 7, end}),
			body(vec(),
				[]byte{0x41, 0, 0x11, tI32, 0, 0x10, double}, // call_indirect t[0]; call double
				[]byte{0x41, 1, 0x11, tI32, 0, 0x6A},         // + t[1]()
				[]byte{0x23, 0, 0x6A, end},                   // + g0
			),
			body(vec(), []byte{end}),
		)),
		sec(secCustom, str("name"), sec(1, vec(
			cat(u32(double), str("double")), cat(u32(f1), str("seven")), cat(u32(f2), str("combine")), cat(u32(f3), str("init")),
		))),
	)
}

func TestShiftsFunctionIndices(t *testing.T) {
	orig := indicesModule()
	out, err := Instrument(orig)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]api.GoFunction{"double": api.GoFunc(func(_ context.Context, s []uint64) { s[0] *= 2 })}
	want, _ := run(t, orig, env, "f2")
	got, _ := run(t, out, env, "f2")
	if want != 22 || got != want {
		t.Fatalf("f2() = %d instrumented, %d original, want 22", got, want)
	}
	// Debug names still name the same functions.
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if name := cm.ExportedFunctions()["f2"].Name(); name != "combine" {
		t.Errorf("export f2 is named %q, want combine", name)
	}
}

func TestRefuses(t *testing.T) {
	sum := sumModule()
	withCode := func(code ...[]byte) []byte {
		return binary(
			sec(secType, vec([]byte{0x60, 0, 0})),
			sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(vec(), code...))),
		)
	}
	cases := []struct {
		name string
		wasm []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"not wasm", []byte("\x00asx\x01\x00\x00\x00"), ErrMalformed},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), ErrUnsupported},
		{"truncated", sum[:len(sum)-3], ErrMalformed},
		{"section past the end", binary([]byte{secType, 0x7F}), ErrMalformed},
		{"sections out of order", binary(sec(secFunction, vec()), sec(secType, vec())), ErrMalformed},
		{"unknown section", binary(sec(42, nil)), ErrMalformed},
		{"reserved import", binary(sec(secType, vec([]byte{0x60, 0, 0})),
			sec(secImport, vec(cat(str(Module), str("x"), []byte{0x00}, u32(0))))), ErrUnsupported},
		{"start function", binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secStart, u32(0)), sec(secCode, vec(body(vec(), []byte{end})))), ErrUnsupported},
		{"global past the counter", withCode([]byte{0x23, 0, 0x1A, end}), ErrMalformed},
		{"export of the counter", binary(sec(secExport, vec(cat(str("n"), []byte{0x03}, u32(0))))), ErrMalformed},
		{"reserved export", binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secExport, vec(cat(str(DepthExport), []byte{0x00}, u32(0)))), sec(secCode, vec(body(vec(), []byte{end})))), ErrUnsupported},
		{"function type out of range", binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(1)))), ErrMalformed},
		{"more bodies than functions", binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(vec(), []byte{end}), body(vec(), []byte{end})))), ErrMalformed},
		{"exceptions", withCode([]byte{0x06, 0x40, end, end}), ErrUnsupported},
		{"tail call", withCode([]byte{0x12, 0, end}), ErrUnsupported},
		{"threads", withCode([]byte{0xFE, 0x03, 0x00, end}), ErrUnsupported},
		{"multiple memories", withCode([]byte{0x41, 0, 0x28, 0x42, 0, 0, 0x1A, end}), ErrUnsupported},
		{"memory index", withCode([]byte{0x3F, 1, 0x1A, end}), ErrUnsupported},
		{"trailing bytes", withCode([]byte{end, 0x01}), ErrMalformed},
		{"unterminated body", withCode([]byte{0x01}), ErrMalformed},
		{"u32 too long", withCode([]byte{0x0C, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, end}), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Instrument(c.wasm); !errors.Is(err, c.want) {
				t.Errorf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// FuzzInstrument: any input is refused or rewritten without a panic; a
// rewritten module parses again (up to the import it adds), and a module
// wazero accepts stays acceptable after the rewrite (the depth wrapper,
// the bounded tables and the added globals and export included), unless
// it declares tables past the bounds.
func FuzzInstrument(f *testing.F) {
	f.Add(sumModule())
	f.Add(indicesModule())
	f.Add(binary())
	f.Add(recModule())
	f.Add(mutualModule())
	f.Add(tableModule(1, -1))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := Instrument(wasm)
		if err != nil {
			if out != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("output %v with the error %q", out != nil, err)
			}
			return
		}
		// The output parses up to its reserved import.
		if _, err := parse(out); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("rewritten module: %v", err)
		}
		ctx := context.Background()
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		if _, err := rt.CompileModule(ctx, out); err == nil || hasNameSection(wasm) {
			// A name section Instrument cannot parse is dropped, and the
			// input keeping it may be one that makes wazero allocate
			// gigabytes: only the rewrite is safe to compile.
			return
		}
		if _, err := rt.CompileModule(ctx, wasm); err == nil {
			t.Fatalf("wazero accepts the input but not its rewrite")
		}
	})
}

// BenchmarkInstrument rewrites the openai adapter's real build (a Go
// wasip1 module of a few MB), as Load does once per extension.
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile(testenv.BuildPlugin(b, "plugins/openai"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := Instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBoundsDeclaredLengths: lengths that promise more elements than the
// module has bytes are refused before wazero's decoder, which allocates by
// them, sees the module.
func TestBoundsDeclaredLengths(t *testing.T) {
	huge := []byte{0xFF, 0xFF, 0xFF, 0x3F} // 2^30 - 1 elements
	cases := map[string][]byte{
		"data segments":   binary([]byte{secData, 5}, huge, []byte{0}),
		"data bytes":      binary(sec(secData, vec(cat([]byte{1}, huge)))),
		"types":           binary([]byte{secType, 4}, huge),
		"type parameters": binary(sec(secType, vec(cat([]byte{0x60}, huge)))),
		"functions":       binary([]byte{secFunction, 4}, huge),
		"element indices": binary(sec(secElement, vec(cat(u32(1), []byte{0}, huge)))),
		"br_table labels": binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(vec(), []byte{0x41, 0, 0x0E}, huge, []byte{end})))),
		"locals": binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(vec(cat(huge, []byte{i32})), []byte{end})))),
	}
	for name, wasm := range cases {
		if _, err := Instrument(wasm); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The limit on locals is inclusive.
	at := func(n uint32) []byte {
		return binary(sec(secType, vec([]byte{0x60, 0, 0})), sec(secFunction, vec(u32(0))),
			sec(secCode, vec(body(vec(cat(u32(n), []byte{i32})), []byte{end}))))
	}
	if _, err := Instrument(at(MaxLocals)); err != nil {
		t.Errorf("%d locals: %v", MaxLocals, err)
	}
	if _, err := Instrument(at(MaxLocals + 1)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("%d locals: err = %v, want ErrUnsupported", MaxLocals+1, err)
	}
}

func hasNameSection(wasm []byte) bool {
	m, err := parse(wasm)
	if err != nil {
		return false
	}
	for _, s := range m.sections {
		r := reader{b: s.payload}
		if s.id == secCustom && r.name() == "name" {
			return true
		}
	}
	return false
}

// TestLoopFirstBodyChecksOnce: a body that opens with a loop (every
// function Go's wasm code generator emits) gets no entry checkpoint of its
// own — the loop header's check runs right after entry.
func TestLoopFirstBodyChecksOnce(t *testing.T) {
	orig := binary(
		sec(secType, vec([]byte{0x60, 1, i32, 1, i32})),
		sec(secFunction, vec(u32(0))),
		sec(secExport, vec(cat(str("spin"), []byte{0x00}, u32(0)))),
		sec(secCode, vec(body(vec(),
			[]byte{0x03, 0x40}, // loop
			[]byte{0x20, 0, 0x41, 1, 0x6B, 0x22, 0, 0x0D, 0, end}, // n = n-1; br_if 0
			[]byte{0x20, 0, end},
		))),
	)
	out, err := Instrument(orig)
	if err != nil {
		t.Fatal(err)
	}
	// spin(n) enters the loop body n times.
	for n, want := range map[uint64]int{1023: 0, 1024: 1, 4096: 4} {
		if _, checks := run(t, out, nil, "spin", n); checks != want {
			t.Errorf("spin(%d): %d checks, want %d", n, checks, want)
		}
	}
}
