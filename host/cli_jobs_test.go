package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIJobs: jobs from the terminal against a real host: submit, the
// same key again, read, events (and --follow), cancel, and the errors a
// user sees.
func TestCLIJobs(t *testing.T) {
	e := newJobEnv(t, 0)
	dir := t.TempDir()
	tok := filepath.Join(dir, "alice.token")
	if err := os.WriteFile(tok, []byte(jobAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--url", e.ts.URL, "--token-file", tok, "--config", filepath.Join(dir, "none.toml")}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return cliTestRun(t, append(args, conn...)...)
	}
	code, out, errs := run("jobs", "submit", "--key", "cli-1", "--provider", testProvider, "--model", testModel, "hello")
	if code != 0 {
		t.Fatalf("submit: %d %s %s", code, out, errs)
	}
	var info struct {
		ID, State string
		Cursor    int
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" {
		t.Fatalf("submit output %q: %v", out, err)
	}
	if code, again, _ := run("jobs", "submit", "--key", "cli-1", "--provider", testProvider, "--model", testModel, "hello"); code != 0 || !strings.Contains(again, info.ID) {
		t.Fatalf("same key: %d %q", code, again)
	}
	code, out, errs = run("jobs", "events", info.ID, "--follow", "--poll", "5ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(lines[0], `"type":"run.started"`) || !strings.Contains(lines[3], `"type":"run.completed"`) {
		t.Fatalf("events --follow: %d %q %q", code, out, errs)
	}
	if code, out, _ = run("jobs", "read", info.ID); code != 0 || !strings.Contains(out, `"state":"completed"`) || !strings.Contains(out, `"expiresAt":"`) {
		t.Fatalf("read: %d %q", code, out)
	}
	if code, out, _ = run("jobs", "events", info.ID, "--after", "3"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("events --after 3: %d %q", code, out)
	}
	if code, out, _ = run("jobs", "cancel", info.ID); code != 0 || !strings.Contains(out, `"state":"completed"`) {
		t.Fatalf("cancel of a finished job: %d %q", code, out)
	}
	if code, _, errs = run("jobs", "submit", "--key", "cli-1", "--provider", testProvider, "--model", testModel, "changed"); code != 1 || !strings.Contains(errs, "adhost jobs submit: IDEMPOTENCY_CONFLICT") {
		t.Fatalf("changed request: %d %q", code, errs)
	}
	if code, _, errs = run("jobs", "read", "00000000-0000-4000-8000-000000000000"); code != 1 || !strings.Contains(errs, "adhost jobs read: JOB_NOT_FOUND") {
		t.Fatalf("unknown job: %d %q", code, errs)
	}
	if code, _, _ = run("jobs", "submit", "hello"); code != 2 {
		t.Fatalf("submit without --key: %d", code)
	}
	if code, _, _ = run("jobs", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: %d", code)
	}
}
