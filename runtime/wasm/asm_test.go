package wasm

import (
	"os"
	"path/filepath"
	"testing"

	"adhost/abi"
	"adhost/runtime/manifest"
)

// asmModule is a hand-assembled extension for the sandbox tests: raw
// memory.grow, tables, recursion, spinning — what a Go guest cannot do on
// purpose, in a module that compiles in microseconds even under -race.
//
// Its functions: 0 the llmhost output import, 1 _initialize, 2 the ABI
// marker, 3 plugin_call, then funcs from 4 on. plugin_call answers OpInfo
// with the manifest's id, version and kind, and runs attack for any other
// op, returning status 1 when attack falls through; without attack it
// answers every op as OpInfo. One memory of one page, with no declared
// maximum (the cap is the manifest's memoryMiB), exported as "memory".
type asmModule struct {
	manifest string
	attack   []byte // plugin_call's code for ops other than OpInfo; local 0 is the op
	funcs    []asmFunc
	tables   []byte          // the table section's payload; nil: none
	exports  map[string]byte // more function exports: name → index
}

// asmFunc is one function of an asmModule.
type asmFunc struct {
	typ  byte   // 0 ()->(), 1 (i32)->i32, 2 (i32,i32)->()
	code []byte // the locals vector, then the body ending in 0x0b
}

func (am asmModule) build(t testing.TB) Pin {
	t.Helper()
	m, err := manifest.Parse([]byte(am.manifest))
	if err != nil {
		t.Fatal(err)
	}
	info := []byte(`{"id":"` + m.ID + `","version":"` + m.Version + `","kind":"` + string(m.Kind) + `"}`)
	mod := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	section := func(id byte, body []byte) {
		mod = append(mod, id)
		mod = uleb(mod, uint64(len(body)))
		mod = append(mod, body...)
	}
	name := func(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }
	section(1, []byte{3, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 0})
	imports := name([]byte{1}, abi.HostModule)
	imports = name(imports, abi.HostOutput)
	section(2, append(imports, 0, 2))
	fsec := []byte{byte(3 + len(am.funcs)), 0, 0, 1}
	for _, f := range am.funcs {
		fsec = append(fsec, f.typ)
	}
	section(3, fsec)
	if am.tables != nil {
		section(4, am.tables)
	}
	section(5, []byte{1, 0, 1})
	exports := []byte{byte(4 + len(am.exports))}
	for i, n := range []string{abi.ExportInitialize, abi.ExportMarkerV1, abi.ExportCall} {
		exports = append(name(exports, n), 0, byte(i+1))
	}
	exports = append(name(exports, "memory"), 2, 0)
	for n, idx := range am.exports {
		exports = append(name(exports, n), 0, idx)
	}
	section(7, exports)
	answer := []byte{0x41, 0, 0x41} // i32.const 0; i32.const len(info)
	answer = sleb(answer, int64(len(info)))
	answer = append(answer, 0x10, 0, 0x41, 0) // call output; i32.const 0
	call := []byte{0}
	if am.attack == nil {
		call = append(append(call, answer...), 0x0b)
	} else {
		call = append(call, 0x20, 0, 0x41) // local.get 0; i32.const OpInfo
		call = sleb(call, int64(abi.OpInfo))
		call = append(call, 0x46, 0x04, 0x40) // i32.eq; if
		call = append(append(call, answer...), 0x0f, 0x0b)
		call = append(append(call, am.attack...), 0x41, 1, 0x0b) // attack; i32.const 1; end
	}
	empty := []byte{0, 0x0b}
	code := uleb(nil, uint64(3+len(am.funcs)))
	for _, body := range [][]byte{empty, empty, call} {
		code = append(uleb(code, uint64(len(body))), body...)
	}
	for _, f := range am.funcs {
		code = append(uleb(code, uint64(len(f.code))), f.code...)
	}
	section(10, code)
	data := uleb([]byte{1, 0, 0x41, 0, 0x0b}, uint64(len(info)))
	section(11, append(data, info...))
	out, err := manifest.Embed(mod, []byte(am.manifest))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), m.ID+".wasm")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return Pin{ID: m.ID, Version: m.Version, Path: p, SHA256: sha256Hex(out)}
}
