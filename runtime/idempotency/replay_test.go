package idempotency

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
)

const (
	testRunID = "0b7e8d2a-6f3c-4d1e-9a5b-2c8f7e6d5a4b"
	testTS    = "2026-12-01T10:00:00.000Z"
)

func ev(typ string, seq int, rest string) []byte {
	return []byte(`{"type":"` + typ + `","runId":"` + testRunID + `","sequence":` + itoa(int64(seq)) + `,"timestamp":"` + testTS + `"` + rest + `}`)
}

func tagged(tag byte, b []byte) durable.Record {
	return durable.Record{Data: append([]byte{tag}, b...)}
}

func types(rp *Replay) string {
	var s []string
	for i, e := range rp.Events {
		if e.Sequence != int64(i+1) {
			return "bad sequence"
		}
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

var testReq = &protocol.RunRequest{Provider: "p", Model: "m", Input: "x"}

func TestBuildReplay(t *testing.T) {
	result := []byte(`{"runId":"` + testRunID + `","provider":"p","model":"m","text":"<a&b>","usage":{},"steps":1,"finishReason":"stop"}`)
	started := ev("run.started", 1, `,"provider":"p","model":"m"`)
	for _, tc := range []struct {
		name    string
		recs    []durable.Record
		types   string
		code    protocol.Code // "" for a completed replay
		checkFn func(t *testing.T, rp *Replay)
	}{
		{
			name: "whole record, result stored once",
			recs: []durable.Record{tagged(tagEvent, started), tagged(tagEvent, ev("step.started", 2, `,"step":1`)),
				tagged(tagResult, append([]byte(testTS), result...)),
				tagged(tagCompleted, ev("run.completed", 9, "")[:len(ev("run.completed", 9, ""))-1])},
			types: "run.started,step.started,run.completed",
			checkFn: func(t *testing.T, rp *Replay) {
				want := `{"type":"run.completed","runId":"` + testRunID + `","sequence":3,"timestamp":"` + testTS + `","result":` +
					strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`).Replace(string(result)) + `}`
				if got := string(rp.Events[2].Data); got != want {
					t.Errorf("run.completed\n got %s\nwant %s", got, want)
				}
				if string(rp.Result) != string(result) {
					t.Errorf("Result %s", rp.Result)
				}
			},
		},
		{
			name:  "result without run.completed: completed from the result",
			recs:  []durable.Record{tagged(tagEvent, started), tagged(tagResult, append([]byte(testTS), result...))},
			types: "run.started,run.completed",
			checkFn: func(t *testing.T, rp *Replay) {
				var e struct {
					RunID, Timestamp string
					Result           json.RawMessage
				}
				if err := json.Unmarshal(rp.Events[1].Data, &e); err != nil || e.RunID != testRunID || e.Timestamp != testTS || len(e.Result) == 0 {
					t.Errorf("synthesised run.completed %s: %v", rp.Events[1].Data, err)
				}
			},
		},
		{
			name:  "nothing recorded: run.started synthesised, then uncertain",
			types: "run.started,run.failed",
			code:  protocol.CodeOperationUncertain,
			checkFn: func(t *testing.T, rp *Replay) {
				var e struct{ Provider, Model, RunID string }
				json.Unmarshal(rp.Events[0].Data, &e)
				if e.Provider != "p" || e.Model != "m" || len(e.RunID) != 36 {
					t.Errorf("synthesised run.started %s", rp.Events[0].Data)
				}
				if !rp.Err.Uncertain || rp.Err.Retryable {
					t.Errorf("OPERATION_UNCERTAIN %+v", rp.Err)
				}
			},
		},
		{
			name: "approvals and dispatches are not replayed; a prefix ends uncertain with the original runId",
			recs: []durable.Record{tagged(tagEvent, started), tagged(tagEvent, ev("approval.requested", 2, "")),
				tagged(tagEvent, ev("approval.resolved", 3, "")), tagged(tagEvent, ev("tool.called", 4, `,"call":{}`)),
				tagged(tagEvent, ev("tool.execution.requested", 5, ""))},
			types: "run.started,tool.called,run.failed",
			code:  protocol.CodeOperationUncertain,
			checkFn: func(t *testing.T, rp *Replay) {
				if id, _ := memberString(rp.Events[2].Data, "runId"); id != testRunID {
					t.Errorf("uncertain event's runId %q", id)
				}
			},
		},
		{
			name:  "a recorded failure keeps its code, message and outcome",
			recs:  []durable.Record{tagged(tagEvent, started), tagged(tagEvent, ev("run.failed", 2, `,"error":{"code":"TOOL_FAILED","message":"m","retryable":false,"outcome":"uncertain"}`))},
			types: "run.started,run.failed",
			code:  protocol.CodeToolFailed,
			checkFn: func(t *testing.T, rp *Replay) {
				if rp.Err.Message != "m" || !rp.Err.Uncertain {
					t.Errorf("error %+v", rp.Err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp, err := buildReplay(tc.recs, testReq)
			if err != nil {
				t.Fatal(err)
			}
			if got := types(rp); got != tc.types {
				t.Errorf("events %s, want %s", got, tc.types)
			}
			if tc.code == "" && (rp.Err != nil || rp.Result == nil) || tc.code != "" && (rp.Err == nil || rp.Err.Code != tc.code) {
				t.Errorf("outcome %+v / %s, want %q", rp.Err, rp.Result, tc.code)
			}
			tc.checkFn(t, rp)
		})
	}
}

func TestBuildReplayCorrupt(t *testing.T) {
	for _, recs := range [][]durable.Record{
		{{Data: nil}},
		{tagged('x', []byte(`{}`))},
		{tagged(tagEvent, []byte(`not json`))},
		{tagged(tagCompleted, []byte(`{"type":"run.completed"`))}, // no result before it
		{tagged(tagResult, []byte(`short`))},
	} {
		if _, err := buildReplay(recs, testReq); err == nil {
			t.Errorf("%q: no error", recs[0].Data)
		}
	}
}

// Concurrent requests with one new key: exactly one claims it; the
// others are in progress (same request) or a conflict (another one).
func TestBeginConcurrent(t *testing.T) {
	k, err := New(durable.NewMemory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := "race"
	same := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", IdempotencyKey: &key}
	other := &protocol.RunRequest{Provider: "p", Model: "m", Input: "y", IdempotencyKey: &key}
	var (
		mu      sync.Mutex
		claims  []*Claim
		codes   = map[protocol.Code]int{}
		wg      sync.WaitGroup
		release = make(chan struct{})
	)
	for i := range 32 {
		wg.Go(func() {
			<-release
			req := same
			if i%4 == 3 {
				req = other
			}
			c, rp, err := k.Begin(context.Background(), "alice", req, runtime.ModeStream)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case c != nil:
				claims = append(claims, c)
			case rp != nil:
				codes["replay"]++
			default:
				codes[protocol.CodeOf(err)]++
			}
		})
	}
	close(release)
	wg.Wait()
	if len(claims) != 1 || codes["replay"] != 0 || codes[protocol.CodeOperationInProgress]+codes[protocol.CodeIdempotencyConflict] != 31 {
		t.Fatalf("claims %d, outcomes %v", len(claims), codes)
	}
	// Another subject's key of the same name is free.
	if c, _, err := k.Begin(context.Background(), "bob", same, runtime.ModeStream); c == nil || err != nil {
		t.Errorf("bob: %v", err)
	}
	// A claim that never started gives its key back.
	claims[0].Finish()
	c, _, err := k.Begin(context.Background(), "alice", other, runtime.ModeStream)
	if c == nil || err != nil {
		t.Errorf("after the give-back: %v", err)
	}
}

// A claim's events, result and terminal make a replay; the claim's state
// is written when both the run and the answer are done.
func TestClaimLifecycle(t *testing.T) {
	st := durable.NewMemory()
	k, _ := New(st, Options{})
	key := "life"
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", IdempotencyKey: &key}
	c, _, err := k.Begin(context.Background(), "alice", req, runtime.ModeStream)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res := &protocol.RunResult{RunID: testRunID, Provider: "p", Model: "m", Text: "hi", Steps: 1, FinishReason: "stop"}
	rb, _ := protocol.AppendRunResult(nil, res, true)
	for _, e := range []runtime.Event{
		{Type: runtime.EventRunStarted, Sequence: 1, Data: ev("run.started", 1, `,"provider":"p","model":"m"`)},
		{Type: runtime.EventTextDelta, Sequence: 2, Data: ev("text.delta", 2, `,"text":"hi"`)},
	} {
		if err := c.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Complete(res, nil); err != nil {
		t.Fatal(err)
	}
	done := ev("run.completed", 3, `,"result":`+string(rb))
	if err := c.Append(ctx, runtime.Event{Type: runtime.EventRunCompleted, Sequence: 3, Data: done}); err != nil {
		t.Fatal(err)
	}
	e, _ := st.Get(ctx, recordName("alice", key))
	if !strings.Contains(string(e.Value), `"state":"running"`) {
		t.Errorf("claim before the answer: %s", e.Value)
	}
	c.Finish()
	e, _ = st.Get(ctx, recordName("alice", key))
	if !strings.Contains(string(e.Value), `"state":"finished"`) || !strings.Contains(string(e.Value), `"outcome":"run.completed"`) {
		t.Errorf("claim after the answer: %s", e.Value)
	}
	recs, _ := st.Read(ctx, recordName("alice", key), 0, 0, 0)
	if len(recs) != 3 || recs[2].Data[0] != tagCompleted {
		t.Errorf("records %d: the result is stored once, run.completed as its envelope", len(recs))
	}
	_, rp, err := k.Begin(ctx, "alice", req, runtime.ModeStream)
	if err != nil || rp == nil {
		t.Fatalf("replay: %v", err)
	}
	if got := string(rp.Events[1].Data); got != strings.Replace(string(done), `"sequence":3`, `"sequence":2`, 1) {
		t.Errorf("replayed run.completed %s", got)
	}
}

// FuzzBuildReplay: no record content panics the replay, and a replay it
// builds is contiguous from 1 and ends with exactly one terminal event.
func FuzzBuildReplay(f *testing.F) {
	f.Add([]byte("e" + string(ev("run.started", 1, `,"provider":"p","model":"m"`)) + "\x00r" + testTS + `{"runId":"x"}` + "\x00c" + `{"type":"run.completed","runId":"x","sequence":2`))
	f.Add([]byte("e" + string(ev("run.failed", 3, `,"error":{"code":"X"}`))))
	f.Add([]byte("e{\"type\":\"a\\\"\",\"sequence\":1}\x00r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []durable.Record
		for _, part := range strings.Split(string(data), "\x00") {
			recs = append(recs, durable.Record{Data: []byte(part)})
		}
		rp, err := buildReplay(recs, testReq)
		if err != nil {
			return
		}
		for i, e := range rp.Events {
			if e.Sequence != int64(i+1) {
				t.Fatalf("event %d has sequence %d", i, e.Sequence)
			}
			terminal := e.Type == runtime.EventRunCompleted || e.Type == runtime.EventRunFailed || e.Type == runtime.EventRunCancelled
			if terminal != (i == len(rp.Events)-1) {
				t.Fatalf("event %d (%s) of %d: terminal %v", i, e.Type, len(rp.Events), terminal)
			}
		}
		if (rp.Err == nil) == (rp.Result == nil) {
			t.Fatalf("outcome: err %v, result %q", rp.Err, rp.Result)
		}
	})
}
