package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// recLog is an EventLog that keeps what it was given and can refuse one
// event type.
type recLog struct {
	mu     sync.Mutex
	evs    []Event
	refuse string
}

func (l *recLog) Append(_ context.Context, ev Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Type == l.refuse {
		return protocol.New(protocol.CodeInternalError)
	}
	l.evs = append(l.evs, Event{Type: ev.Type, Sequence: ev.Sequence, Data: append([]byte(nil), ev.Data...)})
	return nil
}

// TestStartWithOptions: a per-run log sees every event of a JSON run with
// its data, the first step gets the given native state, and Complete adds
// the session to the result or fails the run — while a run started
// beside it without options is untouched.
func TestStartWithOptions(t *testing.T) {
	var (
		mu     sync.Mutex
		native = map[string]string{}
	)
	env := newEnv(t, &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		mu.Lock()
		native[in.Messages[len(in.Messages)-1].Content] = string(in.Native)
		mu.Unlock()
		return &abi.CompleteOutput{Text: "ok", Native: json.RawMessage(`{"next":1}`)}, nil
	}})

	lg := &recLog{}
	var gotNative string
	run, err := env.e.StartWith(context.Background(), env.p, req("with"), ModeJSON, StartOptions{
		Log:    lg,
		Native: json.RawMessage(`{"prev":1}`),
		Complete: func(res *protocol.RunResult, n json.RawMessage) error {
			gotNative = string(n)
			res.Session = json.RawMessage(`{"id":"s","revision":1}`)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	plain := env.start(t, req("plain"), ModeJSON)
	res, err := run.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Session) != `{"id":"s","revision":1}` || gotNative != `{"next":1}` || string(run.Native()) != `{"next":1}` {
		t.Fatalf("session %s, native at complete %s, Native() %s", res.Session, gotNative, run.Native())
	}
	pres, err := plain.Wait(context.Background())
	if err != nil || pres.Session != nil {
		t.Fatalf("plain run: %v %s", err, pres.Session)
	}
	if native["with"] != `{"prev":1}` || native["plain"] != "" {
		t.Fatalf("native inputs %q", native)
	}
	var types []string
	for i, ev := range lg.evs {
		if ev.Sequence != int64(i+1) || !json.Valid(ev.Data) {
			t.Fatalf("event %d: seq %d data %q", i, ev.Sequence, ev.Data)
		}
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, " "); got != "run.started step.started text.delta run.completed" {
		t.Fatalf("logged %s", got)
	}
	if !strings.Contains(string(lg.evs[len(lg.evs)-1].Data), `"session":{"id":"s","revision":1}`) {
		t.Fatalf("run.completed without the session: %s", lg.evs[len(lg.evs)-1].Data)
	}

	// Complete's error fails the run with its code.
	run, err = env.e.StartWith(context.Background(), env.p, req("fail"), ModeJSON, StartOptions{
		Complete: func(*protocol.RunResult, json.RawMessage) error {
			return protocol.New(protocol.CodeSessionContextLimit)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Wait(context.Background())
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeSessionContextLimit {
		t.Fatalf("Complete error: %v", err)
	}

	// A log refusing an event stops the run; run.started refused is an
	// error of StartWith itself.
	if _, err := env.e.StartWith(context.Background(), env.p, req("x"), ModeJSON, StartOptions{Log: &recLog{refuse: EventRunStarted}}); err == nil {
		t.Fatal("run started although its log refused run.started")
	}
}

// TestValidateWithoutStarting: Validate answers what Start would before
// admission, and starts nothing; an idempotency key is refused unless the
// engine was told a wrapper handles keys.
func TestValidateWithoutStarting(t *testing.T) {
	env := newEnv(t, conformanceProvider(false))
	if err := env.e.Validate(env.p, req("x")); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := env.e.Validate(&Principal{Subject: "bob"}, req("x")); protocol.CodeOf(err) != protocol.CodeForbidden {
		t.Fatalf("ungranted: %v", err)
	}
	if err := env.e.Validate(env.p, req("x", func(r *protocol.RunRequest) { r.Provider = "nope" })); protocol.CodeOf(err) != protocol.CodeUnknownProvider {
		t.Fatalf("unknown provider: %v", err)
	}
	key := func(r *protocol.RunRequest) { k := "k1"; r.IdempotencyKey = &k }
	if err := env.e.Validate(env.p, req("x", key)); protocol.CodeOf(err) != protocol.CodeIdempotencyUnavailable {
		t.Fatalf("key without a store: %v", err)
	}
	if env.e.Running() != 0 {
		t.Fatal("Validate admitted a run")
	}
	withKeys := newEnv(t, conformanceProvider(false), func(o *Options, _ *ProviderInstance) { o.IdempotencyKeys = true })
	if err := withKeys.e.Validate(withKeys.p, req("x", key)); err != nil {
		t.Fatalf("key with IdempotencyKeys: %v", err)
	}
}
