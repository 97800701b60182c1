package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"adhost/runtime"
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
	defer st.Close()
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
	defer eng.Shutdown(context.Background())
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
	svc, err := jobs.Open(context.Background(), jobs.Options{
		Store: st, Engine: eng, HostID: "bench",
		Resolve:   func(d string) *runtime.Principal { return byDigest[d] },
		Account:   func(string) string { return "bench" },
		Retention: time.Hour, MaxJobs: 100_000, MaxJobsPerSubject: 100_000, MaxBytes: 1 << 40, Workers: 64,
		PollInterval: 5 * time.Millisecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	svc.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Stop(ctx)
	}()
	req := func() *protocol.RunRequest {
		return &protocol.RunRequest{Provider: providerID, Model: modelID, Input: "conformance:text"}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			var ids []string
			for k := i; k < b.N; k += len(ps) {
				info, err := svc.Submit(context.Background(), p, "k"+strconv.Itoa(k), req())
				if err != nil {
					b.Error(err)
					return
				}
				ids = append(ids, info.ID)
			}
			for _, id := range ids {
				for {
					info, err := svc.Read(context.Background(), p, id)
					if err != nil {
						b.Error(err)
						return
					}
					if info.State == jobs.StateCompleted {
						break
					}
					if info.State != jobs.StateQueued && info.State != jobs.StateRunning {
						b.Errorf("job %s: %s", id, info.State)
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
