package protocol_test

// refDecode is the first, encoding/json-token-based implementation of the
// run request decoder, kept as an independent reference: the differential
// fuzz target checks that the production scanner agrees with it on every
// input (same acceptance, same decoded request).

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"adhost/runtime/protocol"
)

func refDecode(o protocol.DecodeOptions, body []byte) (*protocol.RunRequest, error) {
	if !utf8.Valid(body) {
		return nil, errors.New("utf8")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	dec := runDecoder{d: d, opts: o}
	return dec.decode()
}

func invalidRequest(why string) error { return errors.New(why) }
func syntaxError(err error) error     { return err }

// Top-level fields. The index doubles as a bit in runDecoder's sets.
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
)

var fieldNames = [numFields]string{
	"provider", "model", "input", "instructions", "history", "tools",
	"requiredCapabilities", "maxSteps", "maxOutputTokens", "idleTimeoutMs",
	"outputSchema", "metadata", "idempotencyKey", "retry", "attachments",
	"outputArtifact", "retrieval", "session", "approvals", "applicationTools",
}

func (f field) String() string { return fieldNames[f] }

// lookupField matches a property name exactly (case-sensitive).
func lookupField(name string) (field, bool) {
	for i, n := range fieldNames {
		if n == name {
			return field(i), true
		}
	}
	return 0, false
}

// enabled reports whether an extension field is accepted by o.
func enabled(o protocol.DecodeOptions, f field) bool {
	switch f {
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

type runDecoder struct {
	d    *json.Decoder
	opts protocol.DecodeOptions
}

func (rd *runDecoder) decode() (*protocol.RunRequest, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return nil, syntaxError(err)
	}
	if tok != json.Delim('{') {
		return nil, invalidRequest("body is not a JSON object")
	}
	var (
		req        protocol.RunRequest
		seen, bad  uint32 // bit per field: present / last value invalid
		badField   field
		haveReason bool
	)
	for rd.d.More() {
		tok, err := rd.d.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		name, _ := tok.(string)
		f, ok := lookupField(name)
		if !ok || !enabled(rd.opts, f) {
			// An unknown property stays in the object whatever follows.
			return nil, invalidRequest("unknown field")
		}
		ok, err = rd.field(&req, f)
		if err != nil {
			return nil, syntaxError(err)
		}
		bit := uint32(1) << f
		seen |= bit
		if ok {
			bad &^= bit
		} else {
			bad |= bit
		}
	}
	if _, err := rd.d.Token(); err != nil { // the closing '}'
		return nil, syntaxError(err)
	}
	if _, err := rd.d.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the top-level value")
		}
		return nil, syntaxError(err)
	}
	for f := field(0); f < numFields; f++ {
		if bad&(1<<f) != 0 {
			badField, haveReason = f, true
			break
		}
	}
	if haveReason {
		return nil, invalidRequest("invalid " + badField.String())
	}
	for _, f := range [...]field{fProvider, fModel, fInput} {
		if seen&(1<<f) == 0 {
			return nil, invalidRequest("missing " + f.String())
		}
	}
	return &req, nil
}

// field decodes the value of top-level field f into req. ok is false when
// the value is present but invalid (it has been consumed); err is a syntax
// error. A repeated key replaces the earlier value entirely.
func (rd *runDecoder) field(req *protocol.RunRequest, f field) (ok bool, err error) {
	switch f {
	case fProvider:
		req.Provider, ok, err = rd.pattern(protocol.IsInstanceID)
	case fModel:
		req.Model, ok, err = rd.pattern(protocol.IsModelID)
	case fInput:
		req.Input, ok, err = rd.stringLen(1, protocol.MaxInputUnits)
	case fInstructions:
		var s string
		s, ok, err = rd.stringLen(0, protocol.MaxInputUnits)
		req.Instructions = &s
	case fHistory:
		req.History, ok, err = rd.history()
	case fTools:
		// Duplicates are semantic check #14, not a schema failure.
		req.Tools, ok, err = rd.stringArray(protocol.MaxTools, protocol.IsToolName, false)
	case fRequiredCapabilities:
		req.RequiredCapabilities, ok, err = rd.stringArray(protocol.MaxRequiredCaps, protocol.IsCapabilityName, true)
	case fMaxSteps:
		var n int64
		n, ok, err = rd.integer(1, protocol.MaxSteps)
		v := int(n)
		req.MaxSteps = &v
	case fMaxOutputTokens:
		var n int64
		n, ok, err = rd.integer(1, protocol.MaxOutputTokens)
		v := int(n)
		req.MaxOutputTokens = &v
	case fIdleTimeoutMs:
		var n int64
		n, ok, err = rd.integer(0, protocol.MaxIdleTimeoutMs)
		req.IdleTimeoutMs = &n
	case fOutputSchema:
		req.OutputSchema, ok, err = rd.raw('{')
	case fMetadata:
		req.Metadata, ok, err = rd.metadata()
	case fIdempotencyKey:
		var s string
		s, ok, err = rd.pattern(protocol.IsIdempotencyKey)
		req.IdempotencyKey = &s
	case fRetry:
		req.Retry, ok, err = rd.retry()
	case fAttachments:
		req.Attachments, ok, err = rd.raw('[')
	case fOutputArtifact:
		req.OutputArtifact, ok, err = rd.raw('{')
	case fRetrieval:
		req.Retrieval, ok, err = rd.raw('{')
	case fSession:
		req.Session, ok, err = rd.raw('{')
	case fApprovals:
		req.Approvals, ok, err = rd.raw('{')
	case fApplicationTools:
		req.ApplicationTools, ok, err = rd.raw('[')
	}
	return ok, err
}

// skip consumes the rest of a value whose first token is tok.
func (rd *runDecoder) skip(tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := rd.d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// str reads a string value; any other value is consumed and reported !ok.
func (rd *runDecoder) str() (string, bool, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return "", false, err
	}
	if s, isStr := tok.(string); isStr {
		return s, true, nil
	}
	return "", false, rd.skip(tok)
}

func (rd *runDecoder) pattern(match func(string) bool) (string, bool, error) {
	s, ok, err := rd.str()
	return s, ok && match(s), err
}

func (rd *runDecoder) stringLen(minUnits, maxUnits int) (string, bool, error) {
	s, ok, err := rd.str()
	if !ok {
		return s, false, err
	}
	n := protocol.UTF16Len(s)
	return s, n >= minUnits && n <= maxUnits, nil
}

// integer reads a JSON number that, read as an IEEE double the way
// upstream's JSON.parse does, is integral and within [lo, hi]. So 8, 8.0,
// 8e0 and 80e-1 are 8; 8.5, 1e400 and anything non-numeric are invalid.
func (rd *runDecoder) integer(lo, hi int64) (int64, bool, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return 0, false, err
	}
	num, isNum := tok.(json.Number)
	if !isNum {
		return 0, false, rd.skip(tok)
	}
	n, ok := integral(string(num), lo, hi)
	return n, ok, nil
}

// integral parses a JSON number literal as a double and checks it is an
// integer in [lo, hi]. Underflow yields ±0, overflow ±Inf (rejected).
func integral(lit string, lo, hi int64) (int64, bool) {
	f, err := strconv.ParseFloat(lit, 64)
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
// match; unique rejects repeated entries (JSON Schema uniqueItems).
// A nil-free result: an empty array decodes to an empty, non-nil slice.
func (rd *runDecoder) stringArray(maxItems int, match func(string) bool, unique bool) ([]string, bool, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return nil, false, err
	}
	if tok != json.Delim('[') {
		return nil, false, rd.skip(tok)
	}
	out := []string{}
	ok := true
	for rd.d.More() {
		s, isStr, err := rd.str()
		if err != nil {
			return nil, false, err
		}
		if !isStr || !match(s) || len(out) >= maxItems {
			ok = false
			continue
		}
		if unique && contains(out, s) {
			ok = false
			continue
		}
		out = append(out, s)
	}
	if _, err := rd.d.Token(); err != nil {
		return nil, false, err
	}
	return out, ok, nil
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
func (rd *runDecoder) raw(kind byte) (json.RawMessage, bool, error) {
	var m json.RawMessage
	if err := rd.d.Decode(&m); err != nil {
		return nil, false, err
	}
	var buf bytes.Buffer
	buf.Grow(len(m))
	if err := json.Compact(&buf, m); err != nil {
		return nil, false, err
	}
	b := buf.Bytes()
	return b, len(b) > 0 && b[0] == kind, nil
}

// object iterates the members of an object value. For each key it calls
// member, which must consume the value. It returns !ok when the value is
// not an object (consumed).
func (rd *runDecoder) object(member func(key string) error) (bool, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return false, err
	}
	if tok != json.Delim('{') {
		return false, rd.skip(tok)
	}
	for rd.d.More() {
		k, err := rd.d.Token()
		if err != nil {
			return false, err
		}
		key, _ := k.(string)
		if err := member(key); err != nil {
			return false, err
		}
	}
	_, err = rd.d.Token()
	return err == nil, err
}

// history reads the strict history array: ≤ 100 items of
// {role: "user"|"assistant", content: string ≤ 100,000 units}, both required.
func (rd *runDecoder) history() ([]protocol.HistoryItem, bool, error) {
	tok, err := rd.d.Token()
	if err != nil {
		return nil, false, err
	}
	if tok != json.Delim('[') {
		return nil, false, rd.skip(tok)
	}
	out := []protocol.HistoryItem{}
	ok := true
	for rd.d.More() {
		item, itemOK, err := rd.historyItem()
		if err != nil {
			return nil, false, err
		}
		if !itemOK || len(out) >= protocol.MaxHistoryItems {
			ok = false
			continue
		}
		out = append(out, item)
	}
	if _, err := rd.d.Token(); err != nil {
		return nil, false, err
	}
	return out, ok, nil
}

func (rd *runDecoder) historyItem() (protocol.HistoryItem, bool, error) {
	var (
		item                      protocol.HistoryItem
		haveRole, haveContent     bool
		roleOK, contentOK, strict = false, false, true
	)
	isObj, err := rd.object(func(key string) error {
		var err error
		switch key {
		case "role":
			haveRole = true
			item.Role, roleOK, err = rd.str()
			roleOK = roleOK && (item.Role == "user" || item.Role == "assistant")
		case "content":
			haveContent = true
			item.Content, contentOK, err = rd.stringLen(0, protocol.MaxInputUnits)
		default:
			strict = false
			var tok json.Token
			if tok, err = rd.d.Token(); err == nil {
				err = rd.skip(tok)
			}
		}
		return err
	})
	if err != nil {
		return protocol.HistoryItem{}, false, err
	}
	return item, isObj && strict && haveRole && haveContent && roleOK && contentOK, nil
}

// metadata reads ≤ 32 entries with keys ≤ 80 and string values ≤ 500 units.
// Empty keys are allowed (the schema bounds only the length).
func (rd *runDecoder) metadata() (map[string]string, bool, error) {
	m := map[string]string{}
	var badVals map[string]bool // keys whose last value is invalid
	isObj, err := rd.object(func(key string) error {
		v, ok, err := rd.stringLen(0, protocol.MaxMetadataValUnits)
		if err != nil {
			return err
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
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if !isObj || len(badVals) > 0 || len(m) > protocol.MaxMetadataEntries {
		return nil, false, nil
	}
	for k := range m {
		if protocol.UTF16Len(k) > protocol.MaxMetadataKeyUnits {
			return nil, false, nil
		}
	}
	return m, true, nil
}

// retry reads the strict retry object: maxAttempts 1..5 required,
// baseDelayMs and maxDelayMs 0..60,000 optional.
func (rd *runDecoder) retry() (*protocol.Retry, bool, error) {
	var (
		r                  protocol.Retry
		haveAttempts       bool
		strict             = true
		bad                [3]bool
		base, maxDelay     int64
		haveBase, haveMaxD bool
	)
	isObj, err := rd.object(func(key string) error {
		var (
			n   int64
			ok  bool
			err error
		)
		switch key {
		case "maxAttempts":
			n, ok, err = rd.integer(1, protocol.MaxRetryAttempts)
			haveAttempts, r.MaxAttempts, bad[0] = true, int(n), !ok
		case "baseDelayMs":
			n, ok, err = rd.integer(0, protocol.MaxRetryDelayMs)
			haveBase, base, bad[1] = true, n, !ok
		case "maxDelayMs":
			n, ok, err = rd.integer(0, protocol.MaxRetryDelayMs)
			haveMaxD, maxDelay, bad[2] = true, n, !ok
		default:
			strict = false
			var tok json.Token
			if tok, err = rd.d.Token(); err == nil {
				err = rd.skip(tok)
			}
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !isObj || !strict || !haveAttempts || bad[0] || bad[1] || bad[2] {
		return nil, false, nil
	}
	if haveBase {
		v := int(base)
		r.BaseDelayMs = &v
	}
	if haveMaxD {
		v := int(maxDelay)
		r.MaxDelayMs = &v
	}
	return &r, true, nil
}
