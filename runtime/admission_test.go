package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// TestAdmissionLimitsAtTheirEdges: the concurrency limits are honoured as
// configured, above the defaults too, and refused (never changed) out of
// range.
func TestAdmissionLimitsAtTheirEdges(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		total, perSubject     int
		wantTotal, wantPerSub int
	}{
		{"defaults", 0, 0, DefaultMaxConcurrent, DefaultMaxPerSubject},
		{"per subject 32 of 32", 32, 32, 32, 32},
		{"per subject 1", 5, 1, 5, 1},
		{"total 1", 1, 1, 1, 1},
		{"above the defaults", 64, 40, 64, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, blocking(), func(o *Options, _ *ProviderInstance) {
				o.MaxConcurrent, o.MaxPerSubject = tc.total, tc.perSubject
			})
			var runs []*Run
			defer func() {
				for _, r := range runs {
					r.Cancel(nil)
					_, _ = r.Wait(context.Background())
				}
			}()
			// One subject takes its whole limit; the next run of it is BUSY.
			for i := range tc.wantPerSub {
				r, err := env.e.Start(context.Background(), env.p, req("x"), ModeJSON)
				if err != nil {
					t.Fatalf("run %d of %d for one subject: %v", i+1, tc.wantPerSub, err)
				}
				runs = append(runs, r)
			}
			if _, err := env.e.Start(context.Background(), env.p, req("x"), ModeJSON); protocol.CodeOf(err) != protocol.CodeBusy {
				t.Fatalf("run %d of one subject: %v, want BUSY", tc.wantPerSub+1, err)
			}
			// Other subjects fill the total; one more is BUSY.
			for i := len(runs); i < tc.wantTotal; i++ {
				p := &Principal{Subject: fmt.Sprintf("other-%d", i), Providers: env.p.Providers}
				r, err := env.e.Start(context.Background(), p, req("x"), ModeJSON)
				if err != nil {
					t.Fatalf("run %d of total %d: %v", i+1, tc.wantTotal, err)
				}
				runs = append(runs, r)
			}
			p := &Principal{Subject: "one-more", Providers: env.p.Providers}
			if _, err := env.e.Start(context.Background(), p, req("x"), ModeJSON); protocol.CodeOf(err) != protocol.CodeBusy {
				t.Fatalf("run %d of total %d: %v, want BUSY", tc.wantTotal+1, tc.wantTotal, err)
			}
		})
	}
}

func TestAdmissionLimitsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		total, perSubject int
		want              string
	}{
		{-1, 0, "MaxConcurrent -1"},
		{MaxConcurrentLimit + 1, 1, "MaxConcurrent 10001"},
		{4, 5, "MaxPerSubject 5 out of range 1..4"},
		{0, 33, "MaxPerSubject 33 out of range 1..32"},
		{8, -2, "MaxPerSubject -2"},
	} {
		_, err := New(Options{MaxConcurrent: tc.total, MaxPerSubject: tc.perSubject})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(MaxConcurrent %d, MaxPerSubject %d) = %v, want an error with %q", tc.total, tc.perSubject, err, tc.want)
		}
	}
	if _, err := New(Options{MaxConcurrent: MaxConcurrentLimit, MaxPerSubject: MaxConcurrentLimit}); err != nil {
		t.Errorf("the largest limits: %v", err)
	}
}

// capped is a Capacity with n units that records releases.
type capped struct {
	mu       sync.Mutex
	n, taken int
}

type unit struct {
	c    *capped
	once sync.Once
}

func (u *unit) Release() {
	u.once.Do(func() {
		u.c.mu.Lock()
		u.c.taken--
		u.c.mu.Unlock()
	})
}

func (c *capped) Reserve() (Reservation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taken >= c.n {
		return nil, protocol.New(protocol.CodeBusy)
	}
	c.taken++
	return &unit{c: c}, nil
}

func (c *capped) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.taken
}

type cappedProvider struct {
	*fakeProvider
	*capped
}

type cappedTools struct {
	*fakeTools
	*capped
}

// TestAdmissionReservesCapacity: a run reserves its provider's capacity and
// its tool set's before run.started; a full one is BUSY at Start, the
// reservation is on the run's context, and it is released when the run
// ends.
func TestAdmissionReservesCapacity(t *testing.T) {
	provCap, toolCap := &capped{n: 2}, &capped{n: 1}
	sawReservations := make(chan int, 8)
	prov := &fakeProvider{complete: func(ctx context.Context, _ *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		sawReservations <- len(ReservationsFrom(ctx))
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	env := newEnv(t, prov, func(o *Options, pi *ProviderInstance) {
		pi.Provider = cappedProvider{prov, provCap}
		for _, tl := range o.Tools {
			tl.Set = cappedTools{tl.Set.(*fakeTools), toolCap}
		}
	})
	r1 := env.start(t, req("x"), ModeStream)
	if n := <-sawReservations; n != 1 {
		t.Fatalf("run without tools carries %d reservations, want 1", n)
	}
	// With tools: the provider's unit and the tool set's.
	r2 := env.start(t, req("x", withTools("conformance_lookup")), ModeStream)
	if n := <-sawReservations; n != 2 {
		t.Fatalf("run with a tool carries %d reservations, want 2", n)
	}
	bob := &Principal{Subject: "bob", Providers: env.p.Providers, Tools: env.p.Tools}
	if _, err := env.e.Start(context.Background(), bob, req("x"), ModeStream); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("third run on a provider capped at 2: %v, want BUSY", err)
	}
	if env.e.Running() != 2 {
		t.Fatalf("a refused reservation kept its admission slot: running %d", env.e.Running())
	}
	r1.Cancel(nil)
	<-r1.Done()
	if provCap.inUse() != 1 {
		t.Fatalf("provider units after a run ended: %d, want 1", provCap.inUse())
	}
	// The tool set is full (r2 holds it): a run with the tool is BUSY and
	// gives back the provider unit it took first.
	if _, err := env.e.Start(context.Background(), bob, req("x", withTools("conformance_lookup")), ModeStream); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("run on a full tool set: %v, want BUSY", err)
	}
	if provCap.inUse() != 1 || toolCap.inUse() != 1 {
		t.Fatalf("units after a refused run: provider %d, tools %d", provCap.inUse(), toolCap.inUse())
	}
	r2.Cancel(nil)
	<-r2.Done()
	if provCap.inUse() != 0 || toolCap.inUse() != 0 {
		t.Fatalf("units after every run ended: provider %d, tools %d", provCap.inUse(), toolCap.inUse())
	}
}

// TestBufferedTurns: only a JSON-mode run without an idle timeout tells
// the provider that nobody reads its text as it streams.
func TestBufferedTurns(t *testing.T) {
	got := make(chan bool, 1)
	prov := &fakeProvider{complete: func(_ context.Context, in *abi.CompleteInput, _ TurnSink) (*abi.CompleteOutput, error) {
		got <- in.Buffered
		return &abi.CompleteOutput{Text: "ok", FinishReason: "stop"}, nil
	}}
	env := newEnv(t, prov)
	idle := func(r *protocol.RunRequest) { ms := int64(60_000); r.IdleTimeoutMs = &ms }
	for _, tc := range []struct {
		name string
		mode Mode
		mods []func(*protocol.RunRequest)
		want bool
	}{
		{"json", ModeJSON, nil, true},
		{"json with idle timeout", ModeJSON, []func(*protocol.RunRequest){idle}, false},
		{"stream", ModeStream, nil, false},
	} {
		run := env.start(t, req("x", tc.mods...), tc.mode)
		if b := <-got; b != tc.want {
			t.Errorf("%s: Buffered = %v, want %v", tc.name, b, tc.want)
		}
		if tc.mode == ModeStream {
			collect(t, run)
		} else if _, err := run.Wait(t.Context()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}
