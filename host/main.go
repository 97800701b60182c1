package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes of the adhost command.
const (
	cliExitOK    = 0
	cliExitFail  = 1 // the command ran and failed (config, pin, run error …)
	cliExitUsage = 2 // bad command line
)

// cliCommand is one `adhost` subcommand.
type cliCommand struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// cliEnv carries the streams of one invocation (tests pass buffers).
type cliEnv struct {
	stdout, stderr io.Writer
}

// failf prints "adhost CMD: message" on stderr and returns cliExitFail.
func (e *cliEnv) failf(cmd, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "adhost %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return cliExitFail
}

// fail prints err one problem per line, each prefixed with the command.
func (e *cliEnv) fail(cmd string, err error) int {
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(e.stderr, "adhost %s: %s\n", cmd, line)
	}
	return cliExitFail
}

var cliCommands []cliCommand

func init() {
	cliCommands = []cliCommand{
		{"serve", "validate the configuration, load and verify every extension, serve HTTP(S)", cliServe},
		{"init", "write a starter host.toml, the data directory and a dev token", cliInit},
		{"run", "run a prompt against a running host and print the result", cliRun},
		{"sessions", "create | read ID | delete ID: conversation sessions of a running host", cliSessionsCmd},
		{"jobs", "submit | read ID | events ID | cancel ID: durable jobs of a running host", cliJobsCmd},
		{"ingest", "--corpus C FILE...: ingest documents into a corpus of a running host", cliIngestCmd},
		{"search", "--corpus C \"query\": ranked passages of a corpus of a running host", cliSearchCmd},
		{"plugins", "list | verify | inspect FILE.wasm | pin ID@VERSION FILE.wasm [--write]", cliPlugins},
		{"qualify", "run the provider conformance scenarios and write a qualification report", cliQualify},
		{"status", "status of a running host", cliStatus},
		{"reload", "make the running host re-read host.toml (as SIGHUP does)", cliReload},
		{"doctor", "check a configuration: ports, TLS files, secrets, extensions, store", cliDoctor},
		{"validate", "check the configuration file only, every problem with its line", cliValidate},
		{"version", "print the adhost, Go, wazero and ABI versions", cliVersion},
		{"completion", "print a bash or zsh completion script", cliCompletion},
	}
}

// Main runs the adhost command line (host-config.md §1) and returns the
// process exit code: 0 success, 1 failure, 2 usage error. ctx cancellation
// stops a running `serve` gracefully, as SIGINT/SIGTERM do.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "adhost: no command (see 'adhost --help')")
		return cliExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			// "adhost help run" is "adhost run --help".
			return Main(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		cliUsage(stdout)
		return cliExitOK
	case "--version", "-version":
		return cliVersion(ctx, env, args[1:])
	}
	for _, c := range cliCommands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(stderr, "adhost: unknown command %q (see 'adhost --help')\n", args[0])
	return cliExitUsage
}

func cliUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: adhost COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range cliCommands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command that reads the configuration takes --config FILE (default host.toml).")
	fmt.Fprintln(w, "'adhost COMMAND --help' (or 'adhost help COMMAND') describes a command and its flags.")
}

// cliFlags returns a flag set for the command "adhost NAME" that prints
// nothing by itself: cliParse reports help (stdout, exit 0) and flag
// errors (one line on stderr, exit 2) the same way for every command. The
// synopsis and description of the help come from cliHelp[NAME].
func cliFlags(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("adhost "+name, flag.ContinueOnError)
	fs.SetOutput(cliSilent{env})
	fs.Usage = func() {}
	return fs
}

// cliSilent is the output of a flag set made by cliFlags: it discards what
// the flag package would print (cliParse words the errors itself) and
// carries the command's streams to cliParse.
type cliSilent struct{ env *cliEnv }

func (cliSilent) Write(p []byte) (int, error) { return len(p), nil }

// cliHelp is the help text of each command and subcommand: the synopsis
// line (with its positional arguments), then what it does. Flags are
// listed after it from the flag set. A command without an entry gets its
// summary from cliCommands.
var cliHelp = map[string]string{}

// cliPrintHelp writes the help of fs's command to w.
func cliPrintHelp(w io.Writer, fs *flag.FlagSet) {
	name := strings.TrimPrefix(fs.Name(), "adhost ")
	text, ok := cliHelp[name]
	if !ok {
		text = "usage: " + fs.Name() + " [flags]"
		for _, c := range cliCommands {
			if c.name == name {
				text += "\n\n" + c.summary
			}
		}
	}
	fmt.Fprintln(w, strings.TrimRight(text, "\n"))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// cliUsageError reports a bad command line: one line on stderr saying what
// was wrong and where to find the help, exit 2.
func cliUsageError(env *cliEnv, cmd, format string, args ...any) int {
	fmt.Fprintf(env.stderr, "adhost %s: %s (see 'adhost %s --help')\n", cmd, fmt.Sprintf(format, args...), cmd)
	return cliExitUsage
}

// cliParse parses args allowing flags and positional arguments in any
// order ("pin ID FILE --write"). It returns the positional arguments, or
// ok=false after answering: -h/--help prints the command's help on stdout
// (exit 0), a flag error one line on stderr naming the flag (exit 2).
func cliParse(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	env := fs.Output().(cliSilent).env
	cmd := strings.TrimPrefix(fs.Name(), "adhost ")
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				cliPrintHelp(env.stdout, fs)
				return nil, cliExitOK, false
			}
			return nil, cliUsageError(env, cmd, "%v", err), false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, 0, true
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), 0, true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
