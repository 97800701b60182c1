package jsonscan

import (
	"bytes"
	"unicode/utf8"
	"unsafe"
)

// Decoder reads one JSON document front to back in a single pass,
// validating each byte once as it goes. It is for decoding a whole
// document into Go values without reflection: Pick at the root followed by
// Iter and Pick below it scans a nested container once per level (the
// root's pass validates it, each level below skips it again), which in a
// sandboxed guest costs in proportion. The grammar checks are those of
// Parse; the caller decides what each member means.
//
//	var d jsonscan.Decoder
//	d.Reset(data)
//	if d.Enter() { // an object or an array
//		for d.More() {
//			switch string(d.Key()) {
//			case "name":
//				name, err = d.Value().String()
//			default:
//				d.Skip()
//			}
//		}
//	}
//	err = d.Finish() // the end of input, or the first syntax error
//
// After an error (see Err) every method is a no-op: Enter and More report
// false and Value returns the zero Value.
type Decoder struct {
	d     []byte
	i     int
	st    bitStack // the open containers (1 = object)
	first bool     // just entered: no member or element read yet
	key   []byte   // the current member's decoded name
	kbuf  []byte   // key's storage when the name has escapes
	err   error

	keyCopied bool // key is in kbuf, not a view of d
}

// Reset starts decoding data.
func (d *Decoder) Reset(data []byte) {
	*d = Decoder{d: data, kbuf: d.kbuf[:0]}
}

// Err returns the first syntax error found, if any.
func (d *Decoder) Err() error { return d.err }

// Peek returns the kind of the next value without consuming it (0 at the
// end of input or after an error). Only its first byte is looked at: the
// value is validated when it is read.
func (d *Decoder) Peek() Kind {
	if d.err != nil {
		return 0
	}
	d.i = skipWS(d.d, d.i)
	if d.i >= len(d.d) {
		return 0
	}
	return kindOf(d.d[d.i])
}

// Enter consumes the opening bracket of the next value when it is an
// object or an array; it reports false, consuming nothing, for any other
// value. Read the container's contents with More.
func (d *Decoder) Enter() bool {
	switch d.Peek() {
	case Object, Array:
	default:
		return false
	}
	if d.st.n+1 > maxDepth {
		d.err = syntaxErr(d.i, "exceeded max depth")
		return false
	}
	d.st.push(d.d[d.i] == '{')
	d.i++
	d.first = true
	return true
}

// More advances inside the innermost open container: it reports whether
// another member or element follows, and consumes the closing bracket when
// none does (false; also on a syntax error). In an object it also reads
// the member's name, which Key returns; the member's value must then be
// read (Value, Skip or Enter) before the next More.
func (d *Decoder) More() bool {
	if d.err != nil || d.st.n == 0 {
		return false
	}
	obj := d.st.top()
	closing := byte(']')
	if obj {
		closing = '}'
	}
	i := skipWS(d.d, d.i)
	if i >= len(d.d) {
		d.err = unexpected(d.d, i, "',' or closing bracket")
		return false
	}
	switch c := d.d[i]; {
	case c == closing:
		d.i, d.first = i+1, false
		d.st.n--
		return false
	case d.first:
		d.first = false
	case c == ',':
		i = skipWS(d.d, i+1)
	default:
		if obj {
			d.err = unexpected(d.d, i, "',' or '}'")
		} else {
			d.err = unexpected(d.d, i, "',' or ']'")
		}
		return false
	}
	d.i = i
	if !obj {
		return true
	}
	// A short plain name directly followed by ':' (most names), without
	// the call to readKey: in a guest a call costs more than the scan.
	if i >= len(d.d) || d.d[i] != '"' {
		return d.readKey() // reports the error
	}
	if end, flags, ok := shortString(d.d, i); ok && flags&strSlow == 0 && end < len(d.d) && d.d[end] == ':' {
		d.key, d.keyCopied = d.d[i+1:end-1], false
		d.i = skipWS(d.d, end+1)
		return true
	}
	return d.readKey()
}

// readKey reads `"name" :` at d.i and decodes the name into d.key.
func (d *Decoder) readKey() bool {
	i := d.i
	if i >= len(d.d) || d.d[i] != '"' {
		d.err = unexpected(d.d, i, "object key")
		return false
	}
	end, flags, ok := shortString(d.d, i)
	if !ok {
		var err error
		if end, flags, err = scanString(d.d, i); err != nil {
			d.err = err
			return false
		}
	}
	raw := d.d[i+1 : end-1]
	d.keyCopied = flags&strSlow != 0 && !plainSlow(raw)
	if d.keyCopied {
		d.kbuf = appendUnescaped(d.kbuf[:0], raw)
		d.key = d.kbuf
	} else {
		d.key = raw
	}
	i = skipWS(d.d, end)
	if i >= len(d.d) || d.d[i] != ':' {
		d.err = unexpected(d.d, i, "':'")
		return false
	}
	d.i = skipWS(d.d, i+1)
	return true
}

// plainSlow reports whether a string body flagged strSlow still decodes to
// its own bytes (non-ASCII but valid UTF-8, no escape).
func plainSlow(body []byte) bool {
	return bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)
}

// Key returns the name of the member More just read, unescaped. It is
// valid until the next More.
func (d *Decoder) Key() []byte { return d.key }

// UnsafeKey is Key as a string without a copy when the name holds no
// escapes: it then aliases the document's bytes, which must stay unchanged
// for as long as the string is used (see Value.UnsafeString).
func (d *Decoder) UnsafeKey() string {
	if d.keyCopied {
		return string(d.key)
	}
	return unsafe.String(unsafe.SliceData(d.key), len(d.key))
}

// Value reads the next value, validated in full, and returns it (the zero
// Value after an error). Get, Pick and Iter on it only skip, as for any
// Value.
func (d *Decoder) Value() Value {
	if d.err != nil {
		return Value{}
	}
	i := skipWS(d.d, d.i)
	if i >= len(d.d) {
		d.err = unexpected(d.d, i, "value")
		return Value{}
	}
	if d.d[i] == '"' {
		// Strings keep the flags their scan computed, so that reading
		// them does not look at their bytes again.
		end, flags, ok := shortString(d.d, i)
		if !ok {
			var err error
			if end, flags, err = scanString(d.d, i); err != nil {
				d.err = err
				return Value{}
			}
		}
		d.i = end
		return Value{raw: d.d[i:end], kind: String, flags: flags | strKnown}
	}
	// Scalars go straight to their scanner rather than through skipValue
	// and scanScalar (two calls fewer per number or literal in a guest).
	var end int
	var err error
	switch c := d.d[i]; {
	case c == '-' || isDigit(c):
		end, err = scanNumber(d.d, i)
	case c == '{' || c == '[':
		end, err = skipValue(d.d, i, d.st.n)
	default:
		end, err = scanScalar(d.d, i)
	}
	if err != nil {
		d.err = err
		return Value{}
	}
	d.i = end
	return newValue(d.d[i:end])
}

// Skip reads the next value, validated in full, and discards it.
func (d *Decoder) Skip() { d.Value() }

// Finish reports the first syntax error, or one when containers are left
// open or anything but whitespace follows the document.
func (d *Decoder) Finish() error {
	if d.err != nil {
		return d.err
	}
	if d.st.n != 0 {
		return syntaxErr(d.i, "unclosed container")
	}
	if i := skipWS(d.d, d.i); i != len(d.d) {
		return unexpected(d.d, i, "end of input")
	}
	return nil
}
