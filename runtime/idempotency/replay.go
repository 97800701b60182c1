package idempotency

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Replay is the recorded outcome of a key (wire-core §15.3), ready to
// send. Nothing is executed to build it.
type Replay struct {
	// Events is the compact log for an event stream: the stored events
	// without approval.requested, approval.resolved and
	// tool.execution.requested, with run.started synthesised when it is
	// missing and a run.failed OPERATION_UNCERTAIN appended when no
	// terminal event was recorded, renumbered from 1, with the original
	// runId.
	Events []runtime.Event
	// Result is the JSON-mode body of a completed run; nil otherwise.
	Result []byte
	// Err is the outcome of a run that did not complete: its recorded
	// failure or cancellation, or OPERATION_UNCERTAIN.
	Err *protocol.Error
}

// notReplayed are the events a replay never sends again: it must not
// re-ask for an approval or re-dispatch an application tool.
var notReplayed = map[string]bool{
	"approval.requested":       true,
	"approval.resolved":        true,
	"tool.execution.requested": true,
}

var errCorrupt = errors.New("idempotency: unreadable record")

// buildReplay turns a stored record into its replay. req is the request
// being answered (same fingerprint as the original, so the same provider
// and model) for a run.started that was never recorded.
func buildReplay(recs []durable.Record, req *protocol.RunRequest) (*Replay, error) {
	var (
		evs                [][]byte
		types              []string
		result, resultTS   []byte
		runID, terminal    string
		termErr            *protocol.Error
		completedFromEvent []byte
	)
	for _, r := range recs {
		if len(r.Data) == 0 {
			return nil, errCorrupt
		}
		tag, body := r.Data[0], r.Data[1:]
		if terminal != "" {
			break // nothing is recorded after the terminal event
		}
		switch tag {
		case tagEvent:
			typ, ok := memberString(body, "type")
			if !ok {
				return nil, errCorrupt
			}
			if runID == "" {
				runID, _ = memberString(body, "runId")
			}
			if notReplayed[typ] {
				continue
			}
			switch typ {
			case runtime.EventRunCompleted:
				terminal = typ
				if s, e, ok := member(body, "result"); ok {
					completedFromEvent = body[s:e]
				}
			case runtime.EventRunFailed, runtime.EventRunCancelled:
				terminal = typ
				termErr = recordedError(body)
			}
			evs, types = append(evs, body), append(types, typ)
		case tagResult:
			if len(body) < timestampLen {
				return nil, errCorrupt
			}
			resultTS, result = body[:timestampLen], body[timestampLen:]
		case tagCompleted:
			if result == nil {
				return nil, errCorrupt
			}
			evs, types = append(evs, completedEvent(body, result)), append(types, runtime.EventRunCompleted)
			terminal = runtime.EventRunCompleted
		default:
			return nil, errCorrupt
		}
	}
	if runID == "" && result != nil {
		runID, _ = memberString(result, "runId")
	}
	if runID == "" {
		runID = newRunID()
	}
	if terminal == "" && result != nil {
		// The result was committed and the run.completed after it was
		// not: the run completed, and the replay says so.
		var env bytes.Buffer
		env.WriteString(`{"type":"run.completed","runId":`)
		env.Write(protocol.AppendJSONString(nil, runID, false))
		env.WriteString(`,"sequence":0,"timestamp":"`)
		env.Write(resultTS)
		env.WriteByte('"')
		evs, types = append(evs, completedEvent(env.Bytes(), result)), append(types, runtime.EventRunCompleted)
		terminal = runtime.EventRunCompleted
	}
	if len(types) == 0 || types[0] != runtime.EventRunStarted {
		ts := time.Now()
		if len(evs) > 0 {
			if s, ok := memberString(evs[0], "timestamp"); ok {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					ts = t
				}
			}
		}
		b := []byte(`{"type":"run.started","runId":`)
		b = protocol.AppendJSONString(b, runID, false)
		b = append(b, `,"sequence":0,"timestamp":"`...)
		b = appendTimestamp(b, ts)
		b = append(b, `","provider":`...)
		b = protocol.AppendJSONString(b, req.Provider, false)
		b = append(b, `,"model":`...)
		b = protocol.AppendJSONString(b, req.Model, false)
		b = append(b, '}')
		evs, types = append([][]byte{b}, evs...), append([]string{runtime.EventRunStarted}, types...)
	}
	rp := &Replay{}
	if terminal == "" {
		termErr = uncertain()
		b := []byte(`{"type":"run.failed","runId":`)
		b = protocol.AppendJSONString(b, runID, false)
		b = append(b, `,"sequence":0,"timestamp":"`...)
		b = appendTimestamp(b, time.Now())
		b = append(b, `","error":`...)
		info, _ := json.Marshal(termErr.Info())
		b = append(b, info...)
		b = append(b, '}')
		evs, types = append(evs, b), append(types, runtime.EventRunFailed)
		terminal = runtime.EventRunFailed
	}
	rp.Events = make([]runtime.Event, len(evs))
	for i, d := range evs {
		data, ok := renumber(d, int64(i+1))
		if !ok {
			return nil, errCorrupt
		}
		rp.Events[i] = runtime.Event{Type: types[i], Sequence: int64(i + 1), Data: data}
	}
	switch {
	case terminal != runtime.EventRunCompleted:
		rp.Err = termErr
	case result != nil:
		rp.Result = result
	case completedFromEvent != nil:
		rp.Result = completedFromEvent
	default:
		return nil, errCorrupt
	}
	return rp, nil
}

// completedEvent rebuilds run.completed from its envelope and the stored
// result, escaped for HTML as the engine encodes the event.
func completedEvent(env, result []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(env) + len(resultMember) + len(result) + 1)
	b.Write(env)
	b.Write(resultMember)
	json.HTMLEscape(&b, result)
	b.WriteByte('}')
	return b.Bytes()
}

// recordedError is the error of a stored run.failed or run.cancelled. An
// unreadable one replays as uncertain: never as a success.
func recordedError(event []byte) *protocol.Error {
	s, e, ok := member(event, "error")
	if !ok {
		return uncertain()
	}
	var info protocol.ErrorInfo
	if err := json.Unmarshal(event[s:e], &info); err != nil || info.Code == "" {
		return uncertain()
	}
	return &protocol.Error{Code: info.Code, Message: info.Message, Retryable: info.Retryable,
		Uncertain: info.Outcome == protocol.OutcomeUncertain}
}

// uncertain is the outcome of a record without a terminal event.
func uncertain() *protocol.Error {
	pe := protocol.New(protocol.CodeOperationUncertain)
	pe.Uncertain, pe.Retryable = true, false
	return pe
}

func appendTimestamp(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
}

// newRunID is a random UUID for the synthetic run.started of a record
// whose run never recorded one (its run id was never shown to anyone).
func newRunID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", x[:8], x[8:12], x[12:16], x[16:20], x[20:])
}
