package runtime

import (
	"context"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// TestReconfigure: a run admitted before Reconfigure finishes on the
// provider instance it started with, a run after it uses the new one, a
// removed provider is unknown at once, and drained closes only when the
// old configuration's last run has ended.
func TestReconfigure(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	oldProv := &fakeProvider{complete: func(ctx context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &abi.CompleteOutput{Text: "old"}, nil
	}}
	env := newEnv(t, oldProv)
	held := env.start(t, req("x"), ModeJSON)
	<-started

	newProv := &fakeProvider{complete: func(context.Context, *abi.CompleteInput, TurnSink) (*abi.CompleteOutput, error) {
		return &abi.CompleteOutput{Text: "new"}, nil
	}}
	inst := *env.inst
	inst.Provider = newProv
	other := inst
	other.ID = "q"
	drained, err := env.e.Reconfigure(Options{Providers: []*ProviderInstance{&inst, &other}, MaxConcurrent: 8, MaxPerSubject: 8})
	if err != nil {
		t.Fatal(err)
	}
	env.p.Providers["q"] = true
	for _, id := range []string{"p", "q"} {
		res, err := env.start(t, req("y", func(r *protocol.RunRequest) { r.Provider = id }), ModeJSON).Wait(context.Background())
		if err != nil || res.Text != "new" {
			t.Fatalf("run on %s after Reconfigure: %v %+v", id, err, res)
		}
	}
	if a := env.e.Admission(); a.MaxConcurrent != 8 || a.MaxPerSubject != 8 {
		t.Fatalf("admission limits %+v", a)
	}
	// The tool the old configuration had is gone from the new one.
	if _, err := env.e.Start(context.Background(), env.p, req("z", withTools("conformance_lookup")), ModeJSON); protocol.CodeOf(err) != protocol.CodeUnknownTool {
		t.Fatalf("removed tool: %v", err)
	}
	select {
	case <-drained:
		t.Fatal("drained while a run of the old configuration is running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	res, err := held.Wait(context.Background())
	if err != nil || res.Text != "old" {
		t.Fatalf("held run: %v %+v", err, res)
	}
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("not drained after the old run ended")
	}
	if _, err := env.e.Reconfigure(Options{MaxConcurrent: 2, MaxPerSubject: 3}); err == nil {
		t.Fatal("per subject above total accepted")
	}
}
