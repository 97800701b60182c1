package manifest

import (
	"strings"
	"testing"
)

const processBase = `id = "cli"
name = "CLI"
version = "1.0.0"
kind = "provider"
contractVersion = "1.0"
vendor = "acme"
authMode = "cli-session"
usageSource = "cli-report"

[capabilities]
tools = false
textStreaming = true
`

func TestProcessTable(t *testing.T) {
	m, err := Parse([]byte(processBase + "\n[process]\nbinaries = [\"claude\"]\nenv = [\"ANTHROPIC_API_KEY\"]\n"))
	if err != nil || !m.HasProcess() || m.Process.Binaries[0] != "claude" {
		t.Fatalf("valid [process]: %v", err)
	}
	if m, err := Parse([]byte(processBase)); err != nil || m.HasProcess() {
		t.Fatalf("no [process]: %v", err)
	}
	for _, tc := range []struct{ body, want string }{
		{"binaries = []", "process.binaries: required"},
		{`binaries = ["/usr/bin/claude"]`, "process.binaries[0]"},
		{`binaries = ["../claude"]`, "process.binaries[0]"},
		{`binaries = ["a", "a"]`, "duplicate binary"},
		{"binaries = [\"a\"]\nenv = [\"HOME\"]", "set by the host"},
		{"binaries = [\"a\"]\nenv = [\"PATH\"]", "set by the host"},
		{"binaries = [\"a\"]\nenv = [\"lower\"]", "process.env[0]"},
		{"binaries = [\"a\"]\nenv = [\"K\", \"K\"]", "duplicate variable"},
		{"binaries = [\"a\"]\nshell = true", "unknown key"},
	} {
		_, err := Parse([]byte(processBase + "\n[process]\n" + tc.body + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
	}
	tool := strings.Replace(processBase, `kind = "provider"`, `kind = "tool"`, 1)
	if _, err := Parse([]byte(tool + "\n[process]\nbinaries = [\"a\"]\n")); err == nil || !strings.Contains(err.Error(), "only a provider") {
		t.Errorf("a tool with [process]: %v", err)
	}
}
