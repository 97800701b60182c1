package client

import (
	"context"
	"encoding/json"
	"time"

	"adhost/runtime/protocol"
)

// Job states (wire-extensions §2.3).
const (
	JobQueued      = "queued"
	JobRunning     = "running"
	JobCompleted   = "completed"
	JobFailed      = "failed"
	JobCancelled   = "cancelled"
	JobInterrupted = "interrupted"
)

// JobInfo is a validated JobInfo (wire-extensions §2.1).
type JobInfo struct {
	ID              string
	RunID           string
	Provider        string
	Model           string
	State           string
	Cursor          int64
	CancelRequested bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ExpiresAt       *time.Time // set exactly when the job is terminal
}

// Terminal reports whether the job has ended.
func (j *JobInfo) Terminal() bool { return jobTerminal(j.State) }

func jobTerminal(s string) bool {
	switch s {
	case JobCompleted, JobFailed, JobCancelled, JobInterrupted:
		return true
	}
	return false
}

// JobEventPage is a validated page of a job's committed events.
type JobEventPage struct {
	Job        JobInfo
	Events     []Event
	NextCursor int64
	HasMore    bool
}

// MaxJobPageEvents is the largest page a host returns (and the default).
const MaxJobPageEvents = 100

// SubmitJob calls POST /v1/jobs/submit: the job keyed key (per subject)
// running req, or the job already accepted under key for the same request.
// A lost answer proves nothing: submit again with the same key and request
// to find the job. The answer must describe req's provider and model.
func (c *Client) SubmitJob(ctx context.Context, key string, req *protocol.RunRequest) (*JobInfo, error) {
	if req == nil {
		return nil, newError(protocol.CodeInvalidRequest, "the job request is nil")
	}
	body, err := c.postOp(ctx, "/v1/jobs/submit", map[string]any{"key": key, "request": req})
	if err != nil {
		return nil, err
	}
	j, err := validateJobInfo(body)
	if err == nil && (j.Provider != req.Provider || j.Model != req.Model) {
		err = fieldError("the job's provider or model is not the request's")
	}
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return j, nil
}

// ReadJob calls POST /v1/jobs/read.
func (c *Client) ReadJob(ctx context.Context, id string) (*JobInfo, error) {
	return c.jobOp(ctx, "/v1/jobs/read", id)
}

// CancelJob calls POST /v1/jobs/cancel; the answer is the job after the
// cancel was recorded (a running job ends later, run.cancelled).
func (c *Client) CancelJob(ctx context.Context, id string) (*JobInfo, error) {
	return c.jobOp(ctx, "/v1/jobs/cancel", id)
}

func (c *Client) jobOp(ctx context.Context, path, id string) (*JobInfo, error) {
	body, err := c.postOp(ctx, path, map[string]string{"id": id})
	if err != nil {
		return nil, err
	}
	j, err := validateJobInfo(body)
	if err == nil && j.ID != id {
		err = fieldError("job.id is not the one asked for")
	}
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return j, nil
}

// JobEvents calls POST /v1/jobs/events for the events after sequence
// after (0: from the start), at most limit of them (0: the host's
// default, 100). The page is checked as a piece of one run's stream: it
// continues at after+1 without gaps, belongs to the job's run, holds no
// event after a terminal one, ends in the terminal event matching the
// job's state when it reaches a finished job's cursor, and carries no
// event a job cannot have (extension events, unknown ones even when
// optional: a job log is the complete stream).
func (c *Client) JobEvents(ctx context.Context, id string, after int64, limit int) (*JobEventPage, error) {
	args := map[string]any{"id": id, "after": after}
	if limit > 0 {
		args["limit"] = limit
	}
	body, err := c.postOp(ctx, "/v1/jobs/events", args)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = MaxJobPageEvents
	}
	p, err := validateJobPage(body, id, after, limit)
	if err != nil {
		return nil, invalidResponse("%s", err)
	}
	return p, nil
}

// validateJobInfo checks a JobInfo and its invariants (§2.1). Unknown
// members (ones differing only by case too) are ignored.
func validateJobInfo(raw json.RawMessage) (*JobInfo, error) {
	m, ok := asObject(raw)
	if !ok {
		return nil, fieldError("the job is not an object")
	}
	var j JobInfo
	if j.ID, ok = asString(m["id"]); !ok || !isLowerUUID(j.ID) {
		return nil, fieldError("job.id is not a lowercase UUID")
	}
	if j.RunID, ok = asString(m["runId"]); !ok || !isLowerUUID(j.RunID) {
		return nil, fieldError("job.runId is not a lowercase UUID")
	}
	if j.Provider, ok = asString(m["provider"]); !ok || !protocol.IsInstanceID(j.Provider) {
		return nil, fieldError("job.provider is invalid")
	}
	if j.Model, ok = asString(m["model"]); !ok || !protocol.IsModelID(j.Model) {
		return nil, fieldError("job.model is invalid")
	}
	switch j.State, _ = asString(m["state"]); j.State {
	case JobQueued, JobRunning, JobCompleted, JobFailed, JobCancelled, JobInterrupted:
	default:
		return nil, fieldError("job.state is invalid")
	}
	if j.Cursor, ok = asSafeInt(m["cursor"]); !ok || j.Cursor < 0 {
		return nil, fieldError("job.cursor is not a non-negative integer")
	}
	if j.CancelRequested, ok = asBool(m["cancelRequested"]); !ok {
		return nil, fieldError("job.cancelRequested is not a boolean")
	}
	if j.CreatedAt, ok = asWireTime(m["createdAt"]); !ok {
		return nil, fieldError("job.createdAt is not a millisecond UTC timestamp")
	}
	if j.UpdatedAt, ok = asWireTime(m["updatedAt"]); !ok || j.UpdatedAt.Before(j.CreatedAt) {
		return nil, fieldError("job.updatedAt is invalid or before createdAt")
	}
	raw, present := m["expiresAt"]
	switch {
	case !j.Terminal() && present:
		return nil, fieldError("job.expiresAt is set on a job that has not ended")
	case j.Terminal():
		t, ok := asWireTime(raw)
		if !present || !ok || !t.After(j.UpdatedAt) {
			return nil, fieldError("job.expiresAt is missing or not after updatedAt")
		}
		j.ExpiresAt = &t
	}
	switch {
	case j.State == JobQueued && j.Cursor != 0:
		return nil, fieldError("a queued job has events")
	case j.Terminal() && j.Cursor < 2:
		return nil, fieldError("an ended job has fewer than two events")
	}
	return &j, nil
}

// jobEndEvent is the terminal event type of each ended state.
var jobEndEvent = map[string]string{
	JobCompleted:   EventRunCompleted,
	JobFailed:      EventRunFailed,
	JobCancelled:   EventRunCancelled,
	JobInterrupted: EventRunFailed,
}

func validateJobPage(body []byte, id string, after int64, limit int) (*JobEventPage, error) {
	m, ok := parseObject(body)
	if !ok {
		return nil, fieldError("the page is not an object")
	}
	j, err := validateJobInfo(m["job"])
	if err != nil {
		return nil, err
	}
	if j.ID != id {
		return nil, fieldError("job.id is not the one asked for")
	}
	p := &JobEventPage{Job: *j}
	if p.NextCursor, ok = asSafeInt(m["nextCursor"]); !ok {
		return nil, fieldError("nextCursor is not an integer")
	}
	if p.HasMore, ok = asBool(m["hasMore"]); !ok {
		return nil, fieldError("hasMore is not a boolean")
	}
	items, ok := asArray(m["events"])
	if !ok {
		return nil, fieldError("events is not an array")
	}
	switch {
	case len(items) > limit:
		return nil, fieldError("the page has more events than the limit")
	case after > j.Cursor:
		return nil, fieldError("the page starts after the job's cursor")
	case len(items) == 0 && after < j.Cursor:
		return nil, fieldError("an empty page before the job's cursor")
	}
	// The page continues the run's stream at after+1: the stream
	// validator, seeded with where the page starts.
	v := &validator{req: &protocol.RunRequest{Provider: j.Provider, Model: j.Model}, seq: after}
	if after > 0 {
		v.runID = j.RunID
	}
	last := ""
	for i, raw := range items {
		if last != "" && jobTerminal(stateOfEvent(last)) {
			return nil, fieldError("an event follows the terminal event")
		}
		ev, deliver, err := v.event(raw)
		if err != nil {
			return nil, fieldError("events[" + itoa(i) + "]: " + err.Error())
		}
		if !deliver {
			return nil, fieldError("events[" + itoa(i) + "]: an event a job log cannot hold")
		}
		if ev.RunID != j.RunID {
			return nil, fieldError("events[" + itoa(i) + "]: runId is not the job's")
		}
		if ev.Type == EventApprovalRequested || ev.Type == EventApprovalResolved || ev.Type == EventToolExecutionRequested {
			return nil, fieldError("events[" + itoa(i) + "]: jobs have no " + ev.Type)
		}
		if ev.Sequence > j.Cursor {
			return nil, fieldError("events[" + itoa(i) + "]: past the job's cursor")
		}
		last = ev.Type
		if ev.Terminal() && ev.Sequence != j.Cursor {
			return nil, fieldError("events[" + itoa(i) + "]: a terminal event before the cursor")
		}
		if ev.Terminal() {
			if err := checkJobEnd(j, &ev); err != nil {
				return nil, err
			}
		}
		p.Events = append(p.Events, ev)
	}
	want := after
	if n := len(p.Events); n > 0 {
		want = p.Events[n-1].Sequence
	}
	switch {
	case p.NextCursor != want:
		return nil, fieldError("nextCursor is not the last sequence of the page")
	case p.HasMore != (p.NextCursor < j.Cursor):
		return nil, fieldError("hasMore does not match nextCursor and the job's cursor")
	case j.Terminal() && p.NextCursor == j.Cursor && len(p.Events) > 0 && !p.Events[len(p.Events)-1].Terminal():
		return nil, fieldError("the page reaches the ended job's cursor without its terminal event")
	}
	return p, nil
}

// checkJobEnd matches a terminal event with the job's state: the event of
// the state, and for an interrupted job exactly JOB_INTERRUPTED with
// outcome uncertain.
func checkJobEnd(j *JobInfo, ev *Event) error {
	if !j.Terminal() || jobEndEvent[j.State] != ev.Type {
		return fieldError("the terminal event " + ev.Type + " does not match job state " + j.State)
	}
	interrupted := ev.Error != nil && ev.Error.Code == protocol.CodeJobInterrupted
	if (j.State == JobInterrupted) != interrupted {
		return fieldError("JOB_INTERRUPTED and the interrupted state go together")
	}
	if interrupted && (ev.Error.Outcome != protocol.OutcomeUncertain || ev.Error.Retryable) {
		return fieldError("an interruption must be uncertain and not retryable")
	}
	if interrupted {
		// An interrupted run.failed carries an error and nothing else.
		if m, ok := parseObject(ev.Raw); ok {
			if _, has := m["result"]; has {
				return fieldError("the interruption carries a result")
			}
		}
	}
	return nil
}

// stateOfEvent is non-empty ("completed" …) for a terminal event type.
func stateOfEvent(typ string) string {
	switch typ {
	case EventRunCompleted:
		return JobCompleted
	case EventRunFailed:
		return JobFailed
	case EventRunCancelled:
		return JobCancelled
	}
	return ""
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
