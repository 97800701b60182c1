package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"

	"adhost/abi"
	"adhost/host/config"
)

// The help of each command: synopsis (with positional arguments) and what
// it does. cliParse prints it for -h/--help, followed by the flags.
func init() {
	for name, text := range map[string]string{
		"serve": `usage: adhost serve [--config FILE] [--listen ADDR] [--data DIR] [-v]

Validates the whole configuration, verifies and compiles every pinned
extension, opens the store and serves HTTP(S) until SIGINT or SIGTERM.
--listen and --data override server.listen and store.path.`,
		"init": `usage: adhost init [DIR]

Writes a starter host.toml, the data directory and a random dev token file
(mode 0600) into DIR (default: the current directory). Never overwrites.`,
		"plugins": `usage: adhost plugins COMMAND

  list                         configured extensions: id, version, kind, digest, verified, qualified
  verify [ID[@VERSION]...]     load and verify the pinned extensions (all, or those named)
  inspect FILE.wasm            the manifest embedded in a module and its sha256
  pin ID@VERSION FILE.wasm     print (--write: update in host.toml) the pin for a module`,
		"plugins list": `usage: adhost plugins list [--config FILE] [--json]

Lists the configured extensions with their pinned digest, whether the module
on disk matches it, and the latest qualification report.`,
		"plugins verify": `usage: adhost plugins verify [--config FILE] [--data DIR] [ID[@VERSION]...]

Loads every pinned extension (or only those named) as serve does — digest,
embedded manifest, compilation, ABI imports, instantiation — and exits 1 on
any problem.`,
		"plugins inspect": `usage: adhost plugins inspect FILE.wasm

Prints the module's sha256 and the manifest embedded in it.`,
		"plugins pin": `usage: adhost plugins pin ID@VERSION FILE.wasm [--config FILE] [--write]

Prints the [[extensions]] pin for a module you have reviewed; --write updates
host.toml in place, keeping its comments.`,
		"qualify": `usage: adhost qualify --provider P --model M [--live] [--json]
       adhost qualify --extension ID@VERSION [--simulate] [--json]

Runs the provider conformance scenarios against a configured provider
instance, or against a pinned extension alone, and stores a qualification
report (JSON and Markdown) for the extension's digest.`,
		"status": `usage: adhost status [--config FILE] [--url URL] [--token-file FILE] [--json]

Health, features, providers, runs and extension instances of a running host.`,
		"doctor": `usage: adhost doctor [--config FILE] [--json]

Checks a configuration: listen address, TLS files, secret references,
extensions, store. Beside a running host it checks that host instead of
trying to bind its address.`,
		"validate": `usage: adhost validate [--config FILE] [--json]

Checks the configuration file only (no extensions, secrets or store), and
prints every problem as FILE:LINE: key.path: what is wrong. Exit 1 on any.`,
		"version": `usage: adhost version [--json]

Prints the adhost version, the Go toolchain, the wazero version and the
extension ABI major version. Also: adhost --version.`,
		"completion": `usage: adhost completion bash|zsh

Prints a shell completion script. bash: source <(adhost completion bash);
zsh: adhost completion zsh > "${fpath[1]}/_adhost".`,
	} {
		cliHelp[name] = text
	}
}

// cliVersionInfo is what `adhost version` reports.
type cliVersionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	Wazero  string `json:"wazero"`
	ABI     int    `json:"abi"`
}

func cliVersions() cliVersionInfo {
	v := cliVersionInfo{Version: "(devel)", Go: goruntime.Version(), Wazero: "unknown", ABI: abi.Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				v.Wazero = d.Version
				if d.Replace != nil {
					v.Wazero = d.Replace.Version
				}
			}
		}
	}
	return v
}

// cliVersion is `adhost version [--json]` (and `adhost --version`).
func cliVersion(_ context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "version")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return cliUsageError(env, "version", "unexpected argument %q", pos[0])
	}
	v := cliVersions()
	if *asJSON {
		return cliPrintJSON(env, v)
	}
	fmt.Fprintf(env.stdout, "adhost %s\ngo     %s\nwazero %s\nabi    %d\n", v.Version, v.Go, v.Wazero, v.ABI)
	return cliExitOK
}

// cliPrintJSON writes v as one JSON line on stdout.
func cliPrintJSON(env *cliEnv, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return env.fail("json", err)
	}
	fmt.Fprintln(env.stdout, string(b))
	return cliExitOK
}

// cliValidateResult is `adhost validate --json`.
type cliValidateResult struct {
	Config   string   `json:"config"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// cliValidate is `adhost validate [--config FILE] [--json]`: the
// configuration alone — decoding and every check that needs no extension,
// secret or store — with every problem and its line, like `caddy
// validate` without provisioning.
func cliValidate(_ context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "validate")
	cfgPath := fs.String("config", "host.toml", "configuration file")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return cliUsageError(env, "validate", "unexpected argument %q", pos[0])
	}
	_, err := config.Load(*cfgPath)
	res := cliValidateResult{Config: *cfgPath, OK: err == nil, Problems: []string{}}
	if err != nil {
		res.Problems = strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	}
	if *asJSON {
		cliPrintJSON(env, res)
	} else if res.OK {
		fmt.Fprintf(env.stdout, "%s: ok\n", *cfgPath)
	} else {
		for _, p := range res.Problems {
			fmt.Fprintln(env.stderr, p)
		}
	}
	if !res.OK {
		return cliExitFail
	}
	return cliExitOK
}

// cliCompletion is `adhost completion bash|zsh`: a script completing the
// commands, the plugins subcommands and each command's flags, generated
// from the same tables the command line uses so it cannot go stale.
func cliCompletion(_ context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "completion")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || (pos[0] != "bash" && pos[0] != "zsh") {
		return cliUsageError(env, "completion", "want one shell: bash or zsh")
	}
	var cmds []string
	for _, c := range cliCommands {
		cmds = append(cmds, c.name)
	}
	flags, subs := cliFlagNames(), cliSubcommands()
	if pos[0] == "bash" {
		fmt.Fprint(env.stdout, bashCompletion(cmds, subs, flags))
	} else {
		fmt.Fprint(env.stdout, zshCompletion(cmds, subs, flags))
	}
	return cliExitOK
}

// cliSubcommands are the subcommands of each command that has them
// ("plugins" → list, verify …), from the help table's two-word entries.
func cliSubcommands() map[string][]string {
	out := map[string][]string{}
	for _, name := range sortedKeysOf(cliHelp) {
		if cmd, sub, ok := strings.Cut(name, " "); ok {
			out[cmd] = append(out[cmd], sub)
		}
	}
	return out
}

// cliFlagNames collects the flags of each command and plugins subcommand
// by asking it for its help (which defines its flags and returns before
// doing anything), so the completion cannot drift from the flag sets.
func cliFlagNames() map[string][]string {
	out := map[string][]string{}
	for _, name := range sortedKeysOf(cliHelp) {
		if name == "completion" || len(cliSubcommands()[name]) > 0 {
			continue
		}
		var buf strings.Builder
		env := &cliEnv{stdout: &buf, stderr: io.Discard}
		Main(context.Background(), append(strings.Fields(name), "--help"), env.stdout, env.stderr)
		var fl []string
		_, defaults, _ := strings.Cut(buf.String(), "\nFlags:\n")
		for _, line := range strings.Split(defaults, "\n") {
			// PrintDefaults: "  -name type" then an indented description.
			if f, ok := strings.CutPrefix(line, "  -"); ok && f != "" && f[0] != ' ' {
				if name := strings.Fields(f)[0]; len(name) == 1 {
					fl = append(fl, "-"+name)
				} else {
					fl = append(fl, "--"+name)
				}
			}
		}
		out[name] = append(fl, "--help")
	}
	return out
}

func bashCompletion(cmds []string, subs, flags map[string][]string) string {
	var b strings.Builder
	b.WriteString("# bash completion for adhost: source <(adhost completion bash)\n_adhost() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} sub=${COMP_WORDS[2]}\n")
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(cmds, " ")+" --help --version")
	b.WriteString("  local key=$cmd\n  case $cmd in\n")
	for _, c := range sortedKeysOf(subs) {
		fmt.Fprintf(&b, "    %q) if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi; key=\"$cmd $sub\";;\n", c, strings.Join(subs[c], " "))
	}
	b.WriteString("  esac\n  case $key in\n")
	for _, k := range sortedKeysOf(flags) {
		fmt.Fprintf(&b, "    %q) COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", k, strings.Join(flags[k], " "))
	}
	b.WriteString("    *) COMPREPLY=($(compgen -f -- \"$cur\"));;\n  esac\n}\ncomplete -o default -F _adhost adhost\n")
	return b.String()
}

func zshCompletion(cmds []string, subs, flags map[string][]string) string {
	var b strings.Builder
	b.WriteString("#compdef adhost\n# zsh completion for adhost: adhost completion zsh > \"${fpath[1]}/_adhost\"\n_adhost() {\n")
	fmt.Fprintf(&b, "  if (( CURRENT == 2 )); then compadd -- %s --help --version; return; fi\n", strings.Join(cmds, " "))
	b.WriteString("  local key=$words[2]\n  case $words[2] in\n")
	for _, c := range sortedKeysOf(subs) {
		fmt.Fprintf(&b, "    %q) if (( CURRENT == 3 )); then compadd -- %s; return; fi; key=\"$words[2] $words[3]\";;\n", c, strings.Join(subs[c], " "))
	}
	b.WriteString("  esac\n  case $key in\n")
	for _, k := range sortedKeysOf(flags) {
		fmt.Fprintf(&b, "    %q) compadd -- %s; _files;;\n", k, strings.Join(flags[k], " "))
	}
	b.WriteString("    *) _files;;\n  esac\n}\n_adhost \"$@\"\n")
	return b.String()
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
