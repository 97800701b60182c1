package wasm

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Credentials never come back (RATIONALE.md): the host masks every
// occurrence of a secret it injected into a request in that request's
// response headers and body before the guest can read them, and refuses a
// result or event that carries one.

// redactMask replaces every byte of an occurrence of a secret. Masking
// byte for byte keeps lengths: a masked body still matches its
// Content-Length, masked JSON is still JSON (a form is masked inside its
// string, and '*' needs no escape), a masked header name is still a token,
// and the reader masks in place without copying the stream. It shows the
// secret's length, which a key's format tells anyway.
const redactMask = '*'

// minEncodedSecret is the shortest secret whose base64 forms are looked
// for: a form is then at least 16 characters, which ordinary base64 text
// (a JWT, an image) does not contain by chance.
const minEncodedSecret = 16

// redactor holds the forms of the secrets injected into one request that
// the host looks for. It is immutable once built and shared by every
// request of a binding that injects the same values.
type redactor struct {
	secrets []string // the injected values: the cache key
	// forms are every form masked in responses: each value raw, as a
	// JSON encoder may escape it, and in base64 (see newRedactor).
	forms [][]byte
	strs  []string // forms as strings, for headers
	// values are the raw and JSON-escaped forms, what a result or event
	// must not carry (cs.leaks).
	values [][]byte
	maxLen int       // longest form
	first  [256]bool // the first bytes of the forms

	// The sampled search (find): step is the sampling distance, grams
	// the gramLen-byte substrings of every form by value, filter a bit
	// set of their hashes. step is 0 when a form is shorter than gramLen.
	step   int
	grams  map[uint32][]gramAt
	filter [filterBits / 64]uint64
}

// gramAt is where a gram occurs in a form.
type gramAt struct {
	form int32
	off  int32
}

const (
	gramLen    = 4
	filterBits = 1 << 14
)

func gramHash(g uint32) uint32 { return (g * 0x9e3779b1) >> (32 - 14) }

// newRedactor returns the redactor of the values injected into a request,
// or nil when there are none. For each value it looks for:
//
//   - the value itself, which also covers the header value as sent
//     (a prefix such as "Bearer " is not secret);
//   - the value as JSON encoders may escape it, when that differs
//     (jsonForms);
//   - for values of at least minEncodedSecret bytes, the base64 (standard
//     and URL alphabets) of the value wherever it starts in the encoded
//     text: three forms per alphabet, one per alignment, each the encoding
//     of the value's whole 3-byte groups at that alignment. A masked
//     base64 echo keeps at most two bytes of the value at each end.
//
// Not covered: other encodings (percent-encoding of a value that needs
// it, hex, a JSON string encoded twice, compression), and a response
// carrying only part of a value (a truncated or ranged echo).
func newRedactor(secrets []string) *redactor {
	r := &redactor{secrets: slices.Clone(secrets)}
	add := func(form string, value bool) {
		if form == "" {
			return
		}
		for _, f := range r.forms {
			if string(f) == form {
				return
			}
		}
		b := []byte(form)
		r.forms = append(r.forms, b)
		r.strs = append(r.strs, form)
		if value {
			r.values = append(r.values, b)
		}
		r.maxLen = max(r.maxLen, len(b))
		r.first[b[0]] = true
	}
	for _, s := range secrets {
		add(s, true)
		for _, f := range jsonForms(s) {
			add(f, true)
		}
		if len(s) >= minEncodedSecret {
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				for a := range 3 {
					v := s[a:]
					add(enc.EncodeToString([]byte(v[:len(v)/3*3])), false)
				}
			}
		}
	}
	if len(r.forms) == 0 {
		return nil
	}
	minLen := r.maxLen
	for _, f := range r.forms {
		minLen = min(minLen, len(f))
	}
	if minLen >= gramLen {
		r.step = minLen - gramLen + 1
		r.grams = map[uint32][]gramAt{}
		for fi, f := range r.forms {
			for off := 0; off+gramLen <= len(f); off++ {
				g := binary.LittleEndian.Uint32(f[off:])
				r.grams[g] = append(r.grams[g], gramAt{int32(fi), int32(off)})
				h := gramHash(g)
				r.filter[h/64] |= 1 << (h % 64)
			}
		}
	}
	return r
}

// jsonForms returns s escaped inside a JSON string in every combination
// of the choices encoders make: HTML characters as \u escapes (Go's
// encoding/json) or not, '/' as \/ (PHP's json_encode) or not, characters
// beyond ASCII as \u escapes (PHP, Python's json.dumps) or not, and
// upper- or lower-case hex. A value without such characters has one form,
// itself with \" and \\ escaped.
func jsonForms(s string) []string {
	var forms []string
	for c := range 16 {
		forms = append(forms, jsonEscape(s, c&1 != 0, c&2 != 0, c&4 != 0, c&8 != 0))
	}
	return forms
}

func jsonEscape(s string, html, slash, ascii, upper bool) string {
	var b []byte
	u := func(r rune) {
		b = append(b, `\u`...)
		h := strconv.FormatInt(int64(r), 16)
		if upper {
			h = strings.ToUpper(h)
		}
		for range 4 - len(h) {
			b = append(b, '0')
		}
		b = append(b, h...)
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20:
			u(r)
		case r == '/' && slash:
			b = append(b, `\/`...)
		case (r == '<' || r == '>' || r == '&') && html:
			u(r)
		case (r == '\u2028' || r == '\u2029') && html:
			u(r)
		case r >= utf8.RuneSelf && ascii:
			if r > 0xffff {
				r -= 0x10000
				u(0xd800 + r>>10)
				u(0xdc00 + r&0x3ff)
			} else {
				u(r)
			}
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return string(b)
}

// span is one occurrence of a form, [start, end).
type span struct{ start, end int }

// find appends every occurrence of every form in data, overlapping ones
// included, to spans (an occurrence may be appended more than once).
//
// It samples: every occurrence of a form covers a gram (gramLen bytes)
// that starts at a multiple of step, the shortest form's length less
// gramLen-1, so only those grams are looked up — in a bit set first, then
// in the table of where each gram occurs in the forms — and the forms
// they may belong to compared. A stream is scanned at a few bytes per
// step whatever the number of forms (a key of 40 bytes has 13: itself
// and base64 at three alignments in two alphabets), where a search for
// each form would read every byte once per form.
func (r *redactor) find(data []byte, spans []span) []span {
	if r.step == 0 {
		return r.findEach(data, spans)
	}
	for p := 0; p+gramLen <= len(data); p += r.step {
		g := binary.LittleEndian.Uint32(data[p:])
		if h := gramHash(g); r.filter[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, at := range r.grams[g] {
			f := r.forms[at.form]
			i := p - int(at.off)
			if i >= 0 && i+len(f) <= len(data) && bytes.Equal(data[i:i+len(f)], f) {
				spans = append(spans, span{i, i + len(f)})
			}
		}
	}
	return spans
}

// findEach is find for forms shorter than a gram: one search per form.
func (r *redactor) findEach(data []byte, spans []span) []span {
	for _, f := range r.forms {
		for pos := 0; ; {
			i := bytes.Index(data[pos:], f)
			if i < 0 {
				break
			}
			spans = append(spans, span{pos + i, pos + i + len(f)})
			pos += i + 1
		}
	}
	return spans
}

// mask masks data[:carried] and every span that starts before hold, up to
// hold, and returns how many bytes from hold on still need masking.
// Every occurrence is masked whole, so overlapping occurrences leave
// nothing of either visible.
func mask(data []byte, spans []span, hold, carried int) (later int) {
	fill := func(s, e int) {
		if e > hold {
			later = max(later, e-hold)
			e = hold
		}
		for i := s; i < e; i++ {
			data[i] = redactMask
		}
	}
	fill(0, carried)
	for _, sp := range spans {
		if sp.start < hold {
			fill(sp.start, sp.end)
		}
	}
	return later
}

// holdFrom returns where the longest suffix of data that is a proper
// prefix of a form starts (len(data) when there is none): those bytes may
// be the start of an occurrence the next read completes. Only a suffix
// that can start a form is held, not a fixed tail of maxLen-1 bytes, so a
// stream whose last bytes cannot start a secret (an SSE event's blank
// line) is never held back.
func (r *redactor) holdFrom(data []byte) int {
	for j := max(0, len(data)-r.maxLen+1); j < len(data); j++ {
		if !r.first[data[j]] {
			continue
		}
		rest := data[j:]
		for _, f := range r.forms {
			if f[0] == rest[0] && len(f) > len(rest) && bytes.Equal(f[:len(rest)], rest) {
				return j
			}
		}
	}
	return len(data)
}

// scrubString returns s with every occurrence of a form masked; s itself
// (and no allocation) when there is none.
func (r *redactor) scrubString(s string) string {
	var arr [4]span
	spans := arr[:0]
	for _, f := range r.strs {
		for pos := 0; ; {
			i := strings.Index(s[pos:], f)
			if i < 0 {
				break
			}
			spans = append(spans, span{pos + i, pos + i + len(f)})
			pos += i + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	b := []byte(s)
	mask(b, spans, len(b), 0)
	return string(b)
}

// scrubHeader masks the forms in the names and values of h, in place.
// http_head hands over every header, so any of them may echo the request.
// Names are matched without regard to ASCII case: the client canonicalises
// a name's case and http_head lower-cases it, so an echoed value arrives
// case-folded.
func (r *redactor) scrubHeader(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = r.scrubString(v)
		}
		if nk := r.scrubName(k); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// scrubName returns k with every case-insensitive occurrence of a form
// masked; k itself when there is none.
func (r *redactor) scrubName(k string) string {
	var b []byte
	for _, f := range r.strs {
		for i := 0; i+len(f) <= len(k); i++ {
			if strings.EqualFold(k[i:i+len(f)], f) {
				if b == nil {
					b = []byte(k)
				}
				for j := i; j < i+len(f); j++ {
					b[j] = redactMask
				}
			}
		}
	}
	if b == nil {
		return k
	}
	return string(b)
}

// redactorFor returns the redactor of the values injected into one
// request. A binding injects the same values request after request, so
// the last redactor is kept and reused while they do not change; building
// one costs a few allocations.
func (np *netPolicy) redactorFor(secrets []string) *redactor {
	if len(secrets) == 0 {
		return nil
	}
	if r := np.red.Load(); r != nil && slices.Equal(r.secrets, secrets) {
		return r
	}
	r := newRedactor(secrets)
	np.red.Store(r)
	return r
}

// scrubReader masks the forms of a redactor in the stream it reads. It
// masks in place in the caller's buffer; a suffix that may start an
// occurrence is held back until more data or the end of the stream
// (holdFrom), so an occurrence split across reads is masked too. At the
// end of the stream the held bytes are released as they are: they are not
// a whole occurrence.
type scrubReader struct {
	src   io.Reader
	red   *redactor
	tail  []byte // raw bytes held back
	later int    // bytes of tail an occurrence found earlier covers
	ready []byte // masked bytes not yet delivered (reads shorter than tail)
	small []byte // ready's storage
	spans []span
	err   error // sticky error of src
}

// reset readies s for another stream, keeping its buffers (those of a
// pooled handle) unless a response full of occurrences grew them.
func (s *scrubReader) reset(src io.Reader, red *redactor) {
	spans := s.spans[:0]
	if cap(spans) > 256 {
		spans = nil
	}
	*s = scrubReader{src: src, red: red, tail: s.tail[:0], small: s.small, spans: spans}
}

func (s *scrubReader) Read(p []byte) (int, error) {
	if len(s.ready) > 0 {
		n := copy(p, s.ready)
		s.ready = s.ready[n:]
		return n, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	for range 100 {
		if s.err != nil {
			return 0, s.err
		}
		w := p
		if len(p) <= len(s.tail) {
			// Too short to take the tail and new bytes: go through
			// small, which can (the tail is below maxLen).
			if len(s.small) < 2*s.red.maxLen {
				s.small = make([]byte, 2*s.red.maxLen)
			}
			w = s.small
		}
		t := copy(w, s.tail)
		n, err := s.src.Read(w[t:])
		if n < 0 || n > len(w)-t {
			return 0, errBadRead
		}
		data := w[:t+n]
		hold := len(data)
		if err == nil {
			hold = s.red.holdFrom(data)
		}
		s.spans = s.red.find(data, s.spans[:0])
		// The held bytes stay raw: the next read looks for occurrences
		// that start in them.
		s.later = mask(data, s.spans, hold, s.later)
		s.tail = append(s.tail[:0], data[hold:]...)
		s.err = err
		if hold == 0 {
			continue
		}
		if len(w) == len(p) && &w[0] == &p[0] {
			return hold, err
		}
		c := copy(p, data[:hold])
		s.ready = data[c:hold]
		if len(s.ready) > 0 {
			return c, nil
		}
		return c, err
	}
	return 0, io.ErrNoProgress
}

var errBadRead = errors.New("scrub: invalid Read count")

// secretSet is the set of redactors of the requests of one call: the
// values a result or event of the call must not carry. A call usually
// injects one set of values, so the first is held without a slice.
type secretSet struct {
	one  *redactor
	more []*redactor
}

func (ss *secretSet) add(r *redactor) {
	switch {
	case r == nil || r == ss.one:
	case ss.one == nil:
		ss.one = r
	case !slices.Contains(ss.more, r):
		ss.more = append(ss.more, r)
	}
}

// leaks reports whether b carries a secret injected during the call, raw
// or JSON-escaped. It costs a nil check when the call injected none. Base64
// forms are not checked: a guest that encodes on purpose could choose any
// encoding, and guest output never saw an unmasked response (the check is
// defence in depth).
func (cs *callState) leaks(b []byte) bool {
	if cs.secrets.one == nil {
		return false
	}
	if cs.secrets.one.carried(b) {
		return true
	}
	for _, r := range cs.secrets.more {
		if r.carried(b) {
			return true
		}
	}
	return false
}

func (r *redactor) carried(b []byte) bool {
	for _, v := range r.values {
		if bytes.Contains(b, v) {
			return true
		}
	}
	return false
}

// leaked reports whether b carries a secret injected during the call and,
// when it does, records the contract violation (INVALID_PROVIDER_RESULT);
// the caller then drops b. The violation's text names no value.
func (cs *callState) leaked(b []byte) bool {
	if !cs.leaks(b) {
		return false
	}
	cs.output = cs.output[:0]
	cs.violate("a result or event carries a credential the host injected")
	return true
}
