package checkpoint

import "fmt"

// reader decodes the binary format. The first error sticks: afterwards
// every read returns zero values and done reports true, so callers check
// err once after a sequence of reads.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) done() bool { return r.off >= len(r.b) }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format+" at byte %d", append(append([]any{ErrMalformed}, args...), r.off)...)
	}
	r.off = len(r.b)
}

func (r *reader) unsupported(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("length %d past the end", n)
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose value fits 32 bits.
func (r *reader) u32() uint32 {
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // most indices fit one byte
		r.off++
		return uint32(r.b[r.off-1])
	}
	v, n := readU32(r.b[min(r.off, len(r.b)):])
	if n == 0 {
		r.fail("invalid u32")
		return 0
	}
	r.off += n
	return v
}

// skipSigned skips a signed LEB128 of at most maxBytes bytes (5 for s32
// and s33, 10 for s64). The value range is left to wazero's validation.
func (r *reader) skipSigned(maxBytes int) {
	for i := 0; i < maxBytes; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail("signed integer longer than %d bytes", maxBytes)
}

// count reads a vector length. Every vector element takes at least one
// byte, so a length past the bytes left is malformed. This matters beyond
// this package: wazero's decoder allocates by declared lengths before it
// reads the elements, so a 30-byte module declaring 2^30 data segments made
// the host allocate 6 GB. Every vector of a module that reaches wazero has
// been counted here.
func (r *reader) count() uint32 {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("vector length %d exceeds the %d bytes left", n, len(r.b)-r.off)
		return 0
	}
	return n
}

func (r *reader) name() string {
	return string(r.bytes(r.u32()))
}

// limits skips table or memory limits: a flag, a minimum and, with flag
// bit 0, a maximum. Flags past shared memories (64-bit memories) are not
// run by the sandbox.
func (r *reader) limits() { r.limitsOf() }

// limitsOf reads table or memory limits and returns them; hasMax reports
// whether the maximum is declared (flag bit 0).
func (r *reader) limitsOf() (flag byte, minimum, maximum uint32, hasMax bool) {
	flag = r.byte()
	if flag > 0x03 {
		r.unsupported("limits flag %#x (64-bit memories and tables)", flag)
		return
	}
	minimum = r.u32()
	if flag&1 != 0 {
		maximum, hasMax = r.u32(), true
	}
	return
}

// readU32 decodes an unsigned LEB128 from the start of b and returns its
// value and length, or length 0 if b does not start with a valid u32.
func readU32(b []byte) (uint32, int) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == 4 && c > 0x0F { // more than 32 bits, or a continuation
			return 0, 0
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendS32(dst []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}
