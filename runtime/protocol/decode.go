package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of the run request schema (wire-core §3.1, §8.1). String lengths
// are in UTF-16 code units (JavaScript string length), see UTF16Len.
const (
	MaxInputUnits        = 100_000 // input (min 1), instructions, history content
	MaxHistoryItems      = 100
	MaxTools             = 32
	MaxRequiredCaps      = 32
	MaxSteps             = 64
	DefaultMaxSteps      = 8
	MaxOutputTokens      = 65_536
	DefaultOutputTokens  = 4_096
	MaxIdleTimeoutMs     = 2_147_483_647
	MaxMetadataEntries   = 32
	MaxMetadataKeyUnits  = 80
	MaxMetadataValUnits  = 500
	MaxRetryAttempts     = 5
	MaxRetryDelayMs      = 60_000
	DefaultRetryBaseMs   = 500
	DefaultRetryMaxDelay = 30_000
)

// DecodeOptions selects which extension fields of the run request the host
// accepts. Each flag belongs to one feature (wire-core §2.3): until the host
// implements the feature, its field is an unknown property and the request
// fails with INVALID_REQUEST, exactly as an upstream revision without the
// field answers. With a flag set, the field's value is type-checked
// (non-null, array or object as the spec says) and kept raw in the
// RunRequest for the feature's own validator; its deep validation is not the
// decoder's job.
//
// The zero value is the core-only host.
type DecodeOptions struct {
	Attachments      bool // context-inputs: array
	OutputArtifact   bool // draft-artifacts: object
	Retrieval        bool // scoped-retrieval: object
	Session          bool // conversation-sessions: object
	Approvals        bool // interactive-approvals: object
	ApplicationTools bool // application-tools: array
}

// DecodeRunRequest decodes a POST /v1/runs body with the strict rules of
// wire-core §3.1/§3.2 for a core-only host (no extension fields). It is
// DecodeOptions{}.Decode(body).
//
// It is a single-pass scanner over the body rather than encoding/json, so
// that every rule of §3.2 is explicit (encoding/json matches names
// case-insensitively, accepts null for anything, and substitutes invalid
// UTF-8) and a typical request decodes without reflection. The JSON grammar
// is RFC 8259's, which is also JSON.parse's.
//
// Every failure — invalid UTF-8, malformed JSON, a non-object body, unknown
// or mis-cased field, null, wrong type, non-integral or out-of-range number,
// a string too long in UTF-16 units, a pattern mismatch, a duplicate in
// requiredCapabilities — is a *Error with code INVALID_REQUEST and its fixed
// message. The private cause names the field (never a value).
//
// Duplicate keys: the last occurrence wins at every level, as with
// JSON.parse, so an invalid first value followed by a valid one passes.
// Duplicate names in tools are not a schema failure (semantic check #14, see
// DuplicateTools).
func DecodeRunRequest(body []byte) (*RunRequest, error) {
	return DecodeOptions{}.Decode(body)
}

// Decode decodes a run request body; see DecodeRunRequest.
func (o DecodeOptions) Decode(body []byte) (*RunRequest, error) {
	// Fatal UTF-8 decoding (wire-core §1.2 step 11). Checking once up front
	// lets the scanner copy non-ASCII bytes without re-validating them.
	if !utf8.Valid(body) {
		return nil, invalidRequest("body is not valid UTF-8")
	}
	d := runDecoder{s: scanner{b: body}, opts: o}
	return d.decode()
}

// invalidRequest is the one schema-failure error; why is a private,
// value-free description for logs.
func invalidRequest(why string) *Error {
	return Wrap(CodeInvalidRequest, errors.New("run request: "+why))
}

// Top-level fields. The index doubles as a bit in the decoder's sets.
type field uint8

const (
	fProvider field = iota
	fModel
	fInput
	fInstructions
	fHistory
	fTools
	fRequiredCapabilities
	fMaxSteps
	fMaxOutputTokens
	fIdleTimeoutMs
	fOutputSchema
	fMetadata
	fIdempotencyKey
	fRetry
	fAttachments
	fOutputArtifact
	fRetrieval
	fSession
	fApprovals
	fApplicationTools
	numFields
	fUnknown = numFields
)

var fieldNames = [numFields]string{
	"provider", "model", "input", "instructions", "history", "tools",
	"requiredCapabilities", "maxSteps", "maxOutputTokens", "idleTimeoutMs",
	"outputSchema", "metadata", "idempotencyKey", "retry", "attachments",
	"outputArtifact", "retrieval", "session", "approvals", "applicationTools",
}

func (f field) String() string { return fieldNames[f] }

// lookupField matches a property name exactly (case-sensitive). The switch
// on string(name) does not allocate.
func lookupField(name []byte) field {
	switch string(name) {
	case "provider":
		return fProvider
	case "model":
		return fModel
	case "input":
		return fInput
	case "instructions":
		return fInstructions
	case "history":
		return fHistory
	case "tools":
		return fTools
	case "requiredCapabilities":
		return fRequiredCapabilities
	case "maxSteps":
		return fMaxSteps
	case "maxOutputTokens":
		return fMaxOutputTokens
	case "idleTimeoutMs":
		return fIdleTimeoutMs
	case "outputSchema":
		return fOutputSchema
	case "metadata":
		return fMetadata
	case "idempotencyKey":
		return fIdempotencyKey
	case "retry":
		return fRetry
	case "attachments":
		return fAttachments
	case "outputArtifact":
		return fOutputArtifact
	case "retrieval":
		return fRetrieval
	case "session":
		return fSession
	case "approvals":
		return fApprovals
	case "applicationTools":
		return fApplicationTools
	}
	return fUnknown
}

// enabled reports whether field f is accepted under o: core fields always,
// extension fields only with their feature flag.
func (o DecodeOptions) enabled(f field) bool {
	switch f {
	case fUnknown:
		return false
	case fAttachments:
		return o.Attachments
	case fOutputArtifact:
		return o.OutputArtifact
	case fRetrieval:
		return o.Retrieval
	case fSession:
		return o.Session
	case fApprovals:
		return o.Approvals
	case fApplicationTools:
		return o.ApplicationTools
	}
	return true
}

// runDecoder applies the run request schema while scanning.
//
// Duplicate keys make single-pass validation subtle: with last-wins, an
// invalid value is harmless if the same key repeats later with a valid one.
// So a value that fails its rule is consumed and recorded as bad for its
// key; a later occurrence of the key clears or sets that mark; the verdict
// comes at the end of the object. Only a syntax error, or an unknown
// top-level key (which no later key can remove), ends decoding early.
type runDecoder struct {
	s    scanner
	opts DecodeOptions
}

func (d *runDecoder) decode() (*RunRequest, error) {
	s := &d.s
	if c := s.next(); c != '{' {
		if c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' || isDigit(c) {
			return nil, invalidRequest("body is not a JSON object")
		}
		return nil, invalidRequest("malformed JSON")
	}
	s.i++
	s.depth++
	var (
		req       RunRequest
		seen, bad uint32 // a bit per field: present / last value invalid
	)
	more, err := s.firstMember('}')
	for ; err == nil && more; more, err = s.nextMember('}') {
		name, err := s.key()
		if err != nil {
			return nil, invalidRequest("malformed JSON")
		}
		f := lookupField(name)
		if !d.opts.enabled(f) {
			return nil, invalidRequest("unknown field")
		}
		ok, err := d.field(&req, f)
		if err != nil {
			return nil, invalidRequest("malformed JSON")
		}
		bit := uint32(1) << f
		seen |= bit
		if ok {
			bad &^= bit
		} else {
			bad |= bit
		}
	}
	if err != nil || !s.end() {
		return nil, invalidRequest("malformed JSON")
	}
	if bad != 0 {
		for f := field(0); f < numFields; f++ {
			if bad&(1<<f) != 0 {
				return nil, invalidRequest("invalid " + f.String())
			}
		}
	}
	for _, f := range [...]field{fProvider, fModel, fInput} {
		if seen&(1<<f) == 0 {
			return nil, invalidRequest("missing " + f.String())
		}
	}
	return &req, nil
}

// field decodes the value of top-level field f into req. ok is false when
// the value was well-formed JSON but broke a rule; err is a syntax error.
// A repeated key replaces the earlier value entirely.
func (d *runDecoder) field(req *RunRequest, f field) (ok bool, err error) {
	switch f {
	case fProvider:
		req.Provider, ok, err = d.pattern(IsInstanceID)
	case fModel:
		req.Model, ok, err = d.pattern(IsModelID)
	case fInput:
		req.Input, ok, err = d.stringLen(1, MaxInputUnits)
	case fInstructions:
		var s string
		s, ok, err = d.stringLen(0, MaxInputUnits)
		req.Instructions = &s
	case fHistory:
		req.History, ok, err = d.history()
	case fTools:
		// Duplicates are semantic check #14, not a schema failure.
		req.Tools, ok, err = d.stringArray(MaxTools, IsToolName, false)
	case fRequiredCapabilities:
		req.RequiredCapabilities, ok, err = d.stringArray(MaxRequiredCaps, IsCapabilityName, true)
	case fMaxSteps:
		var n int64
		n, ok, err = d.integer(1, MaxSteps)
		v := int(n)
		req.MaxSteps = &v
	case fMaxOutputTokens:
		var n int64
		n, ok, err = d.integer(1, MaxOutputTokens)
		v := int(n)
		req.MaxOutputTokens = &v
	case fIdleTimeoutMs:
		var n int64
		n, ok, err = d.integer(0, MaxIdleTimeoutMs)
		req.IdleTimeoutMs = &n
	case fOutputSchema:
		req.OutputSchema, ok, err = d.raw('{')
	case fMetadata:
		req.Metadata, ok, err = d.metadata()
	case fIdempotencyKey:
		var s string
		s, ok, err = d.pattern(IsIdempotencyKey)
		req.IdempotencyKey = &s
	case fRetry:
		req.Retry, ok, err = d.retry()
	case fAttachments:
		req.Attachments, ok, err = d.raw('[')
	case fOutputArtifact:
		req.OutputArtifact, ok, err = d.raw('{')
	case fRetrieval:
		req.Retrieval, ok, err = d.raw('{')
	case fSession:
		req.Session, ok, err = d.raw('{')
	case fApprovals:
		req.Approvals, ok, err = d.raw('{')
	case fApplicationTools:
		req.ApplicationTools, ok, err = d.raw('[')
	}
	return ok, err
}

// str reads a string value; any other value is consumed and reported !ok.
func (d *runDecoder) str() (string, bool, error) {
	if d.s.next() != '"' {
		return "", false, d.s.skip()
	}
	s, err := d.s.str()
	return s, err == nil, err
}

func (d *runDecoder) pattern(match func(string) bool) (string, bool, error) {
	s, ok, err := d.str()
	return s, ok && match(s), err
}

func (d *runDecoder) stringLen(minUnits, maxUnits int) (string, bool, error) {
	s, ok, err := d.str()
	if !ok {
		return s, false, err
	}
	n := UTF16Len(s)
	return s, n >= minUnits && n <= maxUnits, nil
}

// integer reads a JSON number that, read as an IEEE double the way
// upstream's JSON.parse does, is integral and within [lo, hi]. So 8, 8.0,
// 8e0 and 80e-1 are 8; 8.5, 1e400 and anything non-numeric are invalid.
func (d *runDecoder) integer(lo, hi int64) (int64, bool, error) {
	c := d.s.next()
	if c != '-' && !isDigit(c) {
		return 0, false, d.s.skip()
	}
	lit, err := d.s.number()
	if err != nil {
		return 0, false, err
	}
	n, ok := integral(lit, lo, hi)
	return n, ok, nil
}

// integral parses a JSON number literal as a double and checks it is an
// integer in [lo, hi]. Underflow yields ±0, overflow ±Inf (rejected).
func integral(lit []byte, lo, hi int64) (int64, bool) {
	if len(lit) <= 10 && lit[0] != '-' { // fast path: plain small integers
		n := int64(0)
		plain := true
		for _, c := range lit {
			if !isDigit(c) {
				plain = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if plain {
			return n, n >= lo && n <= hi
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return 0, false
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	return int64(f), true
}

// stringArray reads an array of at most maxItems strings each accepted by
// match; unique rejects repeated entries (JSON Schema uniqueItems). An
// empty array decodes to an empty, non-nil slice.
func (d *runDecoder) stringArray(maxItems int, match func(string) bool, unique bool) ([]string, bool, error) {
	s := &d.s
	if s.next() != '[' {
		return nil, false, s.skip()
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	out := []string{}
	ok := true
	more, err := s.firstMember(']')
	for ; err == nil && more; more, err = s.nextMember(']') {
		v, isStr, err := d.str()
		if err != nil {
			return nil, false, err
		}
		switch {
		case !isStr || !match(v) || len(out) >= maxItems:
			ok = false
		case unique && contains(out, v):
			ok = false
		default:
			out = append(out, v)
		}
	}
	return out, ok, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// raw captures one JSON value that must be an object ('{') or an array
// ('['), compacted.
func (d *runDecoder) raw(kind byte) (json.RawMessage, bool, error) {
	s := &d.s
	c := s.next()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, false, err
	}
	if c != kind {
		return nil, false, nil
	}
	var buf bytes.Buffer
	buf.Grow(s.i - start)
	if err := json.Compact(&buf, s.b[start:s.i]); err != nil {
		return nil, false, err // unreachable: skip validated it
	}
	return buf.Bytes(), true, nil
}

// history reads the strict history array: ≤ 100 items of
// {role: "user"|"assistant", content: string ≤ 100,000 units}, both required.
func (d *runDecoder) history() ([]HistoryItem, bool, error) {
	s := &d.s
	if s.next() != '[' {
		return nil, false, s.skip()
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	out := []HistoryItem{}
	ok := true
	more, err := s.firstMember(']')
	for ; err == nil && more; more, err = s.nextMember(']') {
		item, itemOK, err := d.historyItem()
		if err != nil {
			return nil, false, err
		}
		if !itemOK || len(out) >= MaxHistoryItems {
			ok = false
			continue
		}
		out = append(out, item)
	}
	return out, ok, err
}

func (d *runDecoder) historyItem() (HistoryItem, bool, error) {
	s := &d.s
	if s.next() != '{' {
		return HistoryItem{}, false, s.skip()
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	var (
		item                  HistoryItem
		haveRole, haveContent bool
		roleOK, contentOK     bool
		strict                = true
	)
	more, err := s.firstMember('}')
	for ; err == nil && more; more, err = s.nextMember('}') {
		name, err := s.key()
		if err != nil {
			return item, false, err
		}
		switch string(name) {
		case "role":
			haveRole = true
			item.Role, roleOK, err = d.str()
			roleOK = roleOK && (item.Role == "user" || item.Role == "assistant")
		case "content":
			haveContent = true
			item.Content, contentOK, err = d.stringLen(0, MaxInputUnits)
		default:
			strict = false
			err = s.skip()
		}
		if err != nil {
			return item, false, err
		}
	}
	return item, strict && haveRole && haveContent && roleOK && contentOK, err
}

// metadata reads ≤ 32 entries with keys ≤ 80 and string values ≤ 500 units.
// Empty keys are allowed (the schema bounds only the length).
func (d *runDecoder) metadata() (map[string]string, bool, error) {
	s := &d.s
	if s.next() != '{' {
		return nil, false, s.skip()
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	m := map[string]string{}
	var badVals map[string]bool // keys whose last value is invalid
	more, err := s.firstMember('}')
	for ; err == nil && more; more, err = s.nextMember('}') {
		k, err := s.key()
		if err != nil {
			return nil, false, err
		}
		key := string(k)
		v, ok, err := d.stringLen(0, MaxMetadataValUnits)
		if err != nil {
			return nil, false, err
		}
		m[key] = v
		if ok {
			delete(badVals, key)
		} else {
			if badVals == nil {
				badVals = map[string]bool{}
			}
			badVals[key] = true
		}
	}
	if err != nil || len(badVals) > 0 || len(m) > MaxMetadataEntries {
		return nil, false, err
	}
	for k := range m {
		if UTF16Len(k) > MaxMetadataKeyUnits {
			return nil, false, nil
		}
	}
	return m, true, nil
}

// retry reads the strict retry object: maxAttempts 1..5 required,
// baseDelayMs and maxDelayMs 0..60,000 optional.
func (d *runDecoder) retry() (*Retry, bool, error) {
	s := &d.s
	if s.next() != '{' {
		return nil, false, s.skip()
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	var (
		r                      Retry
		haveAttempts           bool
		strict                 = true
		bad                    [3]bool
		base, maxDelay         int64
		haveBase, haveMaxDelay bool
	)
	more, err := s.firstMember('}')
	for ; err == nil && more; more, err = s.nextMember('}') {
		name, err := s.key()
		if err != nil {
			return nil, false, err
		}
		var (
			n  int64
			ok bool
		)
		switch string(name) {
		case "maxAttempts":
			n, ok, err = d.integer(1, MaxRetryAttempts)
			haveAttempts, r.MaxAttempts, bad[0] = true, int(n), !ok
		case "baseDelayMs":
			n, ok, err = d.integer(0, MaxRetryDelayMs)
			haveBase, base, bad[1] = true, n, !ok
		case "maxDelayMs":
			n, ok, err = d.integer(0, MaxRetryDelayMs)
			haveMaxDelay, maxDelay, bad[2] = true, n, !ok
		default:
			strict = false
			err = s.skip()
		}
		if err != nil {
			return nil, false, err
		}
	}
	if err != nil || !strict || !haveAttempts || bad[0] || bad[1] || bad[2] {
		return nil, false, err
	}
	if haveBase {
		v := int(base)
		r.BaseDelayMs = &v
	}
	if haveMaxDelay {
		v := int(maxDelay)
		r.MaxDelayMs = &v
	}
	return &r, true, nil
}

// scanner is a strict RFC 8259 JSON scanner over a UTF-8-validated buffer.
// Methods that read a value expect s.next() to have been called (or call
// it) and leave s.i just past the value.
type scanner struct {
	b       []byte
	i       int
	depth   int
	scratch []byte // reused for keys with escapes
}

// errSyntax is the one internal syntax error; the public error is
// INVALID_REQUEST either way.
var errSyntax = errors.New("syntax error")

// maxDepth bounds nesting like encoding/json does (the top-level object
// counts as 1).
const maxDepth = 10000

// next skips whitespace and returns the next byte without consuming it
// (0 at the end of input).
func (s *scanner) next() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// end reports whether only whitespace remains.
func (s *scanner) end() bool {
	return s.next() == 0 && s.i == len(s.b)
}

// firstMember is called just past an opening '{' or '['; it reports
// whether a member follows (or consumes the closing byte).
func (s *scanner) firstMember(closing byte) (bool, error) {
	if s.next() == closing {
		s.i++
		return false, nil
	}
	return true, nil
}

// nextMember is called after a member; it consumes ',' (more follow) or
// the closing byte.
func (s *scanner) nextMember(closing byte) (bool, error) {
	switch s.next() {
	case ',':
		s.i++
		return true, nil
	case closing:
		s.i++
		return false, nil
	}
	return false, errSyntax
}

// key reads an object member name and its ':' separator. The result
// aliases the input or the scratch buffer: valid until the next key.
func (s *scanner) key() ([]byte, error) {
	if s.next() != '"' {
		return nil, errSyntax
	}
	k, err := s.strBytes(true)
	if err != nil {
		return nil, err
	}
	if s.next() != ':' {
		return nil, errSyntax
	}
	s.i++
	return k, nil
}

// str reads a string value (s.b[s.i] == '"').
func (s *scanner) str() (string, error) {
	b, err := s.strBytes(false)
	return string(b), err
}

// strBytes decodes the string starting at s.b[s.i] == '"'. Without
// escapes the result aliases the input. Lone UTF-16 surrogates in \u
// escapes become U+FFFD, as in encoding/json (one UTF-16 unit either way,
// so lengths match JavaScript's).
func (s *scanner) strBytes(scratch bool) ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], nil
		case c == '\\':
			var buf []byte
			if scratch {
				buf = s.scratch[:0]
			}
			buf = append(buf, s.b[start:s.i]...)
			buf, err := s.unescape(buf)
			if scratch {
				s.scratch = buf
			}
			return buf, err
		case c < 0x20:
			return nil, errSyntax
		}
		s.i++
	}
	return nil, errSyntax
}

// unescape continues a string at an escape, appending to buf.
func (s *scanner) unescape(buf []byte) ([]byte, error) {
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return buf, nil
		case c < 0x20:
			return nil, errSyntax
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return nil, errSyntax
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, errSyntax
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if lo, ok := s.hex4(); ok {
						if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
							r2 = dec
						} else {
							s.i = save // not a pair: the next escape stands alone
						}
					} else {
						return nil, errSyntax
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, errSyntax
		}
	}
	return nil, errSyntax
}

// hex4 reads four hex digits.
func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case isDigit(c):
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.i += 4
	return r, true
}

// number reads a number literal (RFC 8259 grammar) and returns its bytes.
func (s *scanner) number() ([]byte, error) {
	b, start := s.b, s.i
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return nil, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return nil, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return nil, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
	return b[start:i], nil
}

// literal consumes word (true, false, null).
func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errSyntax
	}
	s.i += len(word)
	return nil
}

// skip consumes and validates one value of any kind.
func (s *scanner) skip() error {
	switch c := s.next(); {
	case c == '"':
		_, err := s.strBytes(true)
		return err
	case c == '{' || c == '[':
		if s.depth++; s.depth > maxDepth {
			return errSyntax
		}
		s.i++
		closing := byte(']')
		if c == '{' {
			closing = '}'
		}
		more, err := s.firstMember(closing)
		for ; err == nil && more; more, err = s.nextMember(closing) {
			if c == '{' {
				if _, err = s.key(); err != nil {
					return err
				}
			}
			if err = s.skip(); err != nil {
				return err
			}
		}
		s.depth--
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || isDigit(c):
		_, err := s.number()
		return err
	}
	return errSyntax
}
