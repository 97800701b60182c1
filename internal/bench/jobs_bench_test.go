package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
	"adhost/store"
)

// BenchmarkJobsFixture is the durable-jobs target of issue #10 with the
// real fixture extension: jobs of conformance:text submitted by 8
// subjects at once, from submission to the committed run.completed, on a
// Badger store with durable (synced, group-committed) writes. Target ≥ 500
// jobs/s on the 2-core machine.
func BenchmarkJobsFixture(b *testing.B) {
	e := newEnv(b, envOptions{})
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() }) // after the worker's Stop
	ps, byDigest := jobPrincipals()
	svc := jobService(b, e, st, byDigest, "", 5*time.Millisecond)
	runJobs(b, ps, func(int) *jobs.Service { return svc })
}

// jobPrincipals are the 8 subjects the job benchmarks submit as, and
// their lookup by credential digest.
func jobPrincipals() ([]*runtime.Principal, map[string]*runtime.Principal) {
	var ps []*runtime.Principal
	byDigest := map[string]*runtime.Principal{}
	for i := range 8 {
		p := &runtime.Principal{
			Subject: "subject-" + strconv.Itoa(i), Providers: map[string]bool{providerID: true},
			Ops: map[string]bool{"jobs.submit": true, "jobs.read": true}, CredentialDigest: fmt.Sprintf("%064d", i),
		}
		ps = append(ps, p)
		byDigest[p.CredentialDigest] = p
	}
	return ps, byDigest
}

// jobService is one host's job worker on st: its own engine with the
// fixture, limits out of the way, started; owner names its leases
// (empty: the host id).
func jobService(b *testing.B, e *env, st durable.Store, byDigest map[string]*runtime.Principal, owner string, poll time.Duration) *jobs.Service {
	m := e.x.Manifest()
	eng, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{
			ID: providerID, Name: "Fixture", Vendor: m.Vendor, AuthMode: m.AuthMode, AccountID: "bench",
			Models: []string{modelID}, Capabilities: m.Capabilities, UsageSource: m.UsageSource, Provider: e.prov,
		}},
		MaxConcurrent: 64, MaxPerSubject: 64, HostID: "bench",
	})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := jobs.Open(context.Background(), jobs.Options{
		Store: st, Engine: eng, HostID: "bench", LeaseOwner: owner,
		Resolve:   func(d string) *runtime.Principal { return byDigest[d] },
		Account:   func(string) string { return "bench" },
		Retention: time.Hour, MaxJobs: 100_000, MaxJobsPerSubject: 100_000, MaxBytes: 1 << 40, Workers: 64,
		PollInterval: poll,
	})
	if err != nil {
		b.Fatal(err)
	}
	svc.Start()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Stop(ctx)
		eng.Shutdown(ctx)
	})
	return svc
}

// runJobs submits b.N jobs of conformance:text, job k as subject k%8 to
// host(k), then reads each on the host it went to until it completed, and
// reports jobs/s.
func runJobs(b *testing.B, ps []*runtime.Principal, host func(k int) *jobs.Service) {
	req := func() *protocol.RunRequest {
		return &protocol.RunRequest{Provider: providerID, Model: modelID, Input: "conformance:text"}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			type sub struct {
				id  string
				svc *jobs.Service
			}
			var subs []sub
			for k := i; k < b.N; k += len(ps) {
				svc := host(k)
				info, err := svc.Submit(context.Background(), p, "k"+strconv.Itoa(k), req())
				if err != nil {
					b.Error(err)
					return
				}
				subs = append(subs, sub{info.ID, svc})
			}
			for _, s := range subs {
				for {
					info, err := s.svc.Read(context.Background(), p, s.id)
					if err != nil {
						b.Error(err)
						return
					}
					if info.State == jobs.StateCompleted {
						break
					}
					if info.State != jobs.StateQueued && info.State != jobs.StateRunning {
						b.Errorf("job %s: %s", s.id, info.State)
						return
					}
					time.Sleep(200 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
