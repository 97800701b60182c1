package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/durable"
	"adhost/runtime/jobs"
	"adhost/runtime/protocol"
)

// cliJobs opens durable jobs on the host's store when [jobs] enables them:
// the recovery pass runs (every job a crash of this host, or of another
// host of a shared store whose lease has lapsed, left running becomes
// interrupted) before the host listens. Every host of a shared store runs
// a worker; each job runs on the one that took its lease. Start the worker
// once the server is ready; the server's Shutdown stops it. resolve finds
// the current principal of a credential digest (the server's tokens, as
// a reload left them): dispatch re-checks a job's grants with it, and
// only the worker calls it.
func cliJobs(ctx context.Context, cfg *config.File, h *cliHost, log *slog.Logger, tel *Telemetry, resolve func(digest string) *runtime.Principal) (*jobs.Service, []string, error) {
	if !cfg.JobsOn() {
		return nil, nil, nil
	}
	j := cfg.Jobs
	if cfg.Usage.HostID == "" {
		log.Warn("jobs are enabled but usage.host_id is not set: no provider has an explicit account, so every submission is JOB_ACCOUNT_REQUIRED")
	}
	// The provider's account now (a reload may change it: the job then
	// fails with JOB_ACCOUNT_CHANGED rather than run on another account).
	account := func(id string) string {
		for _, p := range h.engine.Providers() {
			if p.ID == id {
				return p.AccountID
			}
		}
		return ""
	}
	if h.shared != nil && cfg.Usage.HostID != "" {
		if err := sharedHostID(ctx, cfg, h.durable); err != nil {
			return nil, nil, err
		}
	}
	svc, err := jobs.Open(ctx, jobs.Options{
		Store:             h.durable,
		Engine:            tel.JobEngine(h.engine),
		Resolve:           resolve,
		HostID:            cfg.Usage.HostID,
		LeaseOwner:        h.leaseOwner(),
		Account:           account,
		Evidence:          h.engine.ReauthorizeEvidence,
		Retention:         time.Duration(j.RetentionMs) * time.Millisecond,
		MaxJobs:           j.MaxJobs,
		MaxJobsPerSubject: j.MaxJobsPerSubject,
		MaxBytes:          j.MaxBytes,
		MaxJobBytes:       j.MaxJobBytes,
		Lease:             time.Duration(j.LeaseMs) * time.Millisecond,
		PollInterval:      time.Duration(j.PollIntervalMs) * time.Millisecond,
		Workers:           j.Workers,
		Logger:            log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("jobs: %w", err)
	}
	return svc, []string{"durable-jobs"}, nil
}

func init() {
	cliHelp["jobs"] = `usage: adhost jobs submit|read|events|cancel [flags]

Thin clients of a running host's durable jobs (wire-extensions §2), with
--url, --token-file or ADHOST_TOKEN as for adhost run. A job runs on the
host whether or not anyone is connected; each command prints the host's
answer as one JSON line (events: one line per event).`
	cliHelp["jobs submit"] = `usage: adhost jobs submit --key K --provider P --model M [--tool NAME] "input" (or - for stdin)

Submits the run as the job keyed K (per subject) and prints its JobInfo.
Submitting the same key and request again finds the same job: after a lost
answer, just run the command again.`
	cliHelp["jobs read"] = `usage: adhost jobs read ID

Prints the job's JobInfo: state, cursor, timestamps.`
	cliHelp["jobs events"] = `usage: adhost jobs events ID [--after N] [--follow]

Prints the job's committed events after sequence N (default 0), one JSON
line each. --follow keeps polling until the job has ended and every event
is printed.`
	cliHelp["jobs cancel"] = `usage: adhost jobs cancel ID

Cancels the job (a queued one at once, a running one as soon as its run
stops) and prints its JobInfo.`
}

// cliJobsCmd is `adhost jobs submit|read|events|cancel`.
func cliJobsCmd(ctx context.Context, env *cliEnv, args []string) int {
	sub := ""
	if len(args) > 0 {
		switch args[0] {
		case "submit", "read", "events", "cancel":
			sub, args = args[0], args[1:]
		}
	}
	cmd := strings.TrimSpace("jobs " + sub)
	fs := cliFlags(env, cmd)
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	var key, provider, model *string
	var tools cliStrings
	var after *int64
	var follow *bool
	var poll *time.Duration
	switch sub {
	case "submit":
		key = fs.String("key", "", "job key, unique per subject (required)")
		provider = fs.String("provider", "", "provider instance id (required)")
		model = fs.String("model", "", "model id (required)")
		fs.Var(&tools, "tool", "host tool to expose (repeatable)")
	case "events":
		after = fs.Int64("after", 0, "print the events after this sequence")
		follow = fs.Bool("follow", false, "poll until the job has ended")
		poll = fs.Duration("poll", 250*time.Millisecond, "poll interval of --follow")
	}
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	switch {
	case sub == "":
		if len(pos) > 0 {
			return cliUsageError(env, cmd, "unknown subcommand %q (submit, read, events or cancel)", pos[0])
		}
		return cliUsageError(env, cmd, "want a subcommand: submit, read, events or cancel")
	case sub == "submit" && (*key == "" || *provider == "" || *model == ""):
		return cliUsageError(env, cmd, "--key, --provider and --model are required")
	case len(pos) != 1:
		return cliUsageError(env, cmd, "want exactly one argument, got %d", len(pos))
	}
	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail(cmd, err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	var info *client.JobInfo
	switch sub {
	case "submit":
		input := pos[0]
		if input == "-" {
			b, err := cliReadStdin()
			if err != nil {
				return env.fail(cmd, err)
			}
			input = b
		}
		info, err = c.SubmitJob(ctx, *key, &protocol.RunRequest{Provider: *provider, Model: *model, Input: input, Tools: tools})
	case "read":
		info, err = c.ReadJob(ctx, pos[0])
	case "cancel":
		info, err = c.CancelJob(ctx, pos[0])
	case "events":
		err = cliJobEvents(ctx, env, c, pos[0], *after, *follow, *poll)
	}
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	if info != nil {
		b, _ := json.Marshal(cliJobJSON(info))
		fmt.Fprintf(env.stdout, "%s\n", b)
	}
	return cliExitOK
}

// cliJobEvents prints the events after after, page by page; with follow
// it polls until the job has ended and its last event is printed.
func cliJobEvents(ctx context.Context, env *cliEnv, c *client.Client, id string, after int64, follow bool, poll time.Duration) error {
	for {
		p, err := c.JobEvents(ctx, id, after, 0)
		if err != nil {
			return err
		}
		for _, ev := range p.Events {
			fmt.Fprintf(env.stdout, "%s\n", ev.Raw)
		}
		after = p.NextCursor
		switch {
		case p.HasMore:
			continue
		case !follow || p.Job.Terminal():
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// cliJobJSON renders a JobInfo in its wire shape.
func cliJobJSON(j *client.JobInfo) any {
	out := map[string]any{
		"id": j.ID, "runId": j.RunID, "provider": j.Provider, "model": j.Model, "state": j.State,
		"cursor": j.Cursor, "cancelRequested": j.CancelRequested,
		"createdAt": j.CreatedAt.UTC().Format(timeLayoutMs), "updatedAt": j.UpdatedAt.UTC().Format(timeLayoutMs),
	}
	if j.ExpiresAt != nil {
		out["expiresAt"] = j.ExpiresAt.UTC().Format(timeLayoutMs)
	}
	return out
}

// cliReadStdin reads an input given as "-" (bounded like a request body).
func cliReadStdin() (string, error) {
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	return string(b), err
}

// sharedHostIDKey holds the usage.host_id of the hosts sharing a store.
const sharedHostIDKey = "jobs/v1/host-id"

// sharedHostID refuses to start jobs on a shared store whose other hosts
// use another usage.host_id: a job is bound to the host id it was
// submitted under and may run on any host, so a host with another would
// fail every other host's jobs with JOB_ACCOUNT_CHANGED (and they its
// own). The first host with jobs on the store records its id.
func sharedHostID(ctx context.Context, cfg *config.File, st durable.KV) error {
	b, _ := json.Marshal(map[string]string{"hostId": cfg.Usage.HostID})
	_, err := st.Create(ctx, sharedHostIDKey, b)
	if err == nil {
		return nil
	}
	if !errors.Is(err, durable.ErrExists) {
		return fmt.Errorf("jobs: %w", err)
	}
	e, err := st.Get(ctx, sharedHostIDKey)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	var v struct{ HostID string }
	if json.Unmarshal(e.Value, &v) != nil || v.HostID == cfg.Usage.HostID {
		return nil
	}
	name := cfg.Path
	if name == "" {
		name = "host.toml"
	}
	where := name
	if line := cfg.Line("usage.host_id"); line > 0 {
		where = fmt.Sprintf("%s:%d", name, line)
	}
	return fmt.Errorf("%s: usage.host_id: %q, but the hosts with jobs on this store (store.jetstream.bucket_prefix %q) use %q: "+
		"every host of a shared store needs the same host id, since a job may run on any of them (or use another bucket_prefix)",
		where, cfg.Usage.HostID, cfg.Store.JetStream.BucketPrefix, v.HostID)
}
