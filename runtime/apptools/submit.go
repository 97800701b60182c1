package apptools

import (
	"bytes"
	"context"
	"encoding/json"

	"adhost/runtime"
	"adhost/runtime/approvals/strict"
	"adhost/runtime/protocol"
)

// identity is a ToolExecutionIdentity (§5.4).
type identity struct {
	ExecutionID string `json:"executionId"`
	RunID       string `json:"runId"`
	CallID      string `json:"callId"`
}

// receipt is the answer of both endpoints.
type receipt struct {
	identity
	Status string `json:"status"`
}

func parseIdentity(m map[string]json.RawMessage) (id identity, ok bool) {
	return id, strict.ID(m, "executionId", &id.ExecutionID) && strict.ID(m, "runId", &id.RunID) &&
		strict.ID(m, "callId", &id.CallID)
}

// find runs the ticket checks of §5.4 after the schema, in order: the
// ticket (unknown, consumed, ended, another subject: NOT_FOUND), the
// submitter's grants (FORBIDDEN), the binding (MISMATCH). None of them
// consumes the ticket. s.mu is held.
func (s *Service) findLocked(p *runtime.Principal, id identity) (*ticket, error) {
	t := s.tickets[id.ExecutionID]
	if t == nil || t.finished || t.subject != p.Subject {
		return nil, protocol.New(protocol.CodeToolExecutionNotFound)
	}
	if _, ok := p.ApplicationTools[t.name]; !ok || !p.Providers[t.provider] {
		return nil, protocol.New(protocol.CodeForbidden)
	}
	if id.RunID != t.runID || id.CallID != t.callID {
		return nil, protocol.New(protocol.CodeToolExecutionMismatch)
	}
	return t, nil
}

// Progress serves POST /v1/tool-executions/progress: real progress of the
// application's work re-arms the run's idle clock (and may show as
// run.progress phase "tool").
func (s *Service) Progress(_ context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	m, ok := strict.Object(body, "executionId", "runId", "callId")
	if !ok {
		return nil, protocol.New(protocol.CodeInvalidToolExecution)
	}
	id, ok := parseIdentity(m)
	if !ok {
		return nil, protocol.New(protocol.CodeInvalidToolExecution)
	}
	s.mu.Lock()
	t, err := s.findLocked(p, id)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if t.progress != nil {
		t.progress()
	}
	return json.Marshal(receipt{identity: id, Status: "progress"})
}

// Result serves POST /v1/tool-executions/results: exactly one of output
// (any JSON value, null included) or error "APPLICATION_TOOL_FAILED". An
// accepted submission consumes the ticket; so do an oversize output
// (TOOL_OUTPUT_LIMIT) and one the output schema refuses
// (INVALID_TOOL_OUTPUT), and the run then fails with an uncertain outcome.
func (s *Service) Result(_ context.Context, p *runtime.Principal, body []byte) ([]byte, error) {
	invalid := protocol.New(protocol.CodeInvalidToolExecution)
	// output may be null, which strict.Object refuses: take it out first.
	var raw map[string]json.RawMessage
	if !strict.IsObject(body) || json.Unmarshal(body, &raw) != nil {
		return nil, invalid
	}
	output, hasOutput := raw["output"]
	delete(raw, "output")
	rest, _ := json.Marshal(raw)
	m, ok := strict.Object(rest, "executionId", "runId", "callId", "error")
	if !ok {
		return nil, invalid
	}
	id, ok := parseIdentity(m)
	if !ok {
		return nil, invalid
	}
	_, hasError := m["error"]
	if hasOutput == hasError {
		return nil, invalid
	}
	var sub submission
	if hasError {
		var code string
		if !strict.String(m, "error", &code, true) || code != string(protocol.CodeApplicationToolFailed) {
			return nil, invalid // private exception text is never accepted
		}
		sub.failed = true
	} else {
		if _, ok := strict.Lossless(output); !ok {
			return nil, invalid
		}
		var b bytes.Buffer
		if json.Compact(&b, output) != nil {
			return nil, invalid
		}
		sub.output = b.Bytes()
	}

	s.mu.Lock()
	t, err := s.findLocked(p, id)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	// From here the ticket is consumed, whatever the verdict.
	var verdict error
	switch {
	case sub.failed:
	case len(sub.output) > MaxOutputBytes:
		verdict, sub = protocol.New(protocol.CodeToolOutputLimit), submission{failed: true}
	case t.check != nil && t.check(sub.output) != nil:
		verdict, sub = protocol.New(protocol.CodeInvalidToolOutput), submission{failed: true}
	}
	t.finished = true
	delete(s.tickets, t.id)
	t.result <- sub
	s.mu.Unlock()
	if verdict != nil {
		return nil, verdict
	}
	return json.Marshal(receipt{identity: id, Status: "accepted"})
}
