package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLISessions: a conversation from the terminal against a real host:
// sessions create, two `run --session` turns (each continuing whatever
// revision the session is at), read, delete, and the errors a user sees.
func TestCLISessions(t *testing.T) {
	e := newSessEnv(t, sessOptions{})
	tok := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tok, []byte(sessAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--url", e.url, "--token-file", tok, "--config", filepath.Join(t.TempDir(), "none.toml")}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return cliTestRun(t, append(args, conn...)...)
	}
	code, out, errs := run("sessions", "create", "--provider", "hist", "--model", "m", "--mode", "history", "--instructions", "be brief")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	var snap struct {
		Session struct {
			ID       string
			Revision int
			State    string
		}
		History      []map[string]string
		Instructions string
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.Session.State != "ready" || snap.Instructions != "be brief" {
		t.Fatalf("create output %q: %v", out, err)
	}
	id := snap.Session.ID
	for i, msg := range []string{"hello", "again"} {
		code, out, errs = run("run", "--session", id, msg)
		if code != 0 || out != "reply:"+msg+"\n" {
			t.Fatalf("turn %d: %d %q %q", i, code, out, errs)
		}
	}
	code, out, _ = run("sessions", "read", id)
	if err := json.Unmarshal([]byte(out), &snap); code != 0 || err != nil || snap.Session.Revision != 2 || len(snap.History) != 4 || snap.History[3]["content"] != "reply:again" {
		t.Fatalf("read: %d %q", code, out)
	}
	if code, out, _ = run("sessions", "delete", id); code != 0 || strings.TrimSpace(out) != `{"deleted":true,"id":"`+id+`"}` {
		t.Fatalf("delete: %d %q", code, out)
	}
	if code, _, errs = run("run", "--session", id, "late"); code != 1 || !strings.Contains(errs, "adhost run: SESSION_NOT_FOUND") {
		t.Fatalf("run on a deleted session: %d %q", code, errs)
	}
	if code, _, errs = run("sessions", "create", "--provider", "nocont", "--model", "m"); code != 1 || !strings.Contains(errs, "adhost sessions create: UNSUPPORTED_CONTINUATION") {
		t.Fatalf("create without the capability: %d %q", code, errs)
	}
	if code, _, errs = run("sessions", "read"); code != 2 || !strings.Contains(errs, "want exactly one session id") {
		t.Fatalf("read without an id: %d %q", code, errs)
	}
	if code, _, errs = run("sessions", "list"); code != 2 || !strings.Contains(errs, `unknown subcommand "list"`) {
		t.Fatalf("unknown subcommand: %d %q", code, errs)
	}
}
