package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"adhost/runtime/protocol"
)

// Conversation sessions (wire-extensions §3): create, read and delete a
// session, and continue it with a run carrying SessionRef.

// Session modes and states.
const (
	SessionModeHistory = "history"
	SessionModeNative  = "native"

	SessionReady       = "ready"
	SessionRunning     = "running"
	SessionInterrupted = "interrupted"
)

// SessionInfo is a session's public description.
type SessionInfo struct {
	ID        string
	Revision  int64
	Provider  string
	Model     string
	Mode      string
	State     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is nil while a turn is running (retention is suspended).
	ExpiresAt *time.Time
}

// SessionSnapshot is what create and read return: the session and its
// visible messages.
type SessionSnapshot struct {
	Session      SessionInfo
	History      []protocol.HistoryItem
	Instructions *string
}

// SessionCreate is the body of CreateSession.
type SessionCreate struct {
	Provider     string                 `json:"provider"`
	Model        string                 `json:"model"`
	Mode         string                 `json:"mode"`
	History      []protocol.HistoryItem `json:"history,omitempty"`
	Instructions *string                `json:"instructions,omitempty"`
}

// SessionRef is the `session` run option continuing revision rev of
// session id: set RunRequest.Session to it. The result's SessionInfo
// (RunResult.Session, checked by the client) has the next revision.
func SessionRef(id string, rev int64) json.RawMessage {
	b, _ := json.Marshal(sessionRef{ID: id, Revision: rev})
	return b
}

type sessionRef struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
}

// CreateSession calls POST /v1/sessions/create. The answer must describe
// the session asked for: same provider, model and mode, revision 0, ready,
// and exactly the imported history.
func (c *Client) CreateSession(ctx context.Context, req *SessionCreate) (*SessionSnapshot, error) {
	if req == nil {
		return nil, newError(protocol.CodeInvalidRequest, "the session request is nil")
	}
	body, err := c.postOp(ctx, "/v1/sessions/create", req)
	if err != nil {
		return nil, err
	}
	s, err := validateSnapshot(body)
	if err == nil {
		err = checkCreated(s, req)
	}
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return s, nil
}

func checkCreated(s *SessionSnapshot, req *SessionCreate) error {
	in := s.Session
	switch {
	case in.Provider != req.Provider || in.Model != req.Model || in.Mode != req.Mode:
		return fieldError("session does not match the provider, model and mode asked for")
	case in.Revision != 0 || in.State != SessionReady:
		return fieldError("a new session must be ready at revision 0")
	case len(s.History) != len(req.History):
		return fieldError("history is not the imported history")
	case (s.Instructions == nil) != (req.Instructions == nil) || (s.Instructions != nil && *s.Instructions != *req.Instructions):
		return fieldError("instructions are not the ones given")
	}
	for i, h := range s.History {
		if h != req.History[i] {
			return fieldError("history is not the imported history")
		}
	}
	return nil
}

// ReadSession calls POST /v1/sessions/read.
func (c *Client) ReadSession(ctx context.Context, id string) (*SessionSnapshot, error) {
	body, err := c.postOp(ctx, "/v1/sessions/read", map[string]string{"id": id})
	if err != nil {
		return nil, err
	}
	s, err := validateSnapshot(body)
	if err == nil && s.Session.ID != id {
		err = fieldError("session.id is not the one asked for")
	}
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return s, nil
}

// DeleteSession calls POST /v1/sessions/delete; the answer must confirm
// the deletion of that id.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	body, err := c.postOp(ctx, "/v1/sessions/delete", map[string]string{"id": id})
	if err != nil {
		return err
	}
	m, ok := parseObject(body)
	if !ok {
		return invalidResponse("the delete answer is not an object")
	}
	if got, ok := asString(m["id"]); !ok || got != id {
		return invalidResponse("id is not the session deleted")
	}
	if d, ok := asBool(m["deleted"]); !ok || !d {
		return invalidResponse("deleted is not true")
	}
	return nil
}

// postOp posts a JSON operation body and returns the checked JSON answer.
func (c *Client) postOp(ctx context.Context, path string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Code: protocol.CodeInvalidRequest, Message: "the request does not encode", Err: err}
	}
	resp, err := c.do(ctx, http.MethodPost, path, b, "application/json")
	if err != nil {
		return nil, err
	}
	return readJSON(resp)
}

func validateSnapshot(body []byte) (*SessionSnapshot, error) {
	m, ok := parseObject(body)
	if !ok {
		return nil, fieldError("the snapshot is not an object")
	}
	info, err := validateSessionInfo(m["session"])
	if err != nil {
		return nil, err
	}
	s := &SessionSnapshot{Session: *info}
	items, ok := asArray(m["history"])
	if !ok {
		return nil, fieldError("history is not an array")
	}
	for _, raw := range items {
		it, ok := asObject(raw)
		if !ok || len(it) != 2 {
			return nil, fieldError("history item is not exactly {role, content}")
		}
		var h protocol.HistoryItem
		if h.Role, ok = asString(it["role"]); !ok || (h.Role != "user" && h.Role != "assistant") {
			return nil, fieldError("history role is invalid")
		}
		if h.Content, ok = asString(it["content"]); !ok {
			return nil, fieldError("history content is not a string")
		}
		s.History = append(s.History, h)
	}
	if raw, present := m["instructions"]; present {
		str, ok := asString(raw)
		if !ok {
			return nil, fieldError("instructions is not a string")
		}
		s.Instructions = &str
	}
	return s, nil
}

// validateSessionInfo checks a SessionInfo (§3.1): a lowercase UUID, a
// safe non-negative revision, the id patterns, a known mode and state,
// millisecond UTC timestamps in order, and expiresAt exactly when no turn
// is running. Unknown members (also ones differing only by case) are
// ignored.
func validateSessionInfo(raw json.RawMessage) (*SessionInfo, error) {
	m, ok := asObject(raw)
	if !ok {
		return nil, fieldError("session is not an object")
	}
	var in SessionInfo
	if in.ID, ok = asString(m["id"]); !ok || !isLowerUUID(in.ID) {
		return nil, fieldError("session.id is not a lowercase UUID")
	}
	if in.Revision, ok = asSafeInt(m["revision"]); !ok || in.Revision < 0 {
		return nil, fieldError("session.revision is not a non-negative integer")
	}
	if in.Provider, ok = asString(m["provider"]); !ok || !protocol.IsInstanceID(in.Provider) {
		return nil, fieldError("session.provider is invalid")
	}
	if in.Model, ok = asString(m["model"]); !ok || !protocol.IsModelID(in.Model) {
		return nil, fieldError("session.model is invalid")
	}
	if in.Mode, ok = asString(m["mode"]); !ok || (in.Mode != SessionModeHistory && in.Mode != SessionModeNative) {
		return nil, fieldError("session.mode is invalid")
	}
	if in.State, ok = asString(m["state"]); !ok || (in.State != SessionReady && in.State != SessionRunning && in.State != SessionInterrupted) {
		return nil, fieldError("session.state is invalid")
	}
	if in.CreatedAt, ok = asWireTime(m["createdAt"]); !ok {
		return nil, fieldError("session.createdAt is not a millisecond UTC timestamp")
	}
	if in.UpdatedAt, ok = asWireTime(m["updatedAt"]); !ok || in.UpdatedAt.Before(in.CreatedAt) {
		return nil, fieldError("session.updatedAt is invalid or before createdAt")
	}
	raw, present := m["expiresAt"]
	switch {
	case in.State == SessionRunning && present:
		return nil, fieldError("session.expiresAt is set while a turn runs")
	case in.State != SessionRunning:
		t, ok := asWireTime(raw)
		if !present || !ok || !t.After(in.UpdatedAt) {
			return nil, fieldError("session.expiresAt is missing or not after updatedAt")
		}
		in.ExpiresAt = &t
	}
	return &in, nil
}

// validateResultSession checks result.session against the run's `session`
// option: present exactly when asked for, and then the same session, the
// next revision, the run's provider and model, ready again.
func validateResultSession(raw json.RawMessage, req *protocol.RunRequest) error {
	if len(req.Session) == 0 {
		if raw != nil {
			return fieldError("result.session was not requested")
		}
		return nil
	}
	if raw == nil {
		return fieldError("result.session is missing")
	}
	in, err := validateSessionInfo(raw)
	if err != nil {
		return fieldError("result." + err.Error())
	}
	var ref sessionRef
	if err := json.Unmarshal(req.Session, &ref); err != nil {
		return fieldError("the request's session option does not decode")
	}
	switch {
	case in.ID != ref.ID:
		return fieldError("result.session is another session")
	case in.Revision != ref.Revision+1:
		return fieldError("result.session.revision is not the next revision")
	case in.Provider != req.Provider || in.Model != req.Model:
		return fieldError("result.session provider or model differs from the run's")
	case in.State != SessionReady:
		return fieldError("result.session is not ready")
	}
	return nil
}

// asWireTime accepts exactly the wire timestamp form
// 2006-01-02T15:04:05.000Z (UTC, millisecond precision, a real date).
func asWireTime(raw json.RawMessage) (time.Time, bool) {
	s, ok := asString(raw)
	if !ok || len(s) != len(wireTimeLayout) {
		return time.Time{}, false
	}
	t, err := time.Parse(wireTimeLayout, s)
	return t, err == nil
}

const wireTimeLayout = "2006-01-02T15:04:05.000Z"

func isLowerUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
