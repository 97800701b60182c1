// Package checkpoint rewrites a WebAssembly module so that the guest calls
// back into the host at least once every Interval loop iterations and
// function entries.
//
// Why: compiled guest code cannot be preempted by the Go scheduler, so a
// guest that never calls the host can neither be stopped nor let a garbage
// collection's stop-the-world proceed. wazero's own answer
// (WithCloseOnContextDone) leaves compiled code for Go on every loop
// back-edge, unconditionally; for a Go guest that made ordinary string
// scanning five to ten times slower (an SSE event of a vendor stream cost
// 18–50 µs instead of 4–13 µs). Instrument gets the same guarantee for a
// decrement and a branch per back-edge: the host function it calls (Import)
// is ordinary Go code, where the goroutine can be preempted and where the
// host checks for cancellation and its compute watchdog.
//
// The rewrite adds one function import (Import, type [] -> []) after the
// module's own imports, three mutable i32 globals after its globals (the
// countdown, the call depth and its exported high-water mark, below), and
// at the start of every function body (unless it opens with a loop) and of
// every loop body:
//
//	global.get $n; i32.const 1; i32.sub; global.set $n
//	global.get $n; i32.eqz
//	if; i32.const Interval; global.set $n; call $check; end
//
// A wasm function can only run for long by looping or by calling, so a
// guest runs at most Interval straight-line stretches between two checks.
// Function indices at or past the new import shift by one everywhere they
// occur (calls, ref.func, exports, element segments, constant expressions,
// the name section). Everything else is copied byte for byte.
//
// Two bounds keep a guest from making the host allocate outside linear
// memory. Tables: a defined table may declare at most MaxTableEntries
// (and all of them MaxTotalTableEntries), a table without a maximum gets
// MaxTableEntries as its maximum, and imported tables are refused. Native
// call stack: a mutable i32 global $depth counts the frame units (see
// MaxDepth) of the functions running; each function body becomes
//
//	<enter: $depth += w; trap past MaxDepth> block bt <body> end <$depth -= w>
//
// where the wrapper block takes over the function's outermost label, so
// branches out of the function reach the decrement, and every return
// becomes a branch to the wrapper. A trap leaves $depth wherever it was;
// the host discards a trapped instance anyway. An exported global
// (DepthExport) keeps the high-water mark, which tells the host both that
// a trap was the depth limit (StackLimited) and how deep a call that
// returned went (DepthHighWater).
//
// Instrument parses untrusted input: it validates what it relies on
// (section framing, instruction immediates, that no instruction names the
// new global, that no declared length promises more elements than there
// are bytes) and refuses what the host does not run: a start function
// (it would run during instantiation, beyond cancellation and the
// watchdog) and features outside the set the host's wazero runtime
// accepts (tail calls, exceptions, threads, multiple or 64-bit memories).
// An accepted output is then compiled and validated by wazero as usual.
package checkpoint

import (
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// Import names the host function the instrumented module calls. A module
// that already imports anything from Module is refused.
const (
	Module = "adhost_checkpoint"
	Name   = "check"
)

// MaxLocals bounds the locals of one function (as V8 does).
const MaxLocals = 50_000

// Table bounds. wazero holds a table as one machine word per entry, outside
// linear memory and the runtime's memory limit: a module declaring a
// 100M-entry table made the host allocate 763 MB per instance. A Go
// guest's funcref table holds its functions, about 6,600 entries for the
// adapters built here, so a table of MaxTableEntries (800 KB) leaves 15×
// headroom. A defined table declaring a larger minimum or maximum is
// refused; one with no maximum is given MaxTableEntries as its maximum,
// which wazero's table.grow honours (it returns -1, the wasm failure
// result). Element segments, table.init, table.copy and table.fill cannot
// go past a table's current size, so the size bound covers them.
// MaxTotalTableEntries bounds the sum of the tables' maxima.
const (
	MaxTableEntries      = 100_000
	MaxTotalTableEntries = 2 * MaxTableEntries
)

// MaxDepth bounds the call depth of a guest, in frame units: a function
// adds 1 + its locals and parameters / FrameUnitLocals units while it runs.
// wazero runs a guest on a stack of its own that it grows by doubling (to
// about 100 MB) and never shrinks, held by the function value for as long
// as the instance lives; MaxDepth keeps that stack within a few MiB. See
// RATIONALE.md for the measurements.
const MaxDepth = 20_000

// FrameUnitLocals is the number of locals and parameters that make one
// frame unit (see MaxDepth): a function with many locals spills them to a
// larger native frame, so it counts for more.
const FrameUnitLocals = 16

// DepthExport names the exported i32 global holding the instance's depth
// high-water mark (see DepthHighWater). A module exporting that name
// itself is refused.
const DepthExport = "adhost_checkpoint.depth"

// Interval is the number of loop iterations and function entries between
// two calls of the check function. A call costs about as much as a few
// hundred iterations of a short loop, so at 1024 the checks are a rounding
// error, and a guest still reaches one within microseconds.
const Interval = 1024

// ErrMalformed reports a module Instrument could not parse.
var ErrMalformed = errors.New("malformed module")

// ErrUnsupported reports a module using a feature the sandbox does not run.
var ErrUnsupported = errors.New("unsupported feature")

// ErrLimit reports a module declaring more than a sandbox bound allows
// (a table larger than MaxTableEntries, or tables larger in total than
// MaxTotalTableEntries).
var ErrLimit = errors.New("over a sandbox limit")

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// order is the position of each known section in a module (the tag
// section sits between memory and global).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id      byte
	payload []byte
}

// module is what the rewrite needs to know about the input.
type module struct {
	sections       []section
	importedFuncs  uint32 // function imports in the input
	importedGlobal uint32
	definedGlobals uint32
	types          uint32
	typeResults    [][]byte // each type's result types
	typeParams     []uint32 // each type's parameter count
	funcTypes      []uint32 // each defined function's type index
	tables         []byte   // the table section rewritten with bounded maxima
}

// Instrument returns the instrumented copy of the binary module wasm.
func Instrument(wasm []byte) ([]byte, error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	rw := &rewriter{
		m:         m,
		shiftFrom: m.importedFuncs,
		checkFunc: m.importedFuncs,
		counter:   m.importedGlobal + m.definedGlobals,
	}
	rw.depth, rw.high = rw.counter+1, rw.counter+2
	rw.blockTypes(m.types + 1)
	out := make([]byte, 0, len(wasm)+len(wasm)/8)
	out = append(out, wasm[:8]...)
	wroteType, wroteImport, wroteGlobal, wroteExport := false, false, false, false
	// emitMissing writes the sections the rewrite needs that the input
	// lacks, before the first section that must follow them.
	emitMissing := func(before int) error {
		if !wroteType && before > order[secType] {
			out = appendSection(out, secType, rw.typeSection(nil))
			wroteType = true
		}
		if !wroteImport && before > order[secImport] {
			p, err := appendImportSection(nil, nil, m.types)
			if err != nil {
				return err
			}
			out = appendSection(out, secImport, p)
			wroteImport = true
		}
		if !wroteGlobal && before > order[secGlobal] {
			p, err := rw.globalSection(nil)
			if err != nil {
				return err
			}
			out = appendSection(out, secGlobal, p)
			wroteGlobal = true
		}
		if !wroteExport && before > order[secExport] {
			p, err := rw.exportSection(nil)
			if err != nil {
				return err
			}
			out = appendSection(out, secExport, p)
			wroteExport = true
		}
		return nil
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			if err := emitMissing(order[s.id]); err != nil {
				return nil, err
			}
		}
		var p []byte
		switch s.id {
		case secType:
			p, wroteType = rw.typeSection(s.payload), true
		case secImport:
			p, err = appendImportSection(nil, s.payload, m.types)
			wroteImport = true
		case secGlobal:
			p, err = rw.globalSection(s.payload)
			wroteGlobal = true
		case secExport:
			p, err = rw.exportSection(s.payload)
			wroteExport = true
		case secTable:
			p = m.tables
		case secElement:
			p, err = rw.elementSection(s.payload)
		case secCode:
			p, err = rw.codeSection(s.payload)
		case secCustom:
			if p = rw.customSection(s.payload); p == nil {
				continue
			}
		default:
			p = s.payload
		}
		if err != nil {
			return nil, err
		}
		out = appendSection(out, s.id, p)
	}
	if err := emitMissing(len(order) + 1); err != nil {
		return nil, err
	}
	return out, nil
}

// parse checks the header and section framing and reads the counts the
// rewrite needs.
func parse(wasm []byte) (*module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly binary", ErrMalformed)
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: binary format version %x", ErrUnsupported, wasm[4:8])
	}
	m := &module{}
	r := reader{b: wasm, off: 8}
	last := 0
	for !r.done() {
		id := r.byte()
		size := r.u32()
		payload := r.bytes(size)
		if r.err != nil {
			return nil, r.err
		}
		if id != secCustom {
			pos, ok := order[id]
			if !ok {
				return nil, fmt.Errorf("%w: unknown section id %d", ErrMalformed, id)
			}
			if pos <= last {
				return nil, fmt.Errorf("%w: section %d out of order", ErrMalformed, id)
			}
			last = pos
		}
		m.sections = append(m.sections, section{id: id, payload: payload})
		var err error
		switch id {
		case secType:
			m.typeParams, m.typeResults, err = readTypes(payload)
			m.types = uint32(len(m.typeResults))
		case secImport:
			err = m.readImports(payload)
		case secGlobal:
			m.definedGlobals, err = vecCount(payload)
		case secFunction:
			m.funcTypes, err = readIndices(payload, m.types)
		case secTable:
			m.tables, err = readTables(payload)
		case secMemory:
			err = readMemories(payload)
		case secData:
			err = readData(payload)
		case secDataCount:
			err = readDataCount(payload)
		case secTag:
			err = fmt.Errorf("%w: exception tags", ErrUnsupported)
		case secStart:
			// A start function runs while the module is instantiated,
			// outside any call: no context, no watchdog, nothing to
			// stop it. Initialisation belongs in an exported function
			// the host calls (ABI v1: _initialize).
			err = fmt.Errorf("%w: a start function", ErrUnsupported)
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readImports counts function and global imports and refuses a module
// that imports from the checkpoint module itself.
func (m *module) readImports(p []byte) error {
	r := reader{b: p}
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := r.name()
		r.name()
		if r.err == nil && mod == Module {
			return fmt.Errorf("%w: the module imports from the reserved module %q", ErrUnsupported, Module)
		}
		switch kind := r.byte(); kind {
		case 0x00: // function
			r.u32()
			m.importedFuncs++
		case 0x01: // table
			// Only host modules could export one, and none does; its
			// size would be outside the bounds on defined tables.
			return fmt.Errorf("%w: an imported table", ErrUnsupported)
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			m.importedGlobal++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			r.fail("import kind %#x", kind)
		}
	}
	if r.err == nil && !r.done() {
		r.fail("trailing bytes in the import section")
	}
	return r.err
}

// vecCount reads the leading element count of a vector section.
func vecCount(p []byte) (uint32, error) {
	r := reader{b: p}
	n := r.count()
	return n, r.err
}

// The sections below are copied unchanged; they are read through only to
// bound what wazero's decoder will allocate (see reader.count).

// readTypes checks the type section (function types only) and returns
// each type's parameter count and results.
func readTypes(p []byte) ([]uint32, [][]byte, error) {
	r := reader{b: p}
	n := r.count()
	params := make([]uint32, 0, n)
	results := make([][]byte, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 {
			r.unsupported("type form %#x (GC types)", form)
		}
		var start int
		for k := range 2 { // parameters, results
			c := r.count()
			start = r.off
			for j := uint32(0); j < c && r.err == nil; j++ {
				valtype(&r)
			}
			if k == 0 {
				params = append(params, c)
			}
		}
		results = append(results, r.b[min(start, r.off):r.off])
	}
	return params, results, finished(&r, "type")
}

// readIndices reads the function section: each function's type index,
// which must name one of the types.
func readIndices(p []byte, types uint32) ([]uint32, error) {
	r := reader{b: p}
	n := r.count()
	idx := make([]uint32, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		if t := r.u32(); r.err == nil && t >= types {
			r.fail("type index %d out of range", t)
		} else {
			idx = append(idx, t)
		}
	}
	return idx, finished(&r, "function")
}

// readTables checks the tables against MaxTableEntries and
// MaxTotalTableEntries and returns the section with every table's maximum
// declared (MaxTableEntries where the input has none).
func readTables(p []byte) ([]byte, error) {
	r := reader{b: p}
	n := r.count()
	out := appendU32(nil, n)
	var total uint64
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.byte()
		if t != 0x70 && t != 0x6F {
			r.unsupported("table type %#x", t)
		}
		flag, lo, hi, hasMax := r.limitsOf()
		if r.err != nil {
			break
		}
		if flag > 0x01 {
			r.fail("table limits flag %#x", flag)
			break
		}
		if !hasMax {
			hi = MaxTableEntries
		}
		if lo > MaxTableEntries || hi > MaxTableEntries {
			return nil, fmt.Errorf("%w: table %d declares %d entries (at most %d)", ErrLimit, i, max(lo, hi), MaxTableEntries)
		}
		if total += uint64(max(lo, hi)); total > MaxTotalTableEntries {
			return nil, fmt.Errorf("%w: table %d takes the tables past %d entries in total", ErrLimit, i, MaxTotalTableEntries)
		}
		out = append(out, t, 0x01)
		out = appendU32(appendU32(out, lo), hi)
	}
	return out, finished(&r, "table")
}

func readMemories(p []byte) error {
	r := reader{b: p}
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.limits()
	}
	return finished(&r, "memory")
}

// readData checks the data segments: their offset expressions and that
// each segment's bytes are present.
func readData(p []byte) error {
	r := reader{b: p}
	var none rewriter // offsets are i32 constant expressions: nothing to shift
	none.counter, none.shiftFrom = ^uint32(0), ^uint32(0)
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch flags := r.u32(); flags {
		case 0:
			none.walk(&r, nil, false)
		case 1:
		case 2:
			memIndex(&r)
			none.walk(&r, nil, false)
		default:
			r.fail("data segment flags %d", flags)
		}
		r.bytes(r.u32())
	}
	return finished(&r, "data")
}

func readDataCount(p []byte) error {
	r := reader{b: p}
	r.u32()
	return finished(&r, "data count")
}

// typeSection returns a type section holding the input's types (payload)
// followed by the check function's type [] -> [] and the block types of
// multi-value functions (see blockTypes).
func (rw *rewriter) typeSection(payload []byte) []byte {
	dst := appendU32(nil, rw.m.types+1+uint32(len(rw.extraTypes)))
	if len(payload) > 0 {
		_, n := readU32(payload)
		dst = append(dst, payload[n:]...)
	}
	dst = append(dst, 0x60, 0x00, 0x00)
	for _, results := range rw.extraTypes {
		dst = append(dst, 0x60, 0x00)
		dst = appendU32(dst, uint32(len(results)))
		dst = append(dst, results...)
	}
	return dst
}

// appendImportSection appends the input's imports followed by the check
// function, of type index checkType.
func appendImportSection(dst, payload []byte, checkType uint32) ([]byte, error) {
	var count uint32
	var rest []byte
	if len(payload) > 0 {
		var n int
		count, n = readU32(payload)
		if n == 0 {
			return nil, fmt.Errorf("%w: import count", ErrMalformed)
		}
		rest = payload[n:]
	}
	dst = appendU32(dst, count+1)
	dst = append(dst, rest...)
	dst = appendName(dst, Module)
	dst = appendName(dst, Name)
	dst = append(dst, 0x00)
	return appendU32(dst, checkType), nil
}

func appendSection(dst []byte, id byte, payload []byte) []byte {
	dst = append(dst, id)
	dst = appendU32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

func appendName(dst []byte, s string) []byte {
	dst = appendU32(dst, uint32(len(s)))
	return append(dst, s...)
}

// DepthHighWater returns the depth high-water mark of an instance of an
// instrumented module, in frame units (see MaxDepth), and whether the
// module has one. The mark is recorded at the checkpoints' calls into the
// host, so it may lag the deepest point by up to Interval function entries;
// it is what remains of a call after it returned, when the depth itself is
// back to zero. wazero keeps the native stack a deep call grew for as long
// as the instance lives, so an instance whose mark passed a bound should be
// discarded rather than pooled.
func DepthHighWater(mod api.Module) (uint32, bool) {
	g := mod.ExportedGlobal(DepthExport)
	if g == nil {
		return 0, false
	}
	return uint32(g.Get()), true
}

// StackLimited reports whether the instance's last call trapped because
// it passed MaxDepth. The trap itself is a plain unreachable; the entry
// check records the depth that passed the limit as the high-water mark
// first, and no other path records a mark above MaxDepth.
func StackLimited(mod api.Module) bool {
	hw, ok := DepthHighWater(mod)
	return ok && hw > MaxDepth
}
