package host

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"

	"adhost/runtime"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
)

// The four job endpoints (wire-extensions §2.1). They only touch the job
// store, never a run slot (§1.5): a host whose slots are all taken still
// accepts, reads and cancels jobs. Bodies are decoded strictly: exact
// member names, no unknown members, no nulls; a malformed submit, read or
// cancel body is INVALID_JOB, a malformed events body INVALID_JOB_CURSOR.

var (
	jobKeyPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$`)
	jobIDPattern  = regexp.MustCompile(`^[a-f0-9]{8}(-[a-f0-9]{4}){3}-[a-f0-9]{12}$`)
	// Non-negative integers without sign, fraction or exponent.
	jobIntPattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,15})$`)
)

const maxJobCursor = 1<<53 - 1

// jobRequestFields are the extension fields a job request may name only to
// be refused with JOB_REQUEST_UNSUPPORTED (§2.2), so the decoder must know
// them; the rest of the request is /v1/runs' schema.
var jobRequestFields = protocol.DecodeOptions{Session: true, Approvals: true, ApplicationTools: true, Attachments: true, OutputArtifact: true, Retrieval: true}

// jobRoute returns the endpoint of one job operation, or nil (no route:
// 404) when jobs are off.
func (s *Server) jobRoute(op func(ctx context.Context, p *runtime.Principal, body []byte) (any, error)) endpoint {
	if s.jobs == nil {
		return nil
	}
	return func(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
		body, ok := s.readPOST(w, r)
		if !ok {
			return
		}
		// §1.2 step 7: not UTF-8 or not JSON is INVALID_REQUEST, before
		// the job schema.
		if !utf8.Valid(body) || !json.Valid(body) {
			s.writeError(w, r, protocol.New(protocol.CodeInvalidRequest))
			return
		}
		out, err := op(r.Context(), p, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		b, err := json.Marshal(out)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, b)
	}
}

// jobMembers splits a JSON object into its members, refusing anything
// not in allowed (exact, case-sensitive names) and null values.
func jobMembers(body []byte, allowed ...string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if !isObject(body) {
		return nil, false
	}
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, false
	}
	for k, v := range m {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found || string(v) == "null" {
			return nil, false
		}
	}
	return m, true
}

// isObject reports whether the JSON value starts with '{' after
// whitespace.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// jobString decodes a required string member matching pattern.
func jobString(m map[string]json.RawMessage, name string, pattern *regexp.Regexp) (string, bool) {
	raw, ok := m[name]
	if !ok {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil || !pattern.MatchString(v) {
		return "", false
	}
	return v, true
}

// jobInt decodes an integer member within lo..hi.
func jobInt(raw json.RawMessage, lo, hi int64) (int64, bool) {
	if !jobIntPattern.Match(raw) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

func (s *Server) jobSubmit(ctx context.Context, p *runtime.Principal, body []byte) (any, error) {
	key, req, err := decodeJobSubmit(body)
	if err != nil {
		return nil, err
	}
	return s.jobs.Submit(ctx, p, key, req)
}

// decodeJobSubmit decodes a {key, request} body.
func decodeJobSubmit(body []byte) (string, *protocol.RunRequest, error) {
	m, ok := jobMembers(body, "key", "request")
	if !ok {
		return "", nil, protocol.New(protocol.CodeInvalidJob)
	}
	key, ok := jobString(m, "key", jobKeyPattern)
	raw, has := m["request"]
	if !ok || !has {
		return "", nil, protocol.New(protocol.CodeInvalidJob)
	}
	req, err := jobRequestFields.Decode(raw)
	if err != nil {
		return "", nil, protocol.Wrap(protocol.CodeInvalidJob, err)
	}
	return key, req, nil
}

// jobID decodes a {id} body.
func jobID(body []byte) (string, error) {
	m, ok := jobMembers(body, "id")
	if !ok {
		return "", protocol.New(protocol.CodeInvalidJob)
	}
	id, ok := jobString(m, "id", jobIDPattern)
	if !ok {
		return "", protocol.New(protocol.CodeInvalidJob)
	}
	return id, nil
}

func (s *Server) jobRead(ctx context.Context, p *runtime.Principal, body []byte) (any, error) {
	id, err := jobID(body)
	if err != nil {
		return nil, err
	}
	return s.jobs.Read(ctx, p, id)
}

func (s *Server) jobCancel(ctx context.Context, p *runtime.Principal, body []byte) (any, error) {
	id, err := jobID(body)
	if err != nil {
		return nil, err
	}
	return s.jobs.Cancel(ctx, p, id)
}

func (s *Server) jobEvents(ctx context.Context, p *runtime.Principal, body []byte) (any, error) {
	id, after, limit, err := decodeJobEvents(body)
	if err != nil {
		return nil, err
	}
	return s.jobs.Events(ctx, p, id, after, limit)
}

// decodeJobEvents decodes an {id, after, limit?} body.
func decodeJobEvents(body []byte) (id string, after uint64, limit int, err error) {
	bad := protocol.New(protocol.CodeInvalidJobCursor)
	m, ok := jobMembers(body, "id", "after", "limit")
	if !ok {
		return "", 0, 0, bad
	}
	if id, ok = jobString(m, "id", jobIDPattern); !ok {
		return "", 0, 0, bad
	}
	rawAfter, ok := m["after"]
	if !ok {
		return "", 0, 0, bad
	}
	a, ok := jobInt(rawAfter, 0, maxJobCursor)
	if !ok {
		return "", 0, 0, bad
	}
	l := int64(jobs.MaxPageEvents)
	if raw, has := m["limit"]; has {
		if l, ok = jobInt(raw, 1, jobs.MaxPageEvents); !ok {
			return "", 0, 0, bad
		}
	}
	return id, uint64(a), int(l), nil
}
