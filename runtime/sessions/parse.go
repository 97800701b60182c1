package sessions

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"adhost/runtime/protocol"
)

// Bounds of the session shapes (wire-extensions §3.1, §3.5).
const (
	// MaxMessageUnits bounds one visible message and the instructions,
	// in UTF-16 code units.
	MaxMessageUnits = 100_000
	// MaxCreateHistory bounds the history a create may import.
	MaxCreateHistory = 100
	// MaxProviderMessages bounds the messages handed to the provider.
	MaxProviderMessages = 2048
	// MaxRevision is the largest revision a client can name (2^53−1).
	MaxRevision = 1<<53 - 1
)

// Modes.
const (
	ModeHistory = "history"
	ModeNative  = "native"
)

// CreateRequest is a decoded SessionCreate body.
type CreateRequest struct {
	Provider     string
	Model        string
	Mode         string
	History      []protocol.HistoryItem
	Instructions *string
}

// Ref is the `session` run option and the identity of read/delete: the
// session id, and for a run the revision the turn continues.
type Ref struct {
	ID       string
	Revision int64
}

// errShape is the private cause of a schema failure; it names the member,
// never a value.
type errShape string

func (e errShape) Error() string { return "session shape: " + string(e) }

// The decoders below follow the rules of wire-core §3.2 for the session
// bodies: property names are case-sensitive, null is never a value for an
// optional member, unknown members fail, integers must be integral and in
// range, lengths count UTF-16 units, and the last of duplicate keys wins
// (as with JSON.parse). encoding/json cannot be used on structs for that
// (it folds case and accepts null), so each body is read as an object of
// raw members first.

// object decodes body as one JSON object of raw members.
func object(body []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(body) {
		return nil, errShape("not UTF-8")
	}
	if firstByte(body) != '{' {
		return nil, errShape("not an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, errShape("not JSON")
	}
	return m, nil
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

func str(raw json.RawMessage, name string) (string, error) {
	if firstByte(raw) != '"' {
		return "", errShape(name + " is not a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errShape(name + " is not a string")
	}
	return s, nil
}

// ParseCreate decodes a SessionCreate body strictly. Every failure is
// INVALID_SESSION.
func ParseCreate(body []byte) (*CreateRequest, error) {
	m, err := object(body)
	if err != nil {
		return nil, invalidSession(err)
	}
	var c CreateRequest
	for name, raw := range m {
		switch name {
		case "provider":
			c.Provider, err = str(raw, name)
			if err == nil && !protocol.IsInstanceID(c.Provider) {
				err = errShape("provider does not match its pattern")
			}
		case "model":
			c.Model, err = str(raw, name)
			if err == nil && !protocol.IsModelID(c.Model) {
				err = errShape("model does not match its pattern")
			}
		case "mode":
			c.Mode, err = str(raw, name)
			if err == nil && c.Mode != ModeHistory && c.Mode != ModeNative {
				err = errShape("mode is not history or native")
			}
		case "history":
			c.History, err = parseHistory(raw)
		case "instructions":
			var s string
			s, err = str(raw, name)
			if err == nil && protocol.UTF16Len(s) > MaxMessageUnits {
				err = errShape("instructions are too long")
			}
			c.Instructions = &s
		default:
			err = errShape("unknown member")
		}
		if err != nil {
			return nil, invalidSession(err)
		}
	}
	if c.Provider == "" || c.Model == "" || c.Mode == "" {
		return nil, invalidSession(errShape("provider, model and mode are required"))
	}
	if c.History == nil {
		c.History = []protocol.HistoryItem{}
	}
	return &c, nil
}

func parseHistory(raw json.RawMessage) ([]protocol.HistoryItem, error) {
	if firstByte(raw) != '[' {
		return nil, errShape("history is not an array")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errShape("history is not an array")
	}
	if len(items) > MaxCreateHistory {
		return nil, errShape("history has too many items")
	}
	out := make([]protocol.HistoryItem, 0, len(items))
	for _, it := range items {
		m, err := object(it)
		if err != nil {
			return nil, errShape("history item is not an object")
		}
		var h protocol.HistoryItem
		var hasRole, hasContent bool
		for name, v := range m {
			switch name {
			case "role":
				h.Role, err = str(v, "history role")
				if err == nil && h.Role != "user" && h.Role != "assistant" {
					err = errShape("history role is not user or assistant")
				}
				hasRole = true
			case "content":
				h.Content, err = str(v, "history content")
				if err == nil && protocol.UTF16Len(h.Content) > MaxMessageUnits {
					err = errShape("history content is too long")
				}
				hasContent = true
			default:
				err = errShape("unknown history member")
			}
			if err != nil {
				return nil, err
			}
		}
		if !hasRole || !hasContent {
			return nil, errShape("history item needs role and content")
		}
		out = append(out, h)
	}
	return out, nil
}

// ParseIdentity decodes the {id} body of read and delete strictly
// (INVALID_SESSION).
func ParseIdentity(body []byte) (string, error) {
	m, err := object(body)
	if err != nil {
		return "", invalidSession(err)
	}
	var id string
	for name, raw := range m {
		if name != "id" {
			return "", invalidSession(errShape("unknown member"))
		}
		if id, err = str(raw, name); err != nil {
			return "", invalidSession(err)
		}
	}
	if !IsSessionID(id) {
		return "", invalidSession(errShape("id is not a lowercase UUID"))
	}
	return id, nil
}

// ParseRef decodes the `session` run option {id, revision} strictly. It
// is a member of the run request, so a failure is the run request's
// schema failure: INVALID_REQUEST (wire-core §3.1–3.2), not the
// INVALID_SESSION of the session endpoints' own bodies.
func ParseRef(raw json.RawMessage) (Ref, error) {
	fail := func(err error) (Ref, error) { return Ref{}, protocol.Wrap(protocol.CodeInvalidRequest, err) }
	m, err := object(raw)
	if err != nil {
		return fail(err)
	}
	var r Ref
	var hasRev bool
	for name, v := range m {
		switch name {
		case "id":
			if r.ID, err = str(v, name); err != nil {
				return fail(err)
			}
		case "revision":
			if r.Revision, err = revision(v); err != nil {
				return fail(err)
			}
			hasRev = true
		default:
			return fail(errShape("unknown member"))
		}
	}
	if !IsSessionID(r.ID) || !hasRev {
		return fail(errShape("id (lowercase UUID) and revision are required"))
	}
	return r, nil
}

// revision accepts an integral JSON number in 0..2^53−1; like a double
// parser, 3.0 is 3.
func revision(raw json.RawMessage) (int64, error) {
	c := firstByte(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, errShape("revision is not a number")
	}
	f, err := strconv.ParseFloat(string(trimSpace(raw)), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > MaxRevision {
		return 0, errShape("revision is not an integer in 0..2^53-1")
	}
	return int64(f), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// IsSessionID reports whether s is a lowercase UUID
// (^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$).
func IsSessionID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

func invalidSession(err error) error {
	return protocol.Wrap(protocol.CodeInvalidSession, err)
}
