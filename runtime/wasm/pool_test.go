package wasm

import (
	"context"
	"sync"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

func TestPoolRecycle(t *testing.T) {
	// No watchdog here: growing memory is slow under -race on a busy machine.
	e := loadProvider(t, Options{PoolSize: 2, ComputeLimit: time.Hour})
	p := newProvider(t, e, InstanceConfig{})
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || s.Warm != 2 {
		t.Fatalf("after Load: %+v", s)
	}
	first := e.x.pool.idle[0].inst
	start := first.mem.Size()
	if _, err := p.Complete(t.Context(), input("stream:a"), &sink{}); err != nil {
		t.Fatal(err)
	}
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || e.x.pool.idle[0].inst != first {
		t.Fatalf("a good call did not recycle its instance: %+v", s)
	}
	// A trap discards the instance; a warm one replaces it in the background.
	if _, err := p.Complete(t.Context(), input("panic"), &sink{}); protocol.CodeOf(err) != protocol.CodeProviderFailed {
		t.Fatal(err)
	}
	e.x.pool.wg.Wait()
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 || e.x.pool.idle[0].inst == first {
		t.Fatalf("after a trap: %+v", s)
	}
	// Growing past the high-water mark discards; memory is back to the
	// start size in the replacement.
	if _, err := p.Complete(t.Context(), input("grow:24"), &sink{}); err != nil {
		t.Fatal(err)
	}
	e.x.pool.wg.Wait()
	if s := e.x.Stats(); s.Idle != 1 || s.Live != 1 {
		t.Fatalf("after growth: %+v", s)
	}
	if got := e.x.pool.idle[0].inst.mem.Size(); got != start {
		t.Errorf("memory after recycling = %d, want start size %d", got, start)
	}
}

// hold starts a call that blocks in the guest until its context ends and
// returns once the guest is inside it; the returned stop ends it and
// returns the call's error.
func hold(t *testing.T, p runtime.Provider, ctx context.Context) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	busy, done := make(chan struct{}), make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := p.Complete(ctx, input("wait-cancel"), &sink{onProgress: func() { once.Do(func() { close(busy) }) }})
		done <- err
	}()
	select {
	case <-busy:
	case err := <-done:
		cancel()
		t.Fatalf("held call ended early: %v", err)
	}
	return func() error { cancel(); return <-done }
}

// TestPoolGrowsOnDemand: poolSize is the warm count, not a limit. With
// more calls held than poolSize another call still runs at once; once they
// end, the idle instances above poolSize are closed after the idle period.
func TestPoolGrowsOnDemand(t *testing.T) {
	const ttl = 100 * time.Millisecond
	e := loadProvider(t, Options{PoolSize: 1, IdleInstanceTTL: ttl})
	p := newProvider(t, e, InstanceConfig{})
	var stops []func() error
	for range 3 {
		stops = append(stops, hold(t, p, t.Context()))
	}
	// A fourth caller does not wait for any of them.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if out, err := p.Complete(ctx, input("stream:free"), &sink{}); err != nil || out.Text != "free" {
		t.Fatalf("call beside three held ones: %v", err)
	}
	if s := e.x.Stats(); s.InUse != 3 || s.Live != 4 || s.Cap != 0 || s.Warm != 1 {
		t.Fatalf("with three held: %+v", s)
	}
	for _, stop := range stops {
		if err := stop(); protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatalf("held call: %v", err)
		}
	}
	e.x.pool.wg.Wait() // refills after the cancelled calls' discards
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := e.x.Stats()
		if s.Idle == 1 && s.Live == 1 && s.InUse == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle instances not reaped back to poolSize: %+v", s)
		}
		time.Sleep(ttl / 4)
	}
}

// TestPoolCapAtAdmission: with an operator cap every unit is handed out by
// Reserve; a full cap refuses the next reservation (BUSY) and an
// unreserved call fails at once instead of waiting.
func TestPoolCapAtAdmission(t *testing.T) {
	e := loadProvider(t, Options{PoolSize: 1, MaxInstances: 2})
	p := newProvider(t, e, InstanceConfig{})
	c, ok := p.(runtime.Capacity)
	if !ok {
		t.Fatal("a wasm provider is not a runtime.Capacity")
	}
	r1, err := c.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve(); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("third reservation of a cap of 2: %v, want BUSY", err)
	}
	if _, err := p.Complete(t.Context(), input("stream:x"), &sink{}); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("unreserved call at a full cap: %v, want BUSY", err)
	}
	ctx1 := runtime.WithReservations(t.Context(), r1)
	ctx2 := runtime.WithReservations(t.Context(), r2)
	stop1 := hold(t, p, ctx1)
	// The other run's reserved instance is free for it.
	if out, err := p.Complete(ctx2, input("stream:two"), &sink{}); err != nil || out.Text != "two" {
		t.Fatalf("second run: %v", err)
	}
	// A second call of run 1 finds no spare unit and takes turns on its
	// own instance: it runs once the first call ends.
	got := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx1, input("stream:later"), &sink{})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second call of run 1 did not wait for its first: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := stop1(); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("second call of run 1: %v", err)
	}
	if s := e.x.Stats(); s.Live > 2 || s.Reserved != 2 {
		t.Fatalf("stats: %+v", s)
	}
	// Releasing while a call is in flight keeps the unit until it returns.
	stop2 := hold(t, p, ctx2)
	r2.Release()
	if _, err := c.Reserve(); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("reservation while a released run's call still runs: %v, want BUSY", err)
	}
	if err := stop2(); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatal(err)
	}
	r3, err := c.Reserve()
	if err != nil {
		t.Fatalf("after the call returned: %v", err)
	}
	r1.Release()
	r3.Release()
	if s := e.x.Stats(); s.Reserved != 0 || s.Live > 2 {
		t.Fatalf("after release: %+v", s)
	}
}

// TestPoolSpareUnits: parallel calls of one run use free units of the cap.
func TestPoolSpareUnits(t *testing.T) {
	e := loadProvider(t, Options{PoolSize: 1, MaxInstances: 3})
	p := newProvider(t, e, InstanceConfig{})
	r, err := p.(runtime.Capacity).Reserve()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	ctx := runtime.WithReservations(t.Context(), r)
	stops := []func() error{hold(t, p, ctx), hold(t, p, ctx), hold(t, p, ctx)}
	if s := e.x.Stats(); s.InUse != 3 || s.Reserved != 3 {
		t.Fatalf("three calls of one run on a cap of 3: %+v", s)
	}
	for _, stop := range stops {
		if err := stop(); protocol.CodeOf(err) != protocol.CodeCancelled {
			t.Fatal(err)
		}
	}
	if s := e.x.Stats(); s.Reserved != 1 {
		t.Fatalf("spare units not given back: %+v", s)
	}
}

// TestPoolCapWithRefill: a call that finds the cap's instances all live —
// one of them a background refill still being created after a discard —
// waits for that instance instead of creating one past the cap.
func TestPoolCapWithRefill(t *testing.T) {
	hold1 := make(chan struct{})
	entered := make(chan struct{}, 4)
	testHookRefill = func() {
		entered <- struct{}{}
		<-hold1
	}
	defer func() { testHookRefill = nil }()
	e := loadProvider(t, Options{PoolSize: 2, MaxInstances: 2})
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold1) }) }
	t.Cleanup(unhold) // before the extension's own cleanup, which waits for refills
	p := newProvider(t, e, InstanceConfig{})
	c := p.(runtime.Capacity)
	r1, _ := c.Reserve()
	r2, _ := c.Reserve()
	defer r1.Release()
	defer r2.Release()
	ctx1 := runtime.WithReservations(t.Context(), r1)
	ctx2 := runtime.WithReservations(t.Context(), r2)
	stop1 := hold(t, p, ctx1)
	stop2 := hold(t, p, ctx2)
	// A cancelled call's instance is discarded; with no idle instance
	// left the pool starts a refill, held here while it is under way.
	if err := stop1(); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatal(err)
	}
	<-entered
	got := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx1, input("stream:after"), &sink{})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a call completed while the cap's last instance was still being created: %v (stats %+v)", err, e.x.Stats())
	case <-time.After(50 * time.Millisecond):
	}
	if s := e.x.Stats(); s.Live > 2 {
		t.Fatalf("live %d above the cap of 2: %+v", s.Live, s)
	}
	unhold()
	if err := <-got; err != nil {
		t.Fatalf("the waiting call: %v", err)
	}
	if err := stop2(); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatal(err)
	}
	if s := e.x.Stats(); s.Live > 2 {
		t.Fatalf("live %d above the cap of 2 at the end: %+v", s.Live, s)
	}
}

// TestPoolNotifyFree: a unit given back after Reserve refused one calls the
// registered notify once (outside the pool's lock: notify may reserve), by
// a run's release and by the end of a call that held a released run's
// unit; without a refusal a release notifies nobody.
func TestPoolNotifyFree(t *testing.T) {
	e := loadProvider(t, Options{PoolSize: 1, MaxInstances: 1})
	p := newProvider(t, e, InstanceConfig{})
	c := p.(runtime.Capacity)
	notified := 0
	var again runtime.Reservation
	p.(runtime.CapacityNotifier).NotifyFree(func() {
		notified++
		// The scheduler reserves from inside notify: no deadlock.
		r, err := c.Reserve()
		if err != nil {
			t.Errorf("reserve in notify: %v", err)
			return
		}
		again = r
	})
	r1, err := c.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	r1.Release()
	if notified != 0 {
		t.Fatalf("release without a refusal notified %d times", notified)
	}
	r1, _ = c.Reserve()
	if _, err := c.Reserve(); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatalf("second reservation of a cap of 1: %v", err)
	}
	r1.Release()
	if notified != 1 || again == nil {
		t.Fatalf("notified %d times after the refused unit came back", notified)
	}
	// A released run's call still holds the unit: notify waits for it.
	stop := hold(t, p, runtime.WithReservations(t.Context(), again))
	if _, err := c.Reserve(); protocol.CodeOf(err) != protocol.CodeBusy {
		t.Fatal("reserve beside a held unit")
	}
	again.Release()
	if notified != 1 {
		t.Fatal("notified while the call still holds the unit")
	}
	if err := stop(); protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatal(err)
	}
	if notified != 2 {
		t.Fatalf("notified %d times, want 2 once the call returned", notified)
	}
	again.Release()
	if s := e.x.Stats(); s.Reserved != 0 {
		t.Fatalf("stats %+v", s)
	}
}
