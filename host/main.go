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
		{"plugins", "list | verify | inspect FILE.wasm | pin ID@VERSION FILE.wasm [--write]", cliPlugins},
		{"qualify", "run the provider conformance scenarios and write a qualification report", cliQualify},
		{"status", "status of a running host", cliStatus},
		{"doctor", "check a configuration: ports, TLS files, secrets, extensions, store", cliDoctor},
	}
}

// Main runs the adhost command line (host-config.md §1) and returns the
// process exit code: 0 success, 1 failure, 2 usage error. ctx cancellation
// stops a running `serve` gracefully, as SIGINT/SIGTERM do.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		cliUsage(stderr)
		return cliExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		cliUsage(stdout)
		return cliExitOK
	}
	for _, c := range cliCommands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(stderr, "adhost: unknown command %q\n", args[0])
	cliUsage(stderr)
	return cliExitUsage
}

func cliUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: adhost COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range cliCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command that reads the configuration takes --config FILE (default host.toml).")
}

// cliFlags returns a flag set that reports errors on stderr without
// exiting, and accepts flags after positional arguments too.
func cliFlags(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("adhost "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	return fs
}

// cliParse parses args allowing flags and positional arguments in any
// order ("pin ID FILE --write"). It returns the positional arguments, or
// ok=false after printing the problem (help: exit 0).
func cliParse(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, cliExitOK, false
			}
			return nil, cliExitUsage, false
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
