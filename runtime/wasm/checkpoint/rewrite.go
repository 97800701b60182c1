package checkpoint

import "fmt"

// rewriter holds what every rewritten section needs.
type rewriter struct {
	m          *module
	shiftFrom  uint32   // function indices >= shiftFrom move up by one
	checkFunc  uint32   // index of the check import
	counter    uint32   // index of the countdown global
	depth      uint32   // index of the call depth global
	high       uint32   // index of the depth high-water mark global (exported)
	check      []byte   // the checkpoint sequence, built on first use
	blockType  [][]byte // per type: the block type of a function body's wrapper
	extraTypes [][]byte // results of the types added for multi-value wrappers
}

// blockTypes computes each function type's wrapper block type: empty, its
// one result, or a new type [] -> results (index first, first+1, …).
func (rw *rewriter) blockTypes(first uint32) {
	rw.blockType = make([][]byte, len(rw.m.typeResults))
	for t, results := range rw.m.typeResults {
		switch len(results) {
		case 0:
			rw.blockType[t] = []byte{0x40}
		case 1:
			rw.blockType[t] = results
		default:
			rw.blockType[t] = appendS32(nil, int32(first)+int32(len(rw.extraTypes)))
			rw.extraTypes = append(rw.extraTypes, results)
		}
	}
}

// patcher copies src to out, replacing or inserting at positions the
// reader walking src reports; untouched bytes are copied in bulk.
type patcher struct {
	src  []byte
	out  []byte
	mark int // src[:mark] is already in out
}

func (p *patcher) replaceU32(start, end int, v uint32) {
	p.out = append(p.out, p.src[p.mark:start]...)
	p.out = appendU32(p.out, v)
	p.mark = end
}

func (p *patcher) replace(start, end int, b []byte) {
	p.out = append(p.out, p.src[p.mark:start]...)
	p.out = append(p.out, b...)
	p.mark = end
}

func (p *patcher) insert(at int, b []byte) {
	p.out = append(p.out, p.src[p.mark:at]...)
	p.out = append(p.out, b...)
	p.mark = at
}

func (p *patcher) finish() []byte { return append(p.out, p.src[p.mark:]...) }

// checkpoint returns the instruction sequence inserted at function entries
// and loop headers (see the package doc).
func (rw *rewriter) checkpoint() []byte {
	if rw.check == nil {
		b := []byte{0x23}
		b = appendU32(b, rw.counter)    // global.get $n
		b = append(b, 0x41, 0x01, 0x6B) // i32.const 1; i32.sub
		b = append(b, 0x24)             //
		b = appendU32(b, rw.counter)    // global.set $n
		b = append(b, 0x23)             //
		b = appendU32(b, rw.counter)    // global.get $n
		b = append(b, 0x45, 0x04, 0x40) // i32.eqz; if (no result)
		b = append(b, 0x41)             //
		b = appendS32(b, Interval)      // i32.const Interval
		b = append(b, 0x24)             //
		b = appendU32(b, rw.counter)    // global.set $n
		b = rw.recordHigh(b)            //
		b = append(b, 0x10)             //
		b = appendU32(b, rw.checkFunc)  // call $check
		rw.check = append(b, 0x0B)      // end
	}
	return rw.check
}

// recordHigh appends: if $depth > $high { $high = $depth }. It runs on the
// slow path of the checkpoint only, so the high-water mark costs nothing
// per call; it lags the true maximum by at most Interval entries' worth of
// frame units.
func (rw *rewriter) recordHigh(b []byte) []byte {
	b = append(b, 0x23)
	b = appendU32(b, rw.depth) // global.get $depth
	b = append(b, 0x23)
	b = appendU32(b, rw.high)       // global.get $high
	b = append(b, 0x4B, 0x04, 0x40) // i32.gt_u; if
	b = append(b, 0x23)
	b = appendU32(b, rw.depth) // global.get $depth
	b = append(b, 0x24)
	b = appendU32(b, rw.high) // global.set $high
	return append(b, 0x0B)    // end
}

// enter returns the sequence opening a function body of weight w frame
// units and wrapper block type bt:
//
//	global.get $d; i32.const w; i32.add; global.set $d
//	global.get $d; i32.const MaxDepth; i32.gt_u
//	if; global.get $d; global.set $high; unreachable; end
//	block bt
//
// The wrapper block takes over the function's outermost label, so every
// branch that left the function now reaches leave's decrement; returns
// are rewritten to branches to it (walk).
func (rw *rewriter) enter(w uint32, bt []byte) []byte {
	b := []byte{0x23}
	b = appendU32(b, rw.depth)
	b = append(b, 0x41)
	b = appendS32(b, int32(w))
	b = append(b, 0x6A, 0x24)
	b = appendU32(b, rw.depth)
	b = append(b, 0x23)
	b = appendU32(b, rw.depth)
	b = append(b, 0x41)
	b = appendS32(b, MaxDepth)
	b = append(b, 0x4B, 0x04, 0x40, 0x23)
	b = appendU32(b, rw.depth)
	b = append(b, 0x24)
	b = appendU32(b, rw.high)
	b = append(b, 0x00, 0x0B, 0x02)
	return append(b, bt...)
}

// leave returns the sequence closing a function body of weight w, after
// the input's final end (which now closes the wrapper block):
//
//	global.get $d; i32.const w; i32.sub; global.set $d; end
func (rw *rewriter) leave(w uint32) []byte {
	b := []byte{0x23}
	b = appendU32(b, rw.depth)
	b = append(b, 0x41)
	b = appendS32(b, int32(w))
	b = append(b, 0x6B, 0x24)
	b = appendU32(b, rw.depth)
	return append(b, 0x0B)
}

// frameWeight is the number of frame units a function holding params
// parameters and locals locals counts for (see MaxDepth).
func frameWeight(params uint32, locals uint64) uint32 {
	return 1 + uint32((uint64(params)+locals)/FrameUnitLocals)
}

// funcIndex reads a function index and shifts it past the new import.
func (rw *rewriter) funcIndex(r *reader, p *patcher) {
	start := r.off
	v := r.u32()
	if r.err != nil || v < rw.shiftFrom {
		return
	}
	if v == ^uint32(0) {
		r.fail("function index out of range")
		return
	}
	p.replaceU32(start, r.off, v+1)
}

// funcIndexVec rewrites a vector of function indices.
func (rw *rewriter) funcIndexVec(r *reader, p *patcher) {
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		rw.funcIndex(r, p)
	}
}

func (rw *rewriter) globalSection(payload []byte) ([]byte, error) {
	var out []byte
	if len(payload) == 0 {
		out = appendU32(nil, 3)
	} else {
		r := reader{b: payload}
		n := r.count()
		p := patcher{src: payload}
		for i := uint32(0); i < n && r.err == nil; i++ {
			valtype(&r)
			if mut := r.byte(); mut > 1 {
				r.fail("global mutability %#x", mut)
			}
			rw.walk(&r, &p, false)
		}
		if err := finished(&r, "global"); err != nil {
			return nil, err
		}
		if n > ^uint32(0)-3 {
			return nil, fmt.Errorf("%w: too many globals", ErrMalformed)
		}
		body := p.finish()
		_, k := readU32(body)
		out = appendU32(nil, n+3)
		out = append(out, body[k:]...)
	}
	out = append(out, 0x7F, 0x01, 0x41) // $n: i32, mutable, i32.const
	out = appendS32(out, Interval)
	out = append(out, 0x0B)
	out = append(out, 0x7F, 0x01, 0x41, 0x00, 0x0B)       // $depth = 0
	return append(out, 0x7F, 0x01, 0x41, 0x00, 0x0B), nil // $high = 0
}

// exportSection shifts the exported function indices and adds the export
// of the depth high-water mark (DepthExport).
func (rw *rewriter) exportSection(payload []byte) ([]byte, error) {
	var n uint32
	var body []byte
	if len(payload) > 0 {
		var err error
		if n, body, err = rw.exports(payload); err != nil {
			return nil, err
		}
		if n == ^uint32(0) {
			return nil, fmt.Errorf("%w: too many exports", ErrMalformed)
		}
		_, k := readU32(body)
		body = body[k:]
	}
	out := appendU32(nil, n+1)
	out = append(out, body...)
	out = appendName(out, DepthExport)
	out = append(out, 0x03)
	return appendU32(out, rw.high), nil
}

func (rw *rewriter) exports(payload []byte) (uint32, []byte, error) {
	r := reader{b: payload}
	p := patcher{src: payload}
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if name := r.name(); name == DepthExport {
			return 0, nil, fmt.Errorf("%w: the module exports the reserved name %q", ErrUnsupported, DepthExport)
		}
		switch kind := r.byte(); kind {
		case 0x00:
			rw.funcIndex(&r, &p)
		case 0x03:
			if g := r.u32(); r.err == nil && g >= rw.counter {
				r.fail("global index %d out of range", g)
			}
		default:
			r.u32()
		}
	}
	return n, p.finish(), finished(&r, "export")
}

func (rw *rewriter) elementSection(payload []byte) ([]byte, error) {
	r := reader{b: payload}
	p := patcher{src: payload}
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			r.fail("element segment flags %d", flags)
			break
		}
		if flags&0x02 != 0 && flags&0x01 == 0 { // explicit table index
			r.u32()
		}
		if flags&0x01 == 0 { // active: offset expression
			rw.walk(&r, &p, false)
		}
		if flags&0x03 != 0 { // elemkind or reftype
			r.byte()
		}
		if flags&0x04 == 0 {
			rw.funcIndexVec(&r, &p)
		} else {
			k := r.count()
			for j := uint32(0); j < k && r.err == nil; j++ {
				rw.walk(&r, &p, false)
			}
		}
	}
	return p.finish(), finished(&r, "element")
}

func (rw *rewriter) codeSection(payload []byte) ([]byte, error) {
	r := reader{b: payload}
	n := r.count()
	out := make([]byte, 0, len(payload)+len(payload)/8)
	out = appendU32(out, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		body := r.bytes(r.u32())
		if r.err != nil {
			break
		}
		b := reader{b: body}
		p := patcher{src: body, out: make([]byte, 0, len(body)+len(body)/8+32)}
		groups := b.count()
		var locals uint64
		for j := uint32(0); j < groups && b.err == nil; j++ {
			locals += uint64(b.u32())
			valtype(&b)
		}
		if locals > MaxLocals && b.err == nil {
			// wazero allocates the declared locals up front.
			b.unsupported("%d locals in one function (at most %d)", locals, MaxLocals)
		}
		if i >= uint32(len(rw.m.funcTypes)) && b.err == nil {
			b.fail("more function bodies than functions")
		}
		if b.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, b.err)
		}
		t := rw.m.funcTypes[i]
		w := frameWeight(rw.m.typeParams[t], locals)
		entry := rw.enter(w, rw.blockType[t])
		// A body that opens with a loop gets its entry check from the
		// loop header's (Go's wasm code generator opens every function
		// with its resumption loop): one check per call instead of two.
		if b.off >= len(body) || body[b.off] != 0x03 {
			entry = append(entry, rw.checkpoint()...)
		}
		p.insert(b.off, entry)
		rw.walk(&b, &p, true)
		if err := finished(&b, "function body"); err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		nb := append(p.finish(), rw.leave(w)...)
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, finished(&r, "code")
}

// customSection shifts the function indices of the "name" section (debug
// names) and copies any other custom section. A name section it cannot
// parse is dropped (nil): it is debug information only.
func (rw *rewriter) customSection(payload []byte) []byte {
	r := reader{b: payload}
	if r.name() != "name" || r.err != nil {
		return payload
	}
	out := append([]byte(nil), payload[:r.off]...)
	for !r.done() {
		id := r.byte()
		content := r.bytes(r.u32())
		if r.err != nil {
			return nil
		}
		if id == 1 || id == 2 { // function names, local names
			var err error
			if content, err = rw.nameMap(content, id == 2); err != nil {
				return nil
			}
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(content)))
		out = append(out, content...)
	}
	return out
}

// nameMap shifts the function indices of a name map (vec(funcidx name)),
// or with locals of an indirect name map (vec(funcidx vec(localidx name))).
func (rw *rewriter) nameMap(b []byte, locals bool) ([]byte, error) {
	r := reader{b: b}
	p := patcher{src: b}
	k := r.count()
	for j := uint32(0); j < k && r.err == nil; j++ {
		rw.funcIndex(&r, &p)
		if !locals {
			r.name()
			continue
		}
		m := r.count()
		for l := uint32(0); l < m && r.err == nil; l++ {
			r.u32()
			r.name()
		}
	}
	return p.finish(), finished(&r, "name")
}

// finished turns the reader's error, or bytes left over, into the section's
// error.
func finished(r *reader, what string) error {
	if r.err != nil {
		return fmt.Errorf("%s section: %w", what, r.err)
	}
	if !r.done() {
		return fmt.Errorf("%w: %s: trailing bytes", ErrMalformed, what)
	}
	return nil
}

// valtype reads a value type the sandbox runs.
func valtype(r *reader) {
	switch t := r.byte(); t {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
	default:
		if r.err == nil {
			r.unsupported("value type %#x", t)
		}
	}
}

// blockType reads a block type: empty, one value type, or a type index
// (s33).
func blockType(r *reader) {
	if r.off < len(r.b) {
		switch r.b[r.off] {
		case 0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
			r.off++
			return
		}
	}
	r.skipSigned(5)
}

// memarg reads a memory operand: alignment and offset. An alignment with
// bit 6 set names a memory index (multiple memories).
func memarg(r *reader) {
	if align := r.u32(); align&0x40 != 0 {
		r.unsupported("multiple memories")
	}
	r.u32()
}

// memIndex reads a memory index, which must be 0.
func memIndex(r *reader) {
	if i := r.u32(); i != 0 {
		r.unsupported("multiple memories")
	}
}

// walk reads one expression up to and including its final end. In code
// (a function body) it inserts a checkpoint after every loop's block type;
// everywhere it shifts function indices and refuses references to the
// countdown global.
func (rw *rewriter) walk(r *reader, p *patcher, code bool) {
	depth := 0
	for r.err == nil {
		op := r.byte()
		switch {
		case op == 0x0B: // end
			if depth == 0 {
				return
			}
			depth--
		case op == 0x02 || op == 0x04: // block, if
			blockType(r)
			depth++
		case op == 0x03: // loop
			blockType(r)
			depth++
			if code && r.err == nil {
				p.insert(r.off, rw.checkpoint())
			}
		case op == 0x0F: // return
			if code {
				// A branch to the wrapper block (see enter), so that the
				// depth is decremented on the way out.
				p.replace(r.off-1, r.off, appendU32([]byte{0x0C}, uint32(depth)))
			}
		case op <= 0x01, op == 0x05, op == 0x1A, op == 0x1B, op == 0xD1:
			// unreachable, nop, else, drop, select, ref.is_null
		case op == 0x0C || op == 0x0D: // br, br_if
			r.u32()
		case op == 0x0E: // br_table
			n := r.count()
			for i := uint64(0); i <= uint64(n) && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x10 || op == 0xD2: // call, ref.func
			rw.funcIndex(r, p)
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select t*
			n := r.count()
			for i := uint32(0); i < n && r.err == nil; i++ {
				valtype(r)
			}
		case op >= 0x20 && op <= 0x22: // local.get/set/tee
			r.u32()
		case op == 0x23 || op == 0x24: // global.get/set
			if i := r.u32(); r.err == nil && i >= rw.counter {
				r.fail("global index %d out of range", i)
			}
		case op == 0x25 || op == 0x26: // table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3E: // loads and stores
			memarg(r)
		case op == 0x3F || op == 0x40: // memory.size, memory.grow
			memIndex(r)
		case op == 0x41: // i32.const
			r.skipSigned(5)
		case op == 0x42: // i64.const
			r.skipSigned(10)
		case op == 0x43: // f32.const
			r.bytes(4)
		case op == 0x44: // f64.const
			r.bytes(8)
		case op >= 0x45 && op <= 0xC4: // numeric, no immediates
		case op == 0xD0: // ref.null
			if t := r.byte(); t != 0x70 && t != 0x6F {
				r.unsupported("reference type %#x", t)
			}
		case op == 0xFC:
			miscOp(r)
		case op == 0xFD:
			vectorOp(r)
		default:
			r.unsupported("instruction %#x (tail calls, exceptions, threads and GC are not run)", op)
		}
	}
}

// miscOp reads the 0xFC-prefixed instructions: saturating truncation, bulk
// memory and table operations.
func miscOp(r *reader) {
	switch sub := r.u32(); sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
	case 8: // memory.init
		r.u32()
		memIndex(r)
	case 9, 13, 15, 16, 17: // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case 10: // memory.copy
		memIndex(r)
		memIndex(r)
	case 11: // memory.fill
		memIndex(r)
	case 12, 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.unsupported("instruction 0xfc %d", sub)
	}
}

// vectorOp reads the 0xFD-prefixed (SIMD) instructions.
func vectorOp(r *reader) {
	sub := r.u32()
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, stores, load_zero
		memarg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		memarg(r)
		r.byte()
	case sub <= 0xFF: // no immediates
	default:
		r.unsupported("instruction 0xfd %d", sub)
	}
}
