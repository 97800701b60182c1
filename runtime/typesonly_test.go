package runtime

import (
	"context"
	"strings"
	"testing"

	"adhost/abi"
)

// typesLog is a recLog that reads only event types (TypesOnly).
type typesLog struct{ recLog }

func (*typesLog) TypesOnly() {}

// TestTypesOnlyLog: a JSON-mode run whose only log is TypesOnly gives it
// its events without Data and without text.delta (only text, which it does
// not read), and still answers its text; joined with a log that reads
// Data, both see every event, encoded.
func TestTypesOnlyLog(t *testing.T) {
	env := newEnv(t, &fakeProvider{complete: func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
		return &abi.CompleteOutput{Text: "ok"}, nil
	}})
	run1 := func(l EventLog) string {
		t.Helper()
		run, err := env.e.StartWith(context.Background(), env.p, req("x"), ModeJSON, StartOptions{Log: l})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	types := func(l *recLog, wantData bool) string {
		t.Helper()
		var out []string
		for i, ev := range l.evs {
			if ev.Sequence != int64(i+1) || (len(ev.Data) > 0) != wantData {
				t.Errorf("event %d %s: sequence %d, data %q", i, ev.Type, ev.Sequence, ev.Data)
			}
			out = append(out, ev.Type)
		}
		return strings.Join(out, " ")
	}

	only := &typesLog{}
	if text := run1(only); text != "ok" {
		t.Errorf("text %q", text)
	}
	if got := types(&only.recLog, false); got != "run.started step.started run.completed" {
		t.Errorf("TypesOnly log alone got %s", got)
	}

	only, data := &typesLog{}, &recLog{}
	if text := run1(JoinLogs(data, only)); text != "ok" {
		t.Errorf("text %q", text)
	}
	const all = "run.started step.started text.delta run.completed"
	if got := types(data, true); got != all {
		t.Errorf("data log got %s", got)
	}
	if got := types(&only.recLog, true); got != all {
		t.Errorf("TypesOnly log beside a data log got %s", got)
	}
}
