package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

// Durable jobs through the real binary across kill -9 (wire-extensions
// §2.3, §2.5): acknowledged jobs are never lost, completed ones replay the
// same log, running ones are interrupted and never run again, queued ones
// run after the restart.

// jobSite is the dev site with [jobs] on (workers as given) and the dev
// token holding the job grants.
func jobSite(t *testing.T, workers int) *site {
	t.Helper()
	s := newSite(t)
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("version = 1\n\n[jobs]\nenabled = true\nretention_ms = 3600000\nmax_jobs = 5000\nmax_jobs_per_subject = 5000\nworkers = %d\npoll_interval_ms = 20\n", workers)
	text := strings.Replace(string(doc), "version = 1\n", table, 1)
	text += "\n[tokens.grants]\njobs = [\"submit\", \"read\", \"cancel\"]\n"
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func jobClient(t *testing.T, srv *server, s *site) *client.Client {
	t.Helper()
	c, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jobReq(input string, tools ...string) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: fixtureProvider, Model: fixtureModel, Input: input, Tools: tools}
}

// jobLog is every committed event of a job, raw, read page by page.
func jobLog(t *testing.T, c *client.Client, id string) []client.Event {
	t.Helper()
	var out []client.Event
	after := int64(0)
	for {
		p, err := c.JobEvents(t.Context(), id, after, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", id, err)
		}
		out = append(out, p.Events...)
		after = p.NextCursor
		if !p.HasMore {
			return out
		}
	}
}

func jobTypes(evs []client.Event) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return strings.Join(ts, ",")
}

func waitJob(t *testing.T, c *client.Client, id string, ok func(*client.JobInfo) bool) *client.JobInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := c.ReadJob(t.Context(), id)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s stays %s (cursor %d)", id, info.State, info.Cursor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// usageRuns counts the usage records per runId: one per executed run, so
// a job run twice would show two (the JSONL is written on clean stops).
func usageRuns(t *testing.T, s *site) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(s.dir, "data", "usage.jsonl"))
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ RunID string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.RunID != "" {
			out[rec.RunID]++
		}
	}
	return out
}

func checkInterrupted(t *testing.T, what string, info *client.JobInfo, evs []client.Event) {
	t.Helper()
	last := evs[len(evs)-1]
	if info.State != client.JobInterrupted || last.Type != client.EventRunFailed || last.Error.Code != protocol.CodeJobInterrupted ||
		last.Error.Outcome != "uncertain" || last.Error.Retryable || evs[0].Type != client.EventRunStarted {
		t.Fatalf("%s: state %s, events %s, last %s", what, info.State, jobTypes(evs), last.Raw)
	}
}

func TestJobsSurviveKill9(t *testing.T) {
	s := jobSite(t, 1)
	srv := startServer(t, s)
	c := jobClient(t, srv, s)
	ctx := t.Context()
	if info, err := c.Protocol(ctx); err != nil || !info.HasFeature("durable-jobs") {
		t.Fatalf("protocol: %+v %v", info, err)
	}

	// A completed job, with a tool call.
	done, err := c.SubmitJob(ctx, "done", jobReq("conformance:tools", lookupTool))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, done.ID, (*client.JobInfo).Terminal)
	doneLog := jobLog(t, c, done.ID)
	if got := jobTypes(doneLog); !strings.Contains(got, "tool.called,tool.completed") || !strings.HasSuffix(got, "run.completed") {
		t.Fatalf("completed job: %s", got)
	}
	// A job mid-stream: conformance:cancel reported progress and waits.
	pending, err := c.SubmitJob(ctx, "pending", jobReq("conformance:cancel"))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, pending.ID, func(i *client.JobInfo) bool {
		return i.State == client.JobRunning && strings.Contains(jobTypes(jobLog(t, c, pending.ID)), "run.progress")
	})
	// Queued behind it (one worker), and one acknowledged just before
	// the kill.
	var queued []string
	for i := range 3 {
		q, err := c.SubmitJob(ctx, fmt.Sprintf("queued-%d", i), jobReq("conformance:text"))
		if err != nil {
			t.Fatal(err)
		}
		if q.State != client.JobQueued {
			t.Fatalf("queued job: %+v", q)
		}
		queued = append(queued, q.ID)
	}
	killHard(t, srv)

	srv = startServer(t, s)
	c = jobClient(t, srv, s)
	// The completed job replays the same log, byte for byte.
	again := jobLog(t, c, done.ID)
	if len(again) != len(doneLog) {
		t.Fatalf("replay after kill: %s, was %s", jobTypes(again), jobTypes(doneLog))
	}
	for i := range again {
		if !bytes.Equal(again[i].Raw, doneLog[i].Raw) {
			t.Fatalf("event %d changed:\n%s\n%s", i, again[i].Raw, doneLog[i].Raw)
		}
	}
	// The running job is interrupted, never resumed.
	info, err := c.ReadJob(ctx, pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkInterrupted(t, "pending job", info, jobLog(t, c, pending.ID))
	// The queued jobs run now.
	for _, id := range queued {
		if q := waitJob(t, c, id, (*client.JobInfo).Terminal); q.State != client.JobCompleted {
			t.Fatalf("queued job after restart: %+v", q)
		}
	}
	// Resubmitting finds the same jobs.
	if j, err := c.SubmitJob(ctx, "pending", jobReq("conformance:cancel")); err != nil || j.ID != pending.ID || j.State != client.JobInterrupted {
		t.Fatalf("resubmit after restart: %+v %v", j, err)
	}

	// kill -9 during a tool call: as soon as tool.called is committed.
	tool, err := c.SubmitJob(ctx, "tool", jobReq("conformance:tools", lookupTool))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		evs := jobLog(t, c, tool.ID)
		if strings.Contains(jobTypes(evs), "tool.called") || len(evs) > 0 && evs[len(evs)-1].Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool.called: %s", jobTypes(evs))
		}
	}
	killHard(t, srv)
	srv = startServer(t, s)
	c = jobClient(t, srv, s)
	info, err = c.ReadJob(ctx, tool.ID)
	if err != nil {
		t.Fatal(err)
	}
	toolLog := jobLog(t, c, tool.ID)
	if n := strings.Count(jobTypes(toolLog), "tool.called"); n != 1 {
		t.Fatalf("tool job: %d tool.called in %s", n, jobTypes(toolLog))
	}
	if info.State != client.JobCompleted {
		checkInterrupted(t, "tool job", info, toolLog)
	}
	// The worker is idle again: one more job runs to the end.
	last, err := c.SubmitJob(ctx, "last", jobReq("conformance:text"))
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, last.ID, (*client.JobInfo).Terminal)
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exit %d:\n%s", code, srv.stderr)
	}
	// Nothing ran twice, and the interrupted jobs never ran again.
	runs := usageRuns(t, s)
	for id, n := range runs {
		if n > 1 {
			t.Errorf("run %s executed %d times", id, n)
		}
	}
	if runs[pending.RunID] != 0 {
		t.Errorf("the interrupted job ran again")
	}
	if info.State == client.JobInterrupted && runs[tool.RunID] != 0 {
		t.Errorf("the interrupted tool job ran again")
	}
}

// TestJobsThousandAcrossKills: 8 clients submit 1,000 jobs while the host
// is killed twice; every acknowledged job is found, no key yields two
// jobs, and no job ran twice.
func TestJobsThousandAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 jobs across restarts")
	}
	const clients, perClient = 8, 125
	s := jobSite(t, 32)
	srv := startServer(t, s)
	var cur atomic.Pointer[client.Client]
	cur.Store(jobClient(t, srv, s))
	var acked atomic.Int64
	ids := make([][]string, clients)
	var wg sync.WaitGroup
	ctx := t.Context()
	for ci := range clients {
		wg.Go(func() {
			for i := range perClient {
				key := fmt.Sprintf("c%d-%d", ci, i)
				for {
					info, err := cur.Load().SubmitJob(ctx, key, jobReq("conformance:text"))
					if err == nil {
						ids[ci] = append(ids[ci], info.ID)
						acked.Add(1)
						break
					}
					if ctx.Err() != nil {
						return
					}
					// The host is down or restarting: the same key and
					// request again is safe.
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	for _, at := range []int64{333, 666} {
		for acked.Load() < at {
			time.Sleep(time.Millisecond)
		}
		killHard(t, srv)
		srv = startServer(t, s)
		cur.Store(jobClient(t, srv, s))
	}
	wg.Wait()
	c := cur.Load()
	seen := map[string]bool{}
	completed := 0
	for ci := range clients {
		if len(ids[ci]) != perClient {
			t.Fatalf("client %d: %d jobs acknowledged", ci, len(ids[ci]))
		}
		for i, id := range ids[ci] {
			if seen[id] {
				t.Fatalf("job %s acknowledged for two keys", id)
			}
			seen[id] = true
			info := waitJob(t, c, id, (*client.JobInfo).Terminal)
			// The key still names the same job.
			again, err := c.SubmitJob(ctx, fmt.Sprintf("c%d-%d", ci, i), jobReq("conformance:text"))
			if err != nil || again.ID != id {
				t.Fatalf("key c%d-%d: %+v %v, want %s", ci, i, again, err, id)
			}
			evs := jobLog(t, c, id)
			if strings.Count(jobTypes(evs), "run.started") != 1 {
				t.Fatalf("job %s: %s", id, jobTypes(evs))
			}
			switch info.State {
			case client.JobCompleted:
				completed++
			case client.JobInterrupted:
				checkInterrupted(t, "job "+id, info, evs)
			default:
				t.Fatalf("job %s ended %s", id, info.State)
			}
		}
	}
	if len(seen) != clients*perClient {
		t.Fatalf("%d distinct jobs", len(seen))
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
	for id, n := range usageRuns(t, s) {
		if n > 1 {
			t.Errorf("run %s executed %d times", id, n)
		}
	}
	t.Logf("1000 jobs: %d completed, %d interrupted by the kills", completed, clients*perClient-completed)
}
