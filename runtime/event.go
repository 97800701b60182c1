package runtime

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// Event types of wire protocol 1.0 (wire-core §5.2). The engine emits no
// advisory (optional) events.
const (
	EventRunStarted    = "run.started"
	EventStepStarted   = "step.started"
	EventTextDelta     = "text.delta"
	EventRunProgress   = "run.progress"
	EventUsageReported = "usage.reported"
	EventToolCalled    = "tool.called"
	EventToolCompleted = "tool.completed"
	EventRunCompleted  = "run.completed"
	EventRunFailed     = "run.failed"
	EventRunCancelled  = "run.cancelled"

	// Required events of the extensions a request opted into
	// (wire-extensions §1.4): never optional, never sent to a request
	// without `approvals` / `applicationTools`.
	EventApprovalRequested      = "approval.requested"
	EventApprovalResolved       = "approval.resolved"
	EventToolExecutionRequested = "tool.execution.requested"
)

// Progress phases of run.progress.
const (
	PhaseModel = "model"
	PhaseTool  = "tool"
)

// Event is one committed event of a run. Data is the compact, single-line
// JSON of the whole event object (envelope and payload side by side), ready
// to be framed: the transport never re-encodes it.
type Event struct {
	Type     string
	Sequence int64
	// RunID is the run's id, for a log that does not read Data.
	RunID string
	// At is when the event was emitted, the time its wire timestamp
	// gives, for a log that does not read Data (telemetry's spans begin
	// and end at their events). Zero for an event not emitted by a run
	// (a recorded event replayed).
	At time.Time
	// Data is the event's wire JSON; nil for a JSON-mode run whose logs
	// are all TypesOnly (nobody reads it).
	Data []byte
	text int // length of a text.delta's text (the queue's text bound)
}

// Terminal reports whether ev ends its run.
func (ev Event) Terminal() bool { return isTerminal(ev.Type) }

func isTerminal(typ string) bool {
	return typ == EventRunCompleted || typ == EventRunFailed || typ == EventRunCancelled
}

// payload is an event before it gets its sequence number and encoding. Only
// the fields of its type are set.
type payload struct {
	typ    string
	ts     time.Time
	text   string // text.delta
	step   int    // step.started, usage.reported
	phase  string // run.progress
	usage  *protocol.Usage
	call   *abi.ToolCall
	callID string          // tool.completed
	output json.RawMessage // tool.completed; compact valid JSON
	result *protocol.RunResult
	err    *protocol.ErrorInfo
	// run.started
	provider, model string
	// extension events: one payload field holding compact JSON
	extField string
	ext      json.RawMessage
}

// timestampLayout is UTC with exactly millisecond precision (wire-core §5.1).
const timestampLayout = "2006-01-02T15:04:05.000Z"

// appendTimestamp appends t in timestampLayout. Written out by hand: it is
// on every event, and time.AppendFormat costs several times more.
func appendTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(dst, timestampLayout)
	}
	h, mi, s := t.Clock()
	ms := t.Nanosecond() / 1e6
	dst = append(dst,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-',
		byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':',
		byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
	return dst
}

// formatTimestamp renders t as the wire timestamp.
func formatTimestamp(t time.Time) string {
	return string(appendTimestamp(make([]byte, 0, len(timestampLayout)), t))
}

// encodeEvent renders p as the event's JSON object. The envelope and the hot
// payloads are written by hand (text.delta dominates a streamed run); the
// structured payloads go through encoding/json.
func encodeEvent(runID string, seq int64, p *payload) []byte {
	n := 96 + len(runID) + len(p.typ)
	if p.typ == EventTextDelta {
		n += len(p.text) + len(p.text)/8
	}
	b := make([]byte, 0, n)
	b = append(b, `{"type":`...)
	b = appendString(b, p.typ)
	b = append(b, `,"runId":`...)
	b = appendString(b, runID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"timestamp":"`...)
	b = appendTimestamp(b, p.ts)
	b = append(b, '"')
	switch p.typ {
	case EventTextDelta:
		b = append(b, `,"text":`...)
		b = appendString(b, p.text)
	case EventRunProgress:
		b = append(b, `,"phase":`...)
		b = appendString(b, p.phase)
	case EventStepStarted:
		b = append(b, `,"step":`...)
		b = strconv.AppendInt(b, int64(p.step), 10)
	case EventRunStarted:
		b = append(b, `,"provider":`...)
		b = appendString(b, p.provider)
		b = append(b, `,"model":`...)
		b = appendString(b, p.model)
	case EventUsageReported:
		b = append(b, `,"step":`...)
		b = strconv.AppendInt(b, int64(p.step), 10)
		b = append(b, `,"usage":`...)
		b = appendMarshal(b, p.usage)
	case EventToolCalled:
		b = append(b, `,"call":`...)
		b = appendMarshal(b, p.call)
	case EventToolCompleted:
		b = append(b, `,"callId":`...)
		b = appendString(b, p.callID)
		b = append(b, `,"output":`...)
		b = append(b, p.output...) // compacted and validated before
	case EventRunCompleted:
		b = append(b, `,"result":`...)
		// By hand, the same bytes json.Marshal writes (see appendMarshal).
		if p.result == nil {
			b = append(b, "null"...)
		} else if r, err := protocol.AppendRunResult(b, p.result, true); err == nil {
			b = r
		} else {
			b = append(b, "null"...)
		}
	case EventRunFailed, EventRunCancelled:
		b = append(b, `,"error":`...)
		b = appendMarshal(b, p.err)
	default:
		if p.extField != "" {
			b = append(b, ',')
			b = appendString(b, p.extField)
			b = append(b, ':')
			b = append(b, p.ext...) // compact JSON built by the feature
		}
	}
	return append(b, '}')
}

// appendMarshal appends the compact JSON of v. The values passed here are
// plain structs of strings, numbers and validated raw JSON, for which
// encoding/json cannot fail; a failure would be a programming error and
// yields null rather than a malformed event.
func appendMarshal(b []byte, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, j...)
}

// appendString appends s as a JSON string the way encoding/json does, minus
// HTML escaping. The result never contains a raw newline, so an event stays
// on one SSE data line.
func appendString(b []byte, s string) []byte { return protocol.AppendJSONString(b, s, false) }

// jsonStringLen is len(appendString(nil, s)) without building it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				n++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
