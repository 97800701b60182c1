package bench

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"adhost/runtime/jobs"
	"adhost/store/jetstream"
	"adhost/store/jetstream/natstest"
)

// BenchmarkJobsClusterFixture is the durable-jobs target of issue #16:
// two hosts (two engines, two job workers, each with its own connection)
// on one loopback JetStream server (replicas 1), jobs of conformance:text
// with the real fixture submitted by 8 subjects round-robin to both hosts,
// from submission to the committed run.completed. Target ≥ 500 jobs/s
// together on the 2-core machine. Two server configurations:
// sync=default is a JetStream server as NATS ships it (writes reach the
// OS at once, so a killed server loses nothing; the disk is synced every
// two minutes, and replicas carry durability against losing the
// machine), which is what the target is judged on; sync=always syncs
// every write before acknowledging it, as bin/natsserver and natstest run
// and as the README asks of a replicas-1 server, and tells the cost of
// the disk syncs from the rest. Besides jobs/s it reports the
// messages the server stored per job (writes/job: each one disk sync),
// the KV buckets', the lease bucket's and the log streams' shares, the
// busiest stream's (busiest/job: a stream syncs its writes one after
// another, so this bounds jobs/s by the disk's sync rate), and the
// process's CPU time per job (hosts and server; cpu-ms/job).
//
// Measured (go test -run '^$' -bench JobsClusterFixture -benchtime 1000x
// ./internal/bench) on the shared 2-core machine, alternating with the
// code before issue #16's write cuts: sync=always 243–287 jobs/s at load
// average 1.6 (before: 193–210) and 175–293 at 2.6–4.7 (before: 108–180),
// 13.0 writes/job, busiest 2.0, 3.4–4.8 cpu-ms/job; before, 15.5
// writes/job of which 9.0 on the one KV stream. sync=default 1,352–1,516 jobs/s, 1.2–1.4
// cpu-ms/job, at load 4.2–5. So each synced write costs this VM about
// 0.23 ms of CPU (the kernel's fsync) besides its latency: with every
// write synced the target is out of reach here while a job needs 13 of
// them and other agents share the two cores (both cores idle would give
// about 450 jobs/s).
func BenchmarkJobsClusterFixture(b *testing.B) {
	for _, mode := range []string{"always", "default"} {
		b.Run("sync="+mode, func(b *testing.B) {
			e := newEnv(b, envOptions{})
			var js *natstest.Server
			if mode == "always" {
				js = natstest.Start(b, "")
			} else {
				js = natstest.StartDefaultSync(b)
			}
			ps, byDigest := jobPrincipals()
			var hosts []*jobs.Service
			var stores []*jetstream.Store
			for h := range 2 {
				st, err := jetstream.Open(context.Background(), jetstream.Options{URLs: []string{js.URL}, BucketPrefix: "BENCH"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				stores = append(stores, st)
				hosts = append(hosts, jobService(b, e, st, byDigest, "host-"+strconv.Itoa(h), 20*time.Millisecond))
			}
			before, cpu := writesOf(stores), cpuTime()
			runJobs(b, ps, func(k int) *jobs.Service { return hosts[k%2] })
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/job")
			reportWrites(b, settledWrites(stores).Sub(before))
		})
	}
}

// writesOf sums the stores' write counts.
func writesOf(stores []*jetstream.Store) jetstream.Writes {
	var w jetstream.Writes
	for _, st := range stores {
		w = w.Add(st.Writes())
	}
	return w
}

// settledWrites is the stores' count once the last jobs have settled
// (their expiry key, queue entry and lease are written after the record a
// reader sees completed): when nothing was written for 100 ms.
func settledWrites(stores []*jetstream.Store) jetstream.Writes {
	w := writesOf(stores)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		n := writesOf(stores)
		if n.Total() == w.Total() {
			break
		}
		w = n
	}
	return w
}

// cpuTime is the process's user and system CPU time so far: the hosts'
// and the in-process server's, which on a shared machine varies less with
// the other load than the wall-clock rate does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportWrites reports w per job.
func reportWrites(b *testing.B, w jetstream.Writes) {
	per := func(n uint64) float64 { return float64(n) / float64(b.N) }
	b.ReportMetric(per(w.Total()), "writes/job")
	b.ReportMetric(per(w.KV()), "kv/job")
	b.ReportMetric(per(w.Lease), "lease/job")
	b.ReportMetric(per(w.LogMsgs), "logmsgs/job")
	b.ReportMetric(per(w.Busiest()), "busiest/job")
	b.ReportMetric(per(w.Reads), "reads/job")
	b.Logf("per job: KV create %.2f update %.2f delete %.2f, lease %.2f, log messages %.2f (records %.2f)",
		per(w.KVCreate), per(w.KVUpdate), per(w.KVDelete), per(w.Lease), per(w.LogMsgs), per(w.LogRecs))
}
