package jsonscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Kind is the JSON type of a Value. The zero Kind is "no value" (a Value
// returned with an error).
type Kind uint8

const (
	Null Kind = iota + 1
	Bool
	Number
	String
	Object
	Array
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "bool"
	case Number:
		return "number"
	case String:
		return "string"
	case Object:
		return "object"
	case Array:
		return "array"
	}
	return "invalid"
}

// Value is one JSON value inside a scanned document: a view of its bytes,
// valid as long as the document's bytes are (it never copies them). The
// value's grammar has been validated, so reading below it (Get, Pick, Iter
// on the Value) only finds the ends of values and never validates the same
// bytes again: a value nested n levels deep is not scanned n times.
type Value struct {
	raw   []byte
	kind  Kind
	flags uint8 // strSlow and strKnown for strings
}

func kindOf(c byte) Kind {
	switch c {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	}
	return Number
}

// Parse validates the whole document and returns its root value.
func Parse(data []byte) (Value, error) {
	i := skipWS(data, 0)
	end, err := skipValue(data, i, 0)
	if err != nil {
		return Value{}, err
	}
	if j := skipWS(data, end); j != len(data) {
		return Value{}, unexpected(data, j, "end of input")
	}
	return newValue(data[i:end]), nil
}

// Valid reports whether data is one well-formed JSON value (as json.Valid).
func Valid(data []byte) bool {
	_, err := Parse(data)
	return err == nil
}

// newValue wraps the validated value raw. A string's flags are computed
// when it is first read: most values found are never read as strings.
func newValue(raw []byte) Value {
	return Value{raw: raw, kind: kindOf(raw[0])}
}

// Get returns the value at path in the JSON document data. Every container
// on the way is validated in full (so a malformed document is an error, not
// a partial answer), and so is the document's end. An empty path is the
// root. A missing key or index is ErrNotFound; stepping into a scalar is
// ErrType.
func Get(data []byte, path string) (Value, error) {
	i := skipWS(data, 0)
	if i >= len(data) {
		return Value{}, unexpected(data, i, "value")
	}
	v, end, err := get(data[i:], path, false)
	if err != nil && err != ErrNotFound && err != ErrType {
		return Value{}, err
	}
	// The document is well formed up to end: its tail decides between the
	// answer and a syntax error.
	if j := skipWS(data, i+end); j != len(data) {
		return Value{}, unexpected(data, j, "end of input")
	}
	return v, err
}

// Get returns the value at path below v (see the package Get). v was
// validated when it was found, so this only skips to the path's value.
func (v Value) Get(path string) (Value, error) {
	if v.kind == 0 {
		return Value{}, ErrNotFound
	}
	r, _, err := get(v.raw, path, true)
	return r, err
}

// skipAny returns the end of the value at d[i]: validated at depth (the
// nesting of d[i]) unless trusted, when d[i:] was validated already.
func skipAny(d []byte, i, depth int, trusted bool) (int, error) {
	if trusted {
		return skipTrusted(d, i), nil
	}
	return skipValue(d, i, depth)
}

// get resolves path inside the value that starts at d[0]; end is where that
// outer value ends in d. Unless trusted, the outer value is validated in
// full (at depth 0); what lies below it is then trusted.
func get(d []byte, path string, trusted bool) (v Value, end int, err error) {
	if path == "" {
		end, err := skipAny(d, 0, 0, trusted)
		if err != nil {
			return Value{}, end, err
		}
		return newValue(d[:end]), end, nil
	}
	key, idx, rest, perr := nextStep(path)
	if perr != nil {
		return Value{}, 0, perr
	}
	var s, e int
	if idx < 0 {
		if d[0] != '{' {
			end, err := skipAny(d, 0, 0, trusted)
			if err != nil {
				return Value{}, end, err
			}
			return Value{}, end, ErrType
		}
		s, e, end, err = findKey(d, key, trusted)
	} else {
		if d[0] != '[' {
			end, err := skipAny(d, 0, 0, trusted)
			if err != nil {
				return Value{}, end, err
			}
			return Value{}, end, ErrType
		}
		s, e, end, err = findIndex(d, idx, trusted)
	}
	if err != nil {
		return Value{}, end, err
	}
	if s < 0 {
		return Value{}, end, ErrNotFound
	}
	if rest == "" { // d[s:e] was validated by the scan above
		return newValue(d[s:e]), end, nil
	}
	v, _, err = get(d[s:e], rest, true)
	return v, end, err
}

// nextStep splits the first step off path: a key (idx = -1) or "[n]".
func nextStep(path string) (key string, idx int, rest string, err error) {
	if path[0] == '[' {
		j := 1
		n := 0
		for j < len(path) && isDigit(path[j]) {
			if n > (1<<31)/10 {
				return "", 0, "", badPath(path)
			}
			n = n*10 + int(path[j]-'0')
			j++
		}
		if j == 1 || j >= len(path) || path[j] != ']' {
			return "", 0, "", badPath(path)
		}
		rest = path[j+1:]
		if rest != "" && rest[0] == '.' {
			rest = rest[1:]
			if rest == "" || rest[0] == '[' || rest[0] == '.' {
				return "", 0, "", badPath(path)
			}
		} else if rest != "" && rest[0] != '[' {
			return "", 0, "", badPath(path)
		}
		return "", n, rest, nil
	}
	j := 0
	for j < len(path) && path[j] != '.' && path[j] != '[' {
		j++
	}
	if j == 0 {
		return "", 0, "", badPath(path)
	}
	key, rest = path[:j], path[j:]
	if rest != "" && rest[0] == '.' {
		rest = rest[1:]
		if rest == "" || rest[0] == '[' || rest[0] == '.' {
			return "", 0, "", badPath(path)
		}
	}
	return key, -1, rest, nil
}

// PathError is a malformed path argument.
type PathError struct{ Path string }

func (e *PathError) Error() string { return "jsonscan: malformed path " + strconv.Quote(e.Path) }

func badPath(p string) error { return &PathError{Path: p} }

// findKey scans the object at d[0] == '{' (validating its members unless
// trusted) and returns the span of the last member named key (s = -1 when
// absent) and the object's end.
func findKey(d []byte, key string, trusted bool) (s, e, end int, err error) {
	s, e = -1, -1
	i := skipWS(d, 1)
	if i < len(d) && d[i] == '}' {
		return s, e, i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return s, e, i, unexpected(d, i, "object key")
		}
		ks := i
		var flags uint8
		if end, f, ok := shortString(d, i); ok {
			i, flags = end, f
		} else if i, flags, err = scanString(d, i); err != nil {
			return s, e, i, err
		}
		match := keyEqual(d[ks+1:i-1], flags|strKnown, key)
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return s, e, i, unexpected(d, i, "':'")
		}
		i = skipWS(d, i+1)
		vs := i
		if i, err = skipAny(d, i, 1, trusted); err != nil {
			return s, e, i, err
		}
		if match {
			s, e = vs, i
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return s, e, i, unexpected(d, i, "',' or '}'")
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return s, e, i + 1, nil
		default:
			return s, e, i, unexpected(d, i, "',' or '}'")
		}
	}
}

// Pick reads several members of the object data in one pass: out[i] is
// set to the value of keys[i], or to the zero Value when the object has no
// such key (the last duplicate wins, as in Get). The whole document is
// validated, as by Get. A document that is not an object is ErrType.
//
// One pass matters in a sandboxed guest, where the cost is per byte
// scanned: an adapter that needs "choices" and "usage" of an event reads
// it once instead of twice.
//
//	var f [2]jsonscan.Value
//	err := jsonscan.Pick(data, f[:], "choices", "usage")
func Pick(data []byte, out []Value, keys ...string) error {
	if len(out) < len(keys) {
		return errShortOut
	}
	clear(out[:len(keys)])
	i := skipWS(data, 0)
	if i >= len(data) {
		return unexpected(data, i, "value")
	}
	d := data[i:]
	var end int
	var err error
	if d[0] != '{' {
		if end, err = skipValue(d, 0, 0); err == nil {
			err = ErrType
		}
	} else {
		end, err = pickKeys(d, out, keys, false)
	}
	if err != nil && err != ErrType {
		return err
	}
	if j := skipWS(data, i+end); j != len(data) {
		clear(out[:len(keys)])
		return unexpected(data, j, "end of input")
	}
	return err
}

// Pick is the package Pick for the members of an object value.
func (v Value) Pick(out []Value, keys ...string) error {
	if len(out) < len(keys) {
		return errShortOut
	}
	clear(out[:len(keys)])
	if v.kind != Object {
		return ErrType
	}
	_, err := pickKeys(v.raw, out, keys, true)
	return err
}

var errShortOut = errors.New("jsonscan: Pick: out is shorter than keys")

// pickKeys scans the object at d[0] == '{' (validating its members unless
// trusted), setting out[k] to the last member named keys[k]; it returns the
// object's end.
func pickKeys(d []byte, out []Value, keys []string, trusted bool) (end int, err error) {
	i := skipWS(d, 1)
	if i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, unexpected(d, i, "object key")
		}
		ks := i
		var flags uint8
		if end, f, ok := shortString(d, i); ok {
			i, flags = end, f
		} else if i, flags, err = scanString(d, i); err != nil {
			return i, err
		}
		key := d[ks+1 : i-1]
		flags |= strKnown
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return i, unexpected(d, i, "':'")
		}
		i = skipWS(d, i+1)
		vs := i
		if i, err = skipAny(d, i, 1, trusted); err != nil {
			return i, err
		}
		for k, want := range keys {
			// A plain key of another length cannot match: decided here,
			// without a call, for most of the len(keys) comparisons.
			if flags&strSlow == 0 && len(want) != len(key) {
				continue
			}
			if keyEqual(key, flags, want) {
				out[k] = newValue(d[vs:i])
			}
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return i, unexpected(d, i, "',' or '}'")
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, unexpected(d, i, "',' or '}'")
		}
	}
}

// findIndex scans the array at d[0] == '[' (validating its elements unless
// trusted) and returns the span of element n (s = -1 when the array is
// shorter) and the array's end.
func findIndex(d []byte, n int, trusted bool) (s, e, end int, err error) {
	s, e = -1, -1
	i := skipWS(d, 1)
	if i < len(d) && d[i] == ']' {
		return s, e, i + 1, nil
	}
	for k := 0; ; k++ {
		vs := i
		if i, err = skipAny(d, i, 1, trusted); err != nil {
			return s, e, i, err
		}
		if k == n {
			s, e = vs, i
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return s, e, i, unexpected(d, i, "',' or ']'")
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case ']':
			return s, e, i + 1, nil
		default:
			return s, e, i, unexpected(d, i, "',' or ']'")
		}
	}
}

// keyEqual compares a raw key (without quotes) with key after unescaping.
func keyEqual(raw []byte, flags uint8, key string) bool {
	if flags&strKnown == 0 {
		flags = strFlags(raw)
	}
	if flags&strSlow == 0 {
		return len(raw) == len(key) && equalBytes(raw, key)
	}
	return unescapedEqual(raw, key)
}

// Kind returns the value's JSON type (0 for the Value returned with an
// error).
func (v Value) Kind() Kind { return v.kind }

// Exists reports whether v is a value (not the zero Value of a failed Get).
func (v Value) Exists() bool { return v.kind != 0 }

// IsNull reports a JSON null.
func (v Value) IsNull() bool { return v.kind == Null }

// Raw returns the value's exact JSON text (a string keeps its quotes and
// escapes). It aliases the document.
func (v Value) Raw() []byte { return v.raw }

// Bool returns a true or false value.
func (v Value) Bool() (bool, error) {
	if v.kind != Bool {
		return false, ErrType
	}
	return v.raw[0] == 't', nil
}

// Int returns an integral number as int64. A number with a fraction or an
// exponent is ErrType and one outside int64 ErrRange, as encoding/json
// decoding into an int64.
func (v Value) Int() (int64, error) {
	if v.kind != Number {
		return 0, ErrType
	}
	b := v.raw
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, ErrType
		}
		if n > (1<<63)/10 {
			return 0, ErrRange
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), nil
	case !neg && n < 1<<63:
		return int64(n), nil
	}
	return 0, ErrRange
}

// Float returns a number as float64; ErrRange when it overflows float64.
func (v Value) Float() (float64, error) {
	if v.kind != Number {
		return 0, ErrType
	}
	// strconv copies the string into its errors, so the unsafe view never
	// outlives the call.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(v.raw), len(v.raw)), 64)
	if err != nil {
		return 0, ErrRange
	}
	return f, nil
}

// String returns a string value unescaped. It allocates the result; use
// AppendString to reuse a buffer.
func (v Value) String() (string, error) {
	if v.kind != String {
		return "", ErrType
	}
	body := v.raw[1 : len(v.raw)-1]
	if v.plain(body) {
		return string(body), nil
	}
	return string(appendUnescaped(make([]byte, 0, len(body)), body)), nil
}

// UnsafeString is String without the copy: when the string holds no
// escapes (and is valid UTF-8) the result aliases the document's bytes,
// which must then stay unchanged for as long as the string is used. It
// suits a document decoded once into values that own it, where one copy
// of the document replaces a copy per string.
func (v Value) UnsafeString() (string, error) {
	if v.kind != String {
		return "", ErrType
	}
	body := v.raw[1 : len(v.raw)-1]
	if len(body) == 0 {
		return "", nil
	}
	if v.plain(body) {
		return unsafe.String(&body[0], len(body)), nil
	}
	return string(appendUnescaped(make([]byte, 0, len(body)), body)), nil
}

// AppendString appends a string value, unescaped, to dst.
func (v Value) AppendString(dst []byte) ([]byte, error) {
	if v.kind != String {
		return dst, ErrType
	}
	body := v.raw[1 : len(v.raw)-1]
	if v.plain(body) {
		return append(dst, body...), nil
	}
	return appendUnescaped(dst, body), nil
}

// plain reports whether the string body decodes to its own bytes: no
// escapes, and valid UTF-8 (invalid bytes decode to U+FFFD).
func (v Value) plain(body []byte) bool {
	flags := v.flags
	if flags&strKnown == 0 {
		flags = strFlags(body)
	}
	return flags&strSlow == 0 || bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)
}

// strFlags computes a string body's flags in one pass of eight-byte words.
func strFlags(body []byte) uint8 {
	var m uint64
	for len(body) >= 8 {
		v := binary.LittleEndian.Uint64(body)
		b := v ^ ('\\' * ones)
		m |= v | (b-ones)&^b
		body = body[8:]
	}
	v := loadShort(body) // zero padding is neither '\\' nor >= 0x80
	b := v ^ ('\\' * ones)
	if (m|v|(b-ones)&^b)&high != 0 {
		return strKnown | strSlow
	}
	return strKnown
}

// loadShort packs a slice of fewer than eight bytes into a word without a
// loop: for a given length, the first and last four (or two) bytes, which
// may overlap, determine the bytes.
func loadShort(p []byte) uint64 {
	switch n := len(p); {
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(p)) | uint64(binary.LittleEndian.Uint32(p[n-4:]))<<32
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(p)) | uint64(binary.LittleEndian.Uint16(p[n-2:]))<<16
	case n == 1:
		return uint64(p[0])
	}
	return 0
}

// equalBytes reports whether a and b hold the same bytes, comparing
// eight-byte words (the runtime's comparison loops byte by byte in wasm).
func equalBytes(a []byte, b string) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	pb := unsafe.Slice(unsafe.StringData(b), n)
	if n < 8 {
		return loadShort(a) == loadShort(pb)
	}
	for i := 0; i+8 < n; i += 8 {
		if binary.LittleEndian.Uint64(a[i:]) != binary.LittleEndian.Uint64(pb[i:]) {
			return false
		}
	}
	return binary.LittleEndian.Uint64(a[n-8:]) == binary.LittleEndian.Uint64(pb[n-8:])
}

// Equal reports whether v is a string whose unescaped text is s. It does not
// allocate, so it suits dispatch on an event's "type".
func (v Value) Equal(s string) bool {
	if v.kind != String {
		return false
	}
	return keyEqual(v.raw[1:len(v.raw)-1], v.flags, s)
}

// appendUnescaped decodes the body of a validated string literal the way
// encoding/json (v1) does: escapes resolved, surrogate pairs combined, lone
// surrogates and invalid UTF-8 bytes replaced by U+FFFD.
//
// Runs between escapes are copied whole when they are valid UTF-8 (found
// with assembly-backed bytes.IndexByte and utf8.Valid): a per-character
// loop is what costs in a sandboxed guest.
func appendUnescaped(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		run := s
		if k >= 0 {
			run = s[:k]
		}
		if utf8.Valid(run) {
			dst = append(dst, run...)
		} else {
			for i := 0; i < len(run); {
				r, n := utf8.DecodeRune(run[i:]) // RuneError, 1 for invalid bytes
				dst = utf8.AppendRune(dst, r)
				i += n
			}
		}
		if k < 0 {
			break
		}
		r, n := nextRune(s, k)
		dst = utf8.AppendRune(dst, r)
		s = s[k+n:]
	}
	return dst
}

// unescapedEqual compares the decoded body of a string literal with want
// without allocating.
func unescapedEqual(s []byte, want string) bool {
	var buf [utf8.UTFMax]byte
	j := 0
	for i := 0; i < len(s); {
		r, n := nextRune(s, i)
		i += n
		if r < utf8.RuneSelf {
			if j >= len(want) || want[j] != byte(r) {
				return false
			}
			j++
			continue
		}
		m := utf8.EncodeRune(buf[:], r)
		if j+m > len(want) || string(buf[:m]) != want[j:j+m] {
			return false
		}
		j += m
	}
	return j == len(want)
}

// nextRune decodes one character of a validated string body at s[i] and
// returns it with the number of bytes consumed.
func nextRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c != '\\' {
		if c < utf8.RuneSelf {
			return rune(c), 1
		}
		return utf8.DecodeRune(s[i:]) // RuneError, 1 for invalid bytes
	}
	switch s[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s[i+2 : i+6])
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		// A surrogate: combine with a following \u low surrogate, else
		// U+FFFD for this escape alone (encoding/json's rule).
		if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' && isHex4(s[i+8:i+12]) {
			if dec := utf16.DecodeRune(r, hex4(s[i+8:i+12])); dec != utf8.RuneError {
				return dec, 12
			}
		}
		return utf8.RuneError, 6
	}
	return rune(s[i+1]), 2 // '"', '\\', '/'
}

func isHex4(b []byte) bool {
	return isHex(b[0]) && isHex(b[1]) && isHex(b[2]) && isHex(b[3])
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Iter walks the members of an object or the elements of an array:
//
//	it := v.Iter()
//	for it.Next() {
//		key, val := it.Key(), it.Value() // Key is a String for objects
//	}
//	if err := it.Err(); err != nil { ... }
type Iter struct {
	d   []byte
	i   int
	n   int
	obj bool
	key Value
	val Value
	err error
}

// Iter returns an iterator over an object or array; for other kinds the
// iterator yields nothing and Err reports ErrType.
func (v Value) Iter() Iter {
	switch v.kind {
	case Object, Array:
		return Iter{d: v.raw, i: skipWS(v.raw, 1), n: -1, obj: v.kind == Object}
	}
	return Iter{err: ErrType}
}

// Next advances to the next member or element.
func (it *Iter) Next() bool {
	if it.err != nil || it.d == nil || it.i >= len(it.d) {
		return false
	}
	d, i := it.d, it.i
	if it.n >= 0 { // after an element: ',' or the end
		i = skipWS(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipWS(d, i+1)
		} else {
			it.i = len(d)
			return false
		}
	} else if d[i] == '}' || d[i] == ']' {
		it.i = len(d)
		return false
	}
	// The container was validated when its Value was found: keys and
	// values are only skipped (a key's flags are computed if it is read).
	if it.obj {
		if d[i] != '"' {
			it.err = unexpected(d, i, "object key")
			return false
		}
		end := skipStringTrusted(d, i)
		// Flags now, once, rather than at every Equal on the key.
		it.key = Value{raw: d[i:end], kind: String, flags: strFlags(d[i+1 : max(end-1, i+1)])}
		i = skipWS(d, end)
		if i >= len(d) || d[i] != ':' {
			it.err = unexpected(d, i, "':'")
			return false
		}
		i = skipWS(d, i+1)
	}
	end := skipTrusted(d, i)
	if end <= i {
		it.err = unexpected(d, i, "value")
		return false
	}
	it.val = newValue(d[i:end])
	it.i = end
	it.n++
	return true
}

// Key returns the current member's key (a String value; zero for arrays).
func (it *Iter) Key() Value { return it.key }

// Value returns the current member or element.
func (it *Iter) Value() Value { return it.val }

// Index returns the current position, counting from 0.
func (it *Iter) Index() int { return it.n }

// Err returns the error that stopped the iteration, if any.
func (it *Iter) Err() error { return it.err }

// GetString returns the string at path in data, unescaped.
func GetString(data []byte, path string) (string, error) {
	v, err := Get(data, path)
	if err != nil {
		return "", err
	}
	return v.String()
}

// GetInt returns the integer at path in data.
func GetInt(data []byte, path string) (int64, error) {
	v, err := Get(data, path)
	if err != nil {
		return 0, err
	}
	return v.Int()
}

// GetFloat returns the number at path in data.
func GetFloat(data []byte, path string) (float64, error) {
	v, err := Get(data, path)
	if err != nil {
		return 0, err
	}
	return v.Float()
}

// GetBool returns the boolean at path in data.
func GetBool(data []byte, path string) (bool, error) {
	v, err := Get(data, path)
	if err != nil {
		return false, err
	}
	return v.Bool()
}
