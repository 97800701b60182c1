package wasm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/runtime/manifest"
)

// tiny describes a hand-assembled module of a few hundred bytes. Load
// checks that do not need a Go guest use it: it compiles in microseconds
// even under -race, where compiling a Go guest takes minutes.
type tinyImport struct {
	module, name string
	typ          byte // index into the type section below
}

type tiny struct {
	marker     string // export name of the marker ("" = none)
	importHTTP bool   // import llmhost.http_start
	extra      *tinyImport
	infoID     string // id answered by OpInfo
	manifest   string
	// startLoop makes _initialize loop forever and also declares it the
	// module's start function, which would run during instantiation.
	startLoop bool
}

const tinyManifest = `id = "tiny"
name = "Tiny"
version = "1.0.0"
kind = "tool"
contractVersion = "1.0"
`

func (tm tiny) build(t testing.TB) Pin {
	t.Helper()
	if tm.manifest == "" {
		tm.manifest = tinyManifest
	}
	m, err := manifest.Parse([]byte(tm.manifest))
	if err != nil {
		t.Fatal(err)
	}
	info := []byte(`{"id":"` + tm.infoID + `","version":"` + m.Version + `","kind":"` + string(m.Kind) + `"}`)

	var mod []byte
	mod = append(mod, 0, 'a', 's', 'm', 1, 0, 0, 0)
	section := func(id byte, body []byte) {
		mod = append(mod, id)
		mod = uleb(mod, uint64(len(body)))
		mod = append(mod, body...)
	}
	name := func(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }
	// Types: 0 ()->(), 1 (i32)->i32, 2 (i32,i32)->(), 3 (i32,i32,i32,i32)->i32,
	// 4 (i32,i32,i32)->i32.
	section(1, []byte{5,
		0x60, 0, 0,
		0x60, 1, 0x7f, 1, 0x7f,
		0x60, 2, 0x7f, 0x7f, 0,
		0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f,
		0x60, 3, 0x7f, 0x7f, 0x7f, 1, 0x7f})
	imports := []byte{1}
	imports = name(imports, abi.HostModule)
	imports = name(imports, abi.HostOutput)
	imports = append(imports, 0, 2)
	nImports := 1
	if tm.importHTTP {
		imports[0] = 2
		imports = name(imports, abi.HostModule)
		imports = name(imports, abi.HostHTTPStart)
		imports = append(imports, 0, 3)
		nImports = 2
	}
	if tm.extra != nil {
		imports[0]++
		imports = name(imports, tm.extra.module)
		imports = name(imports, tm.extra.name)
		imports = append(imports, 0, tm.extra.typ)
		nImports++
	}
	section(2, imports)
	// Functions: _initialize, marker, plugin_call.
	section(3, []byte{3, 0, 0, 1})
	section(5, []byte{1, 0, 1}) // one memory, min 1 page
	exports := []byte{0}
	add := func(n string, kind byte, idx int) {
		exports[0]++
		exports = name(exports, n)
		exports = append(exports, kind, byte(idx))
	}
	add("memory", 2, 0)
	add(abi.ExportInitialize, 0, nImports)
	if tm.marker != "" {
		add(tm.marker, 0, nImports+1)
	}
	add(abi.ExportCall, 0, nImports+2)
	section(7, exports)
	if tm.startLoop {
		section(8, uleb(nil, uint64(nImports)))
	}
	empty := []byte{2, 0, 0x0b}
	call := []byte{0, 0x41, 0}                  // no locals; i32.const 0
	call = append(call, 0x41)                   // i32.const len
	call = sleb(call, int64(len(info)))         //
	call = append(call, 0x10, 0, 0x41, 0, 0x0b) // call output; i32.const 0; end
	code := []byte{3}
	if tm.startLoop {
		code = append(code, 6, 0, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b) // loop br 0 end
	} else {
		code = append(code, empty...)
	}
	code = append(code, empty...)
	code = uleb(code, uint64(len(call)))
	code = append(code, call...)
	section(10, code)
	data := []byte{1, 0, 0x41, 0, 0x0b}
	data = uleb(data, uint64(len(info)))
	data = append(data, info...)
	section(11, data)

	out, err := manifest.Embed(mod, []byte(tm.manifest))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tiny.wasm")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return Pin{ID: m.ID, Version: m.Version, Path: p, SHA256: sha256Hex(out)}
}

func uleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func TestTinyLoads(t *testing.T) {
	x, err := Load(t.Context(), tiny{marker: abi.ExportMarkerV1, infoID: "tiny"}.build(t), Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer x.Close(t.Context())
	if s := x.Stats(); s.Idle != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestTinyImports(t *testing.T) {
	for _, tc := range []struct {
		name string
		imp  tinyImport
		want error
	}{
		{"kv reserved", tinyImport{abi.HostModule, abi.HostKVGet, 3}, ErrImportDenied},
		{"unknown host function", tinyImport{abi.HostModule, "exec", 3}, ErrImportNotInABI},
		{"wrong signature", tinyImport{abi.HostModule, abi.HostInput, 3}, ErrImportNotInABI},
		{"wasi socket", tinyImport{"wasi_snapshot_preview1", "sock_accept", 4}, ErrWASIImport},
		{"other module", tinyImport{"env", "system", 1}, ErrImportNotInABI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imp := tc.imp
			_, err := Load(t.Context(), tiny{marker: abi.ExportMarkerV1, infoID: "tiny", extra: &imp}.build(t), Options{})
			if !errors.Is(err, tc.want) {
				t.Errorf("Load = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestLoadRefusesOverrides: an override above the manifest's bounds is an
// error naming it, never a silent change.
func TestLoadRefusesOverrides(t *testing.T) {
	pin := tiny{marker: abi.ExportMarkerV1, infoID: "tiny"}.build(t)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{MemoryMiB: manifest.MaxMemoryMiB + 1}, "MemoryMiB"},
		{Options{PoolSize: manifest.MaxPoolSize + 1}, "PoolSize"},
		{Options{MaxInstances: -1}, "MaxInstances"},
	} {
		_, err := Load(t.Context(), pin, tc.opts)
		if !errors.Is(err, ErrInstanceConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v) = %v, want ErrInstanceConfig naming %s", tc.opts, err, tc.want)
		}
	}
	x, err := Load(t.Context(), pin, Options{MemoryMiB: manifest.MaxMemoryMiB, PoolSize: manifest.MaxPoolSize})
	if err != nil {
		t.Fatalf("the largest overrides: %v", err)
	}
	x.Close(t.Context())
}
