package host

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIHelpEveryCommand: --help of every command and plugins subcommand
// prints its synopsis with its arguments on stdout and exits 0; a bad flag
// is one line on stderr naming the flag, exit 2.
func TestCLIHelpEveryCommand(t *testing.T) {
	cmds := [][]string{{"plugins", "list"}, {"plugins", "verify"}, {"plugins", "inspect"}, {"plugins", "pin"}, {"plugins"}}
	for _, c := range cliCommands {
		if c.name != "plugins" {
			cmds = append(cmds, []string{c.name})
		}
	}
	for _, cmd := range cmds {
		name := strings.Join(cmd, " ")
		code, stdout, stderr := cliTestRun(t, append(cmd, "--help")...)
		if code != cliExitOK || stderr != "" || !strings.HasPrefix(stdout, "usage: adhost "+name) {
			t.Errorf("%s --help: code %d, stdout %q, stderr %q", name, code, stdout, stderr)
		}
		if name == "plugins" {
			continue
		}
		if !strings.Contains(stdout, "Flags:") && name != "plugins inspect" && name != "init" && name != "completion" {
			t.Errorf("%s --help lists no flags: %q", name, stdout)
		}
		code, stdout, stderr = cliTestRun(t, append(cmd, "--no-such-flag")...)
		if code != cliExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "-no-such-flag") || !strings.Contains(stderr, "adhost "+name+":") {
			t.Errorf("%s --no-such-flag: code %d, stdout %q, stderr %q", name, code, stdout, stderr)
		}
	}
	// "adhost help run" is "adhost run --help".
	if code, stdout, _ := cliTestRun(t, "help", "run"); code != cliExitOK || !strings.HasPrefix(stdout, "usage: adhost run --provider P --model M") {
		t.Errorf("help run: %d %q", code, stdout)
	}
	if code, _, stderr := cliTestRun(t, "run", "--provider", "p", "hi"); code != cliExitUsage || !strings.Contains(stderr, "--model is required") {
		t.Errorf("run without --model: %d %q", code, stderr)
	}
}

func TestCLIVersion(t *testing.T) {
	code, stdout, _ := cliTestRun(t, "--version")
	if code != cliExitOK || !strings.HasPrefix(stdout, "adhost ") || !strings.Contains(stdout, "\nabi    1\n") || !strings.Contains(stdout, "\ngo     go1.") {
		t.Fatalf("--version: %d %q", code, stdout)
	}
	code, stdout, _ = cliTestRun(t, "version", "--json")
	var v cliVersionInfo
	if err := json.Unmarshal([]byte(stdout), &v); code != cliExitOK || err != nil || v.ABI != 1 || !strings.HasPrefix(v.Go, "go1.") || v.Version == "" {
		t.Fatalf("version --json: %d %q %v", code, stdout, err)
	}
}

// TestCLIValidate: every problem of a file with several, each with its
// line; a good file is ok; --json carries the same.
func TestCLIValidate(t *testing.T) {
	cfg, _, _ := cliTestConfig(t)
	if code, stdout, _ := cliTestRun(t, "validate", "--config", cfg); code != cliExitOK || !strings.Contains(stdout, "ok") {
		t.Fatalf("good config: %d %q", code, stdout)
	}
	bad := filepath.Join(filepath.Dir(cfg), "bad.toml")
	os.WriteFile(bad, []byte("version = 1\n[limits]\nmax_steps = 65\nmax_concurrent_runs = 0\n[[providers]]\nid = \"p\"\nextension = \"nope@1.0.0\"\n"), 0o644)
	code, stdout, stderr := cliTestRun(t, "validate", "--config", bad)
	if code != cliExitFail || stdout != "" {
		t.Fatalf("bad config: %d %q", code, stdout)
	}
	for _, want := range []string{"bad.toml:3: limits.max_steps", "bad.toml:4: limits.max_concurrent_runs", "bad.toml:7: providers[0].extension"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	code, stdout, _ = cliTestRun(t, "validate", "--config", bad, "--json")
	var res cliValidateResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != cliExitFail || res.OK || len(res.Problems) < 3 {
		t.Fatalf("--json: %d %q %v", code, stdout, err)
	}
	if code, _, stderr := cliTestRun(t, "validate", "--config", filepath.Join(t.TempDir(), "none.toml")); code != cliExitFail || !strings.Contains(stderr, "none.toml") {
		t.Fatalf("missing file: %d %q", code, stderr)
	}
}

// TestCLIFlagErrorsNameTheFlag: a bad --listen is the flag's fault, not a
// line of host.toml.
func TestCLIFlagErrorsNameTheFlag(t *testing.T) {
	cfg, _, _ := cliTestConfig(t)
	code, _, stderr := cliTestRun(t, "serve", "--config", cfg, "--listen", "nonsense")
	if code != cliExitFail || !strings.Contains(stderr, "--listen:") || strings.Contains(stderr, "host.toml:") {
		t.Fatalf("serve --listen nonsense: %d %q", code, stderr)
	}
}

func TestCLIPluginsVerifyNamed(t *testing.T) {
	cfg, _, _ := cliTestConfig(t)
	code, _, stderr := cliTestRun(t, "plugins", "verify", "--config", cfg, "fixture")
	if code != cliExitFail || !strings.Contains(stderr, `"fixture" is not a pinned extension`) {
		t.Fatalf("verify of an extension that is not pinned: %d %q", code, stderr)
	}
}

// TestCLICompletion sources the bash script and asks it what it completes.
func TestCLICompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	_, script, _ := cliTestRun(t, "completion", "bash")
	complete := func(words ...string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "c.bash")
		os.WriteFile(f, []byte(script), 0o644)
		var q []string
		for _, w := range words {
			q = append(q, "'"+w+"'")
		}
		line := strings.Join(q, " ")
		cmd := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=(`+line+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _adhost; echo "${COMPREPLY[*]}"`, "x", f)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("adhost", "st"); got != "status" {
		t.Errorf("adhost st<TAB> = %q", got)
	}
	if got := complete("adhost", "plugins", "v"); got != "verify" {
		t.Errorf("adhost plugins v<TAB> = %q", got)
	}
	if got := complete("adhost", "run", "--pro"); got != "--provider" {
		t.Errorf("adhost run --pro<TAB> = %q", got)
	}
	if got := complete("adhost", "plugins", "list", "--j"); got != "--json" {
		t.Errorf("adhost plugins list --j<TAB> = %q", got)
	}
	// Every command with subcommands completes them, and their flags.
	for cmd, subs := range cliSubcommands() {
		if got := complete("adhost", cmd, ""); got != strings.Join(subs, " ") {
			t.Errorf("adhost %s <TAB> = %q, want %q", cmd, got, strings.Join(subs, " "))
		}
	}
	if code, _, _ := cliTestRun(t, "completion", "fish"); code != cliExitUsage {
		t.Errorf("completion fish: %d", code)
	}
	if _, err := exec.LookPath("zsh"); err == nil {
		_, z, _ := cliTestRun(t, "completion", "zsh")
		f := filepath.Join(t.TempDir(), "_adhost")
		os.WriteFile(f, []byte(z), 0o644)
		if out, err := exec.Command("zsh", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v %s", err, out)
		}
	}
}

func TestCLIPluginsListJSON(t *testing.T) {
	cfg, _, digest := cliTestConfig(t)
	code, stdout, stderr := cliTestRun(t, "plugins", "list", "--config", cfg, "--json")
	var rows []cliPluginRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || code != cliExitOK {
		t.Fatalf("plugins list --json: %d %q %q %v", code, stdout, stderr, err)
	}
	if len(rows) != 1 || rows[0].ID != "demo-tools" || rows[0].SHA256 != digest || !rows[0].Verified || rows[0].Kind != "tool" {
		t.Fatalf("rows %+v", rows)
	}
}

// TestCLIStatus: with the right token the status is complete and exits 0
// (text and --json); a refused token, no token at all, or no host each
// exit 1 and say which.
func TestCLIStatus(t *testing.T) {
	env := newEnv(t, envOptions{})
	tokFile := func(v string) string {
		p := filepath.Join(t.TempDir(), "t.token")
		os.WriteFile(p, []byte(v+"\n"), 0o600)
		return p
	}
	noConfig := filepath.Join(t.TempDir(), "none.toml")
	t.Setenv("ADHOST_TOKEN", "")
	base := []string{"status", "--config", noConfig, "--url", env.ts.URL}

	code, stdout, stderr := cliTestRun(t, append(base, "--token-file", tokFile(testToken))...)
	if code != cliExitOK || !strings.Contains(stdout, "features json-results") || !strings.Contains(stdout, "runs     running=0") {
		t.Fatalf("good token: %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = cliTestRun(t, append(base, "--token-file", tokFile(testToken), "--json")...)
	var rep cliStatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != cliExitOK || rep.Health != 200 || rep.Host == nil || len(rep.Features) == 0 || rep.Error != nil {
		t.Fatalf("--json: %d %q %v", code, stdout, err)
	}

	code, _, stderr = cliTestRun(t, append(base, "--token-file", tokFile(strings.Repeat("x", 40)))...)
	if code != cliExitFail || !strings.Contains(stderr, "adhost status: UNAUTHORIZED: the host refused the token") {
		t.Fatalf("refused token: %d %q", code, stderr)
	}
	code, stdout, stderr = cliTestRun(t, base...)
	if code != cliExitFail || !strings.Contains(stdout, "health   200") || !strings.Contains(stderr, "adhost status: NO_TOKEN:") {
		t.Fatalf("no token: %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = cliTestRun(t, "status", "--config", noConfig, "--url", "http://127.0.0.1:1", "--json")
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != cliExitFail || rep.Error == nil || rep.Error.Code != "UNREACHABLE" {
		t.Fatalf("unreachable: %d %q", code, stdout)
	}
}
