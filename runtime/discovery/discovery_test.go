package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/discovery"
	"adhost/runtime/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeProvider counts Inspect calls and answers with inspect.
type fakeProvider struct {
	calls   atomic.Int32
	inspect func(ctx context.Context) (*abi.InspectOutput, error)
}

func (f *fakeProvider) Complete(context.Context, *abi.CompleteInput, runtime.TurnSink) (*abi.CompleteOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeProvider) Inspect(ctx context.Context) (*abi.InspectOutput, error) {
	f.calls.Add(1)
	return f.inspect(ctx)
}

func answer(out *abi.InspectOutput, err error) *fakeProvider {
	return &fakeProvider{inspect: func(context.Context) (*abi.InspectOutput, error) { return out, err }}
}

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func instance(p runtime.Provider, models []string) *runtime.ProviderInstance {
	return &runtime.ProviderInstance{
		ID: "acme-api", Name: "Acme", Vendor: "acme", AuthMode: "api-key",
		Models:       models,
		Capabilities: map[string]bool{"tools": true, "textStreaming": true},
		Provider:     p,
	}
}

func newCache(t *testing.T, clk *clock) *discovery.Cache {
	c := discovery.New(discovery.Options{Now: clk.Now})
	t.Cleanup(c.Close)
	return c
}

var ready = &abi.InspectOutput{Code: discovery.CodeCatalogAvailable, Models: []string{"m1", "m2"}, Complete: true}

func TestCacheTTL(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	p := answer(ready, nil)
	inst := instance(p, nil)
	ctx := t.Context()

	h, cat := c.Get(ctx, inst, false)
	if h.Status != discovery.StatusReady || h.Code != discovery.CodeCatalogAvailable || !h.CheckedAt.Equal(clk.Now()) {
		t.Fatalf("health = %+v", h)
	}
	if cat.Source != discovery.SourceProvider || !cat.Complete || strings.Join(cat.Models, ",") != "m1,m2" {
		t.Fatalf("catalog = %+v", cat)
	}
	first := h.CheckedAt
	clk.Advance(30*time.Second - time.Millisecond)
	if h, _ := c.Get(ctx, inst, false); !h.CheckedAt.Equal(first) {
		t.Errorf("re-probed inside the TTL: %+v", h)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("calls inside TTL = %d, want 1", n)
	}
	clk.Advance(time.Millisecond)
	if h, _ := c.Get(ctx, inst, false); !h.CheckedAt.Equal(clk.Now()) {
		t.Errorf("not re-probed at the TTL: %+v", h)
	}
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("calls after TTL = %d, want 2", n)
	}
}

func TestRefreshFloor(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	p := answer(ready, nil)
	inst := instance(p, nil)
	ctx := t.Context()

	c.Get(ctx, inst, true) // nothing cached: probes
	c.Get(ctx, inst, true) // inside the 1 s floor: cached
	clk.Advance(999 * time.Millisecond)
	c.Get(ctx, inst, true)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("calls inside the floor = %d, want 1", n)
	}
	clk.Advance(time.Millisecond)
	h, _ := c.Get(ctx, inst, true) // bypasses the 30 s TTL
	if n := p.calls.Load(); n != 2 || !h.CheckedAt.Equal(clk.Now()) {
		t.Fatalf("refresh after the floor: calls = %d, health %+v", n, h)
	}
	clk.Advance(500 * time.Millisecond)
	c.Get(ctx, inst, false) // plain reads never probe inside the TTL
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("calls = %d, want 2", n)
	}
}

func TestFailureCached(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	p := answer(nil, protocol.New(protocol.CodeProviderUnreachable))
	inst := instance(p, []string{"m1"})
	ctx := t.Context()
	for range 3 {
		h, cat := c.Get(ctx, inst, false)
		if h.Status != discovery.StatusUnavailable || h.Code != discovery.CodeProviderUnreachable {
			t.Fatalf("health = %+v", h)
		}
		if cat.Source != discovery.SourceConfigured || cat.Complete || strings.Join(cat.Models, ",") != "m1" {
			t.Fatalf("catalog = %+v", cat)
		}
		clk.Advance(10 * time.Second)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("calls = %d, want 1 (failures are cached too)", n)
	}
}

func TestStaleInventoryNeverShown(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	var fail atomic.Bool
	p := &fakeProvider{inspect: func(context.Context) (*abi.InspectOutput, error) {
		if fail.Load() {
			return nil, protocol.New(protocol.CodeRateLimited)
		}
		return ready, nil
	}}
	for _, tc := range []struct {
		name   string
		models []string
		want   discovery.Catalog
	}{
		{"allowlist", []string{"m1"}, discovery.Catalog{Source: discovery.SourceConfigured, Models: []string{"m1"}}},
		{"empty allowlist", []string{}, discovery.Catalog{Source: discovery.SourceConfigured, Models: []string{}}},
		{"no allowlist", nil, discovery.Catalog{Source: discovery.SourceUnavailable, Models: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail.Store(false)
			inst := instance(p, tc.models)
			inst.ID = tc.name
			if _, cat := c.Get(t.Context(), inst, false); cat.Source != discovery.SourceProvider {
				t.Fatalf("first catalog = %+v", cat)
			}
			fail.Store(true)
			clk.Advance(2 * time.Second)
			h, cat := c.Get(t.Context(), inst, true)
			if h.Code != discovery.CodeRateLimited {
				t.Fatalf("health = %+v", h)
			}
			if cat.Source != tc.want.Source || cat.Complete || strings.Join(cat.Models, ",") != strings.Join(tc.want.Models, ",") || cat.Models == nil {
				t.Fatalf("catalog after failed refresh = %+v, want %+v", cat, tc.want)
			}
			// Also on plain reads until the failure expires.
			if _, cat := c.Get(t.Context(), inst, false); cat.Source == discovery.SourceProvider {
				t.Fatalf("stale inventory shown: %+v", cat)
			}
		})
	}
}

func TestSharedInflightProbe(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	started := make(chan struct{})
	release := make(chan struct{})
	p := &fakeProvider{inspect: func(context.Context) (*abi.InspectOutput, error) {
		close(started)
		<-release
		return ready, nil
	}}
	inst := instance(p, nil)
	const readers = 16
	results := make(chan discovery.Health, readers)
	var wg sync.WaitGroup
	wg.Go(func() { h, _ := c.Get(t.Context(), inst, false); results <- h })
	<-started
	for i := range readers - 1 {
		wg.Go(func() { h, _ := c.Get(t.Context(), inst, i%2 == 0); results <- h })
	}
	close(release)
	wg.Wait()
	close(results)
	for h := range results {
		if h.Code != discovery.CodeCatalogAvailable {
			t.Errorf("reader got %+v", h)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("calls = %d, want 1 shared probe", n)
	}
}

func TestReaderCancelDoesNotCancelProbe(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	started := make(chan struct{})
	release := make(chan struct{})
	var probeCtxErr atomic.Value
	p := &fakeProvider{inspect: func(ctx context.Context) (*abi.InspectOutput, error) {
		close(started)
		<-release
		probeCtxErr.Store(fmt.Sprint(ctx.Err()))
		return ready, nil
	}}
	inst := instance(p, nil)

	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan discovery.Health)
	go func() { h, _ := c.Get(ctx, inst, false); gaveUp <- h }()
	<-started
	other := make(chan discovery.Health)
	go func() { h, _ := c.Get(t.Context(), inst, false); other <- h }()
	cancel()
	if h := <-gaveUp; h.Code != discovery.CodeDiscoveryTimeout {
		t.Errorf("cancelled reader got %+v", h)
	}
	close(release)
	if h := <-other; h.Code != discovery.CodeCatalogAvailable {
		t.Errorf("other reader got %+v", h)
	}
	if got := probeCtxErr.Load(); got != "<nil>" {
		t.Errorf("probe context error = %v, want none", got)
	}
	// The cancelled reader's answer was not cached; the probe's was.
	if h, _ := c.Get(t.Context(), inst, false); h.Code != discovery.CodeCatalogAvailable || p.calls.Load() != 1 {
		t.Errorf("cached = %+v, calls %d", h, p.calls.Load())
	}
}

func TestProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := discovery.New(discovery.Options{})
		defer c.Close()
		// A cooperative provider stops at its deadline.
		coop := &fakeProvider{inspect: func(ctx context.Context) (*abi.InspectOutput, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		start := time.Now()
		h, _ := c.Get(context.Background(), instance(coop, nil), false)
		if h.Code != discovery.CodeDiscoveryTimeout || h.Status != discovery.StatusUnavailable {
			t.Fatalf("health = %+v", h)
		}
		if d := time.Since(start); d != discovery.DefaultTimeout {
			t.Errorf("probe took %v, want the 5 s bound", d)
		}

		// A provider that ignores its context is abandoned at the deadline.
		release := make(chan struct{})
		stuck := &fakeProvider{inspect: func(context.Context) (*abi.InspectOutput, error) {
			<-release
			return ready, nil
		}}
		inst := instance(stuck, nil)
		inst.ID = "stuck"
		h, _ = c.Get(context.Background(), inst, false)
		if h.Code != discovery.CodeDiscoveryTimeout {
			t.Fatalf("health = %+v", h)
		}
		close(release)
		synctest.Wait()
		// The late answer does not replace the recorded timeout.
		if h, _ := c.Get(context.Background(), inst, false); h.Code != discovery.CodeDiscoveryTimeout {
			t.Errorf("late answer leaked into the cache: %+v", h)
		}
	})
}

func TestCloseCancelsProbe(t *testing.T) {
	c := discovery.New(discovery.Options{})
	started := make(chan struct{})
	p := &fakeProvider{inspect: func(ctx context.Context) (*abi.InspectOutput, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	got := make(chan discovery.Health)
	go func() { h, _ := c.Get(context.Background(), instance(p, nil), false); got <- h }()
	<-started
	c.Close()
	if h := <-got; h.Code != discovery.CodeDiscoveryFailed {
		t.Errorf("health after Close = %+v", h)
	}
}

func TestInspectOutcomes(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("model-%d", i)
		}
		return out
	}
	tests := []struct {
		name       string
		prov       runtime.Provider
		wantCode   string
		wantStatus string
		wantSource string
		wantModels int
		complete   bool
	}{
		{"ready", answer(ready, nil), "CATALOG_AVAILABLE", "ready", "provider", 2, true},
		{"ready incomplete by default", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{"a"}}, nil), "CATALOG_AVAILABLE", "ready", "provider", 1, false},
		{"ready no models", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Complete: true}, nil), "CATALOG_AVAILABLE", "ready", "provider", 0, true},
		{"cli catalog", answer(&abi.InspectOutput{Code: "CLI_CATALOG_AVAILABLE", Models: []string{"a", "b"}, Complete: true}, nil), "CLI_CATALOG_AVAILABLE", "unknown", "provider", 2, true},
		{"1000 models", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: many(1000), Complete: true}, nil), "CATALOG_AVAILABLE", "ready", "provider", 1000, true},
		{"1001 models truncated", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: many(1001), Complete: true}, nil), "CATALOG_AVAILABLE", "ready", "provider", 1000, false},
		{"duplicates dropped", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: append(many(1000), "model-3"), Complete: true}, nil), "CATALOG_AVAILABLE", "ready", "provider", 1000, true},
		{"invalid model id", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{"ok", "bad id"}}, nil), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"empty model id", answer(&abi.InspectOutput{Code: "CATALOG_AVAILABLE", Models: []string{""}}, nil), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"unknown code", answer(&abi.InspectOutput{Code: "FUTURE_CODE"}, nil), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"empty code", answer(&abi.InspectOutput{}, nil), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"nil output", answer(nil, nil), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"unsupported ignores models", answer(&abi.InspectOutput{Code: "DISCOVERY_UNSUPPORTED", Models: []string{"x"}}, nil), "DISCOVERY_UNSUPPORTED", "unsupported", "unavailable", 0, false},
		{"auth required", answer(&abi.InspectOutput{Code: "AUTH_REQUIRED"}, nil), "AUTH_REQUIRED", "unauthenticated", "unavailable", 0, false},
		{"access denied", answer(&abi.InspectOutput{Code: "ACCESS_DENIED"}, nil), "ACCESS_DENIED", "unsupported", "unavailable", 0, false},
		{"cli session", answer(&abi.InspectOutput{Code: "CLI_SESSION_PRESENT"}, nil), "CLI_SESSION_PRESENT", "unknown", "unavailable", 0, false},
		{"err rate limited", answer(nil, protocol.New(protocol.CodeRateLimited)), "RATE_LIMITED", "unavailable", "unavailable", 0, false},
		{"err provider auth", answer(nil, protocol.New(protocol.CodeProviderAuth)), "AUTH_REJECTED", "unauthenticated", "unavailable", 0, false},
		{"err auth required", answer(nil, protocol.New(protocol.CodeAuthRequired)), "AUTH_REQUIRED", "unauthenticated", "unavailable", 0, false},
		{"err unreachable", answer(nil, protocol.New(protocol.CodeProviderUnreachable)), "PROVIDER_UNREACHABLE", "unavailable", "unavailable", 0, false},
		{"err malformed", answer(nil, protocol.New(protocol.CodeInvalidProviderResponse)), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"err too large", answer(nil, protocol.New(protocol.CodeResponseTooLarge)), "INVALID_DISCOVERY_RESPONSE", "unavailable", "unavailable", 0, false},
		{"err timeout", answer(nil, protocol.New(protocol.CodeTimeout)), "DISCOVERY_TIMEOUT", "unavailable", "unavailable", 0, false},
		{"err cli unavailable", answer(nil, protocol.New("CLI_UNAVAILABLE")), "CLI_UNAVAILABLE", "unavailable", "unavailable", 0, false},
		{"err provider error", answer(nil, protocol.New(protocol.CodeProviderError)), "DISCOVERY_FAILED", "unavailable", "unavailable", 0, false},
		{"err internal", answer(nil, errors.New("boom")), "DISCOVERY_FAILED", "unavailable", "unavailable", 0, false},
		{"panic", &fakeProvider{inspect: func(context.Context) (*abi.InspectOutput, error) { panic("boom") }}, "DISCOVERY_FAILED", "unavailable", "unavailable", 0, false},
		{"no provider", nil, "DISCOVERY_UNSUPPORTED", "unsupported", "unavailable", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, newClock())
			h, cat := c.Get(t.Context(), instance(tc.prov, nil), false)
			if h.Code != tc.wantCode || h.Status != tc.wantStatus {
				t.Errorf("health = %+v, want %s/%s", h, tc.wantCode, tc.wantStatus)
			}
			if st, msg, ok := discovery.HealthFor(h.Code); !ok || st != h.Status || msg != h.Message || msg == "" {
				t.Errorf("message %q is not the code's fixed text", h.Message)
			}
			if cat.Source != tc.wantSource || len(cat.Models) != tc.wantModels || cat.Complete != tc.complete || cat.Models == nil {
				t.Errorf("catalog = %s/%d/%v, want %s/%d/%v", cat.Source, len(cat.Models), cat.Complete, tc.wantSource, tc.wantModels, tc.complete)
			}
		})
	}
}

func TestCodeTable(t *testing.T) {
	want := map[string]string{
		"CATALOG_AVAILABLE": "ready",
		"AUTH_REQUIRED":     "unauthenticated", "AUTH_REJECTED": "unauthenticated", "CLI_AUTH_REQUIRED": "unauthenticated",
		"RATE_LIMITED": "unavailable", "PROVIDER_UNREACHABLE": "unavailable", "INVALID_DISCOVERY_RESPONSE": "unavailable",
		"CLI_UNAVAILABLE": "unavailable", "DISCOVERY_TIMEOUT": "unavailable", "DISCOVERY_FAILED": "unavailable",
		"ACCESS_DENIED": "unsupported", "DISCOVERY_UNSUPPORTED": "unsupported", "CLI_UPGRADE_REQUIRED": "unsupported",
		"CLI_SESSION_PRESENT": "unknown", "CLI_CATALOG_AVAILABLE": "unknown", "CLI_STATUS_UNKNOWN": "unknown",
	}
	for code, status := range want {
		st, msg, ok := discovery.HealthFor(code)
		if !ok || st != status || msg == "" {
			t.Errorf("%s = %q %q %v, want %s", code, st, msg, ok, status)
		}
	}
	if _, _, ok := discovery.HealthFor("FUTURE_PROVIDER_CONDITION"); ok {
		t.Error("unknown code accepted")
	}
}

func TestNoPrivateDataInOutput(t *testing.T) {
	const marker = "conformance-secret-marker"
	for _, err := range []error{
		errors.New(marker),
		&protocol.Error{Code: protocol.CodeProviderError, Message: marker, Err: errors.New(marker)},
		protocol.Wrap(protocol.CodeProviderAuth, errors.New(marker)),
	} {
		c := newCache(t, newClock())
		e := c.Entry(t.Context(), instance(answer(nil, err), nil), false)
		b, jerr := json.Marshal(e)
		if jerr != nil {
			t.Fatal(jerr)
		}
		if strings.Contains(string(b), marker) {
			t.Errorf("entry leaks the provider error: %s", b)
		}
	}
}

func TestProviderEntryJSON(t *testing.T) {
	checked := time.Date(2026, 3, 4, 11, 0, 0, 123_456_789, time.FixedZone("X", 3600))
	h := discovery.Health{Status: "ready", Code: "CATALOG_AVAILABLE", Message: "m", CheckedAt: checked}
	cat := discovery.Catalog{Source: "provider", Models: []string{"acme-large-2", "acme-small-1"}, Complete: true}

	inst := instance(nil, []string{"acme-large-2"})
	inst.Capabilities = map[string]bool{"tools": true, "textStreaming": true, "safeRetries": true}
	b, err := json.Marshal(discovery.NewProvider(inst, h, cat))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"acme-api","name":"Acme","vendor":"acme","authMode":"api-key","capabilities":{"safeRetries":true,"textStreaming":true,"tools":true},"models":["acme-large-2"],"health":{"status":"ready","code":"CATALOG_AVAILABLE","message":"m","checkedAt":"2026-03-04T10:00:00.123Z"},"modelCatalog":{"source":"provider","models":["acme-large-2","acme-small-1"],"complete":true}}`
	if string(b) != want {
		t.Errorf("entry\n%s\nwant\n%s", b, want)
	}

	// nil allowlist: models omitted; empty allowlist: []; missing
	// capabilities default to false; a nil catalog list encodes as [].
	for _, tc := range []struct {
		models []string
		want   string
	}{
		{nil, `"capabilities":{"textStreaming":false,"tools":false},"health"`},
		{[]string{}, `"capabilities":{"textStreaming":false,"tools":false},"models":[],"health"`},
	} {
		inst := instance(nil, tc.models)
		inst.Capabilities = nil
		b, err := json.Marshal(discovery.NewProvider(inst, h, discovery.Catalog{Source: "unavailable"}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `"modelCatalog":{"source":"unavailable","models":[],"complete":false}`) {
			t.Errorf("models %#v: %s", tc.models, b)
		}
	}
}

func TestEntries(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	a := instance(answer(ready, nil), nil)
	a.ID = "a"
	b := instance(answer(nil, protocol.New(protocol.CodeRateLimited)), []string{"x"})
	b.ID = "b"
	got := c.Entries(t.Context(), []*runtime.ProviderInstance{a, b}, false)
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" ||
		got[0].Health.Code != "CATALOG_AVAILABLE" || got[1].Health.Code != "RATE_LIMITED" ||
		got[1].ModelCatalog.Source != "configured" {
		t.Errorf("entries = %+v", got)
	}
}

func TestForget(t *testing.T) {
	clk := newClock()
	c := newCache(t, clk)
	p := answer(ready, nil)
	inst := instance(p, nil)
	c.Get(t.Context(), inst, false)
	c.Forget(inst.ID)
	c.Get(t.Context(), inst, false)
	if n := p.calls.Load(); n != 2 {
		t.Errorf("calls = %d, want 2 after Forget", n)
	}
}
