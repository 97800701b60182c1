package jobs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

// Job states (wire-extensions §2.3).
const (
	StateQueued      = "queued"
	StateRunning     = "running"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateCancelled   = "cancelled"
	StateInterrupted = "interrupted"
)

func terminalState(s string) bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateInterrupted:
		return true
	}
	return false
}

const (
	keyMaint       = "jobs/v1/lease" // the maintenance lease (see doc)
	prefixKey      = "jobs/v1/key/"
	prefixRecord   = "jobs/v1/job/"
	prefixEvents   = "jobs/v1/ev/"
	prefixQueue    = "jobs/v1/q/"
	prefixRun      = "jobs/v1/run/"
	prefixCancel   = "jobs/v1/cx/"
	prefixExpiry   = "jobs/v1/exp/"
	prefixCapTotal = "jobs/v1/cap/h/"
	prefixCapSubj  = "jobs/v1/cap/s/"
	// migratedOwner names the counter keys the first host to open a store
	// without counters writes from the records (see migrate).
	migratedOwner = "migrated"
)

func recordKey(id string) string { return prefixRecord + id }
func eventLog(id string) string  { return prefixEvents + id }
func queueKey(id string) string  { return prefixQueue + id }
func runLease(id string) string  { return prefixRun + id }
func cancelKey(id string) string { return prefixCancel + id }

// expiryKey sorts by expiry: 13 digits of unix milliseconds, then the id
// (or a batch's, expiry.go).
func expiryKey(ms int64, id string) string {
	return prefixExpiry + fmt.Sprintf("%013d", max(ms, 0)) + "-" + id
}

// expiryOf parses an expiry key: its time and job id.
func expiryOf(key string) (int64, string, bool) {
	rest := strings.TrimPrefix(key, prefixExpiry)
	if len(rest) < 15 || rest[13] != '-' {
		return 0, "", false
	}
	ms, err := strconv.ParseInt(rest[:13], 10, 64)
	return ms, rest[14:], err == nil
}

// subjectPrefix holds a subject's capacity keys (one per host).
func subjectPrefix(subject string) string {
	h := sha256.Sum256([]byte(subject))
	return prefixCapSubj + hex.EncodeToString(h[:]) + "/"
}

// queued is the value of a queue entry: what fair dispatch orders by,
// without reading the record.
type queued struct {
	Subject string `json:"s"`
	Created int64  `json:"t"` // unix ms
}

// keyHash names a subject's key in the store: client strings never reach a
// durable key (they may hold any character), and the length prefix keeps
// ("a:b","c") and ("a","b:c") apart.
func keyHash(subject, key string) string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(subject))))
	h.Write([]byte{':'})
	h.Write([]byte(subject))
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// claim is the value of a key claim.
type claim struct {
	ID          string `json:"id"`
	Fingerprint string `json:"fp"`
	// Created (unix ms) tells the maintenance pass a claim whose record
	// a submission on another host is about to write from one a crash
	// left behind.
	Created int64 `json:"t,omitempty"`
}

// record is a job as stored. A tombstone keeps only what the key rules and
// capacity need (§2.5): id, subject, key hash, fingerprint, state and
// expiry.
type record struct {
	ID              string          `json:"id"`
	Subject         string          `json:"subject"`
	KeyHash         string          `json:"keyHash"`
	Fingerprint     string          `json:"fingerprint"`
	State           string          `json:"state"`
	ExpiresAt       int64           `json:"expiresAt,omitempty"` // unix ms; terminal only
	Tomb            bool            `json:"tomb,omitempty"`
	RunID           string          `json:"runId,omitempty"`
	Provider        string          `json:"provider,omitempty"`
	Model           string          `json:"model,omitempty"`
	Tools           []string        `json:"tools,omitempty"`
	Request         json.RawMessage `json:"request,omitempty"`
	Credential      string          `json:"credential,omitempty"` // SHA-256 hex of the bearer
	HostID          string          `json:"hostId,omitempty"`
	AccountID       string          `json:"accountId,omitempty"`
	Cursor          uint64          `json:"cursor,omitempty"` // terminal only (see doc)
	EventBytes      int64           `json:"eventBytes,omitempty"`
	CancelRequested bool            `json:"cancelRequested,omitempty"`
	CreatedAt       int64           `json:"createdAt,omitempty"`
	UpdatedAt       int64           `json:"updatedAt,omitempty"`
	// Owner and Token name the worker running the job and its per-job
	// lease token, written with the queued → running transition.
	Owner string `json:"owner,omitempty"`
	Token uint64 `json:"token,omitempty"`
	// Ending marks a queued job whose synthetic end (cancel, failed
	// dispatch check) is being appended: only such a queued record may
	// have a non-empty log (see doc).
	Ending bool `json:"ending,omitempty"`
	// Reserved is what the job counts in the shared byte counter
	// (jobs/v1/cap/all) besides liveReserve.
	Reserved int64 `json:"reserved,omitempty"`
}

func (r *record) tombstone() record {
	return record{ID: r.ID, Subject: r.Subject, KeyHash: r.KeyHash, Fingerprint: r.Fingerprint,
		State: r.State, ExpiresAt: r.ExpiresAt, Tomb: true}
}

// Info is the wire JobInfo (§2.1).
type Info struct {
	ID              string
	RunID           string
	Provider        string
	Model           string
	State           string
	Cursor          uint64
	CancelRequested bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ExpiresAt       time.Time // zero unless terminal
}

type infoJSON struct {
	ID              string  `json:"id"`
	RunID           string  `json:"runId"`
	Provider        string  `json:"provider"`
	Model           string  `json:"model"`
	State           string  `json:"state"`
	Cursor          uint64  `json:"cursor"`
	CancelRequested bool    `json:"cancelRequested"`
	CreatedAt       string  `json:"createdAt"`
	UpdatedAt       string  `json:"updatedAt"`
	ExpiresAt       *string `json:"expiresAt,omitempty"`
}

// MarshalJSON renders the wire shape: UTC millisecond timestamps, expiresAt
// only for a terminal job.
func (i Info) MarshalJSON() ([]byte, error) {
	v := infoJSON{ID: i.ID, RunID: i.RunID, Provider: i.Provider, Model: i.Model, State: i.State,
		Cursor: i.Cursor, CancelRequested: i.CancelRequested,
		CreatedAt: timestamp(i.CreatedAt), UpdatedAt: timestamp(i.UpdatedAt)}
	if !i.ExpiresAt.IsZero() {
		e := timestamp(i.ExpiresAt)
		v.ExpiresAt = &e
	}
	return json.Marshal(v)
}

// Page is the wire JobEventPage (§2.1). Events are the committed event
// objects, byte for byte as the run emitted them.
type Page struct {
	Job        Info              `json:"job"`
	Events     []json.RawMessage `json:"events"`
	NextCursor uint64            `json:"nextCursor"`
	HasMore    bool              `json:"hasMore"`
}

const timestampLayout = "2006-01-02T15:04:05.000Z"

func timestamp(t time.Time) string { return t.UTC().Format(timestampLayout) }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// synthetic is an event the store writes itself (no run produced it):
// run.started before a terminal event of a job that never ran, and the
// terminal events of cancel, failed dispatch checks and interruption. The
// shapes are the engine's (runtime/event.go): envelope, then payload.
type synthetic struct {
	Type      string              `json:"type"`
	RunID     string              `json:"runId"`
	Sequence  uint64              `json:"sequence"`
	Timestamp string              `json:"timestamp"`
	Provider  string              `json:"provider,omitempty"`
	Model     string              `json:"model,omitempty"`
	Error     *protocol.ErrorInfo `json:"error,omitempty"`
}

func syntheticStarted(r *record, seq uint64, now time.Time) []byte {
	b, _ := json.Marshal(synthetic{Type: runtime.EventRunStarted, RunID: r.RunID, Sequence: seq,
		Timestamp: timestamp(now), Provider: r.Provider, Model: r.Model})
	return b
}

func syntheticEnd(r *record, typ string, seq uint64, now time.Time, pe *protocol.Error) []byte {
	info := pe.Info()
	b, _ := json.Marshal(synthetic{Type: typ, RunID: r.RunID, Sequence: seq, Timestamp: timestamp(now), Error: &info})
	return b
}

// interruptedError is the run.failed error of an interrupted job.
func interruptedError() *protocol.Error {
	pe := protocol.New(protocol.CodeJobInterrupted)
	pe.Retryable, pe.Uncertain = false, true
	return pe
}

// eventType reads the type of a committed event.
func eventType(data []byte) string {
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Type
}

// eventTime is the timestamp of an encoded event in Unix milliseconds, 0
// when it has none that parses.
func eventTime(data []byte) int64 {
	var v struct {
		Timestamp string `json:"timestamp"`
	}
	if json.Unmarshal(data, &v) != nil {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, v.Timestamp)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// stateOf is the job state a terminal event type ends in.
func stateOf(typ string) string {
	switch typ {
	case runtime.EventRunCompleted:
		return StateCompleted
	case runtime.EventRunCancelled:
		return StateCancelled
	case runtime.EventRunFailed:
		return StateFailed
	}
	return ""
}

// newUUID returns a random (version 4) lowercase UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// storeError turns a failed store operation into its wire error: a lost
// CAS or append race means another owner took over (JOB_LEASE_LOST), and
// anything unacknowledged is uncertain.
func storeError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	var out *protocol.Error
	switch {
	case errors.Is(err, durable.ErrRevision), errors.Is(err, durable.ErrSequence), errors.Is(err, durable.ErrFenced):
		out = protocol.Wrap(protocol.CodeJobLeaseLost, err)
		out.Uncertain = true
	case errors.Is(err, durable.ErrClosed):
		out = protocol.Wrap(protocol.CodeJobStoreClosed, err)
	case errors.Is(err, durable.ErrTooLarge):
		out = protocol.Wrap(protocol.CodeJobRecordLimit, err)
	default:
		out = protocol.Wrap(protocol.CodeJobStoreError, err)
		out.Uncertain = true
	}
	return out
}
