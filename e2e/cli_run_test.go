package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adhost/runtime/protocol"
)

// TestCLIRun drives `adhost run` (host-config.md §1) against a running
// `adhost serve`: by default it prints the text on stdout and a summary on
// stderr; with --json stdout is the RunResult alone, one JSON line; a
// failed run exits non-zero with the wire code on stderr.
func TestCLIRun(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	srv := startServer(t, s)
	tokenFile := filepath.Join(s.dir, "data", "dev.token")
	base := []string{"run", "--url", srv.URL, "--token-file", tokenFile, "--provider", fixtureProvider, "--model", fixtureModel}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	for _, tc := range []struct {
		name string
		args []string
		text string
	}{
		{"json", args("conformance:text"), "Hello fixture"},
		{"stream", args("--stream", "conformance:text"), "Hello fixture"},
		{"stream many deltas", args("--stream", "bench:deltas:100"), strings.Repeat("x", 100)},
		{"tool", args("--tool", lookupTool, "conformance:tools"), "tool receipt: 7"},
		{"schema", args("--schema", writeSchemaFile(t, s.dir), "conformance:structured"), `{"ok":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := adhost(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if stdout != tc.text+"\n" {
				t.Errorf("stdout = %q, want the text %q alone", stdout, tc.text)
			}
			if !strings.Contains(stderr, "adhost run: run ") {
				t.Errorf("no summary on stderr: %q", stderr)
			}

			code, stdout, stderr = adhost(t, append([]string{"run", "--json"}, tc.args[1:]...)...)
			if code != 0 {
				t.Fatalf("--json: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			var res protocol.RunResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Text != tc.text || res.Provider != fixtureProvider || res.RunID == "" {
				t.Errorf("--json stdout %q is not the result (%v)", stdout, err)
			}
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		code protocol.Code
	}{
		{"provider failure", args("conformance:private-error"), protocol.CodeProviderFailed},
		{"provider failure stream", args("--stream", "conformance:private-error"), protocol.CodeProviderFailed},
		{"invalid output", args("--schema", writeSchemaFile(t, s.dir), "conformance:text"), protocol.CodeInvalidOutput},
		{"unknown provider", []string{"run", "--url", srv.URL, "--token-file", tokenFile, "--provider", "nope", "--model", fixtureModel, "x"}, protocol.CodeUnknownProvider},
		{"bad token", []string{"run", "--url", srv.URL, "--token-file", writeFile0600(t, s.dir, "bad.token", strings.Repeat("b", 40)), "--provider", fixtureProvider, "--model", fixtureModel, "x"}, protocol.CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := adhost(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0 for a failing run\nstdout:\n%s", stdout)
			}
			if !strings.Contains(stderr, string(tc.code)) {
				t.Errorf("stderr lacks %s:\n%s", tc.code, stderr)
			}
			if strings.Contains(stdout+stderr, secretMarker) {
				t.Error("the provider's private message reached the CLI output")
			}
		})
	}
}

// writeSchemaFile writes the structured-output schema of
// conformance:structured and returns its path.
func writeSchemaFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "structured.schema.json")
	if err := os.WriteFile(path, []byte(structuredSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile0600(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
