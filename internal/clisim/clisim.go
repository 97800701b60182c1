// Package clisim replays recorded CLI transcripts through fake binaries,
// for the local CLI adapters' tests (plugins/claude-code, plugins/codex,
// plugins/gemini-cli) and for `adhost qualify --simulate` of those
// adapters, so neither needs the real CLI installed.
//
// A transcript is transcripts/<extension id>/<case>.txtar. The comment
// says where its shape comes from; the files are:
//
//	stdout.jsonl  what the CLI prints on stdout, byte for byte
//	stderr        what it prints on stderr (optional)
//	exit          its exit code (optional, default 0)
//	hang          present: after its output it starts a child and waits
//	              forever, so only the host's kill ends it
//	want.json     the adapter's expected outcome (Want)
//
// A fake binary is a POSIX shell script. Fake records what the host gave
// it — its arguments, its environment, its working directory, its stdin
// and process ids — into a directory the test reads back.
package clisim

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/txtar"

	"adhost/abi"
)

//go:embed transcripts
var transcripts embed.FS

// Transcript is one recorded CLI run.
type Transcript struct {
	Name    string
	Comment string
	Stdout  []byte
	Stderr  []byte
	Exit    int
	Hang    bool
	Want    Want
}

// Want is what the adapter must make of a transcript: a text (streamed
// as Deltas when the adapter streams) with a usage, or an error code.
type Want struct {
	Text   string     `json:"text"`
	Deltas []string   `json:"deltas,omitempty"`
	Usage  *abi.Usage `json:"usage,omitempty"`
	Finish string     `json:"finishReason,omitempty"`
	Error  string     `json:"error,omitempty"`
	// Buffered runs the turn buffered (a JSON-mode run without an idle
	// timeout): the adapter asks for no deltas.
	Buffered bool `json:"buffered,omitempty"`
	// Scenario names the qualification scenario the transcript answers
	// ("text", "structured", "private-error", "cancel"), if any.
	Scenario string `json:"scenario,omitempty"`
}

// Transcripts returns the transcripts of an extension, sorted by name.
func Transcripts(id string) ([]*Transcript, error) {
	dir := path.Join("transcripts", id)
	entries, err := fs.ReadDir(transcripts, dir)
	if err != nil {
		return nil, fmt.Errorf("clisim: no transcripts for %q", id)
	}
	var out []*Transcript
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".txtar") {
			continue
		}
		b, err := fs.ReadFile(transcripts, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		t, err := Parse(strings.TrimSuffix(e.Name(), ".txtar"), b)
		if err != nil {
			return nil, fmt.Errorf("clisim: %s/%s: %w", id, e.Name(), err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Has reports whether clisim holds transcripts for an extension id.
func Has(id string) bool {
	_, err := fs.Stat(transcripts, path.Join("transcripts", id))
	return err == nil
}

// Parse reads one transcript.
func Parse(name string, data []byte) (*Transcript, error) {
	a := txtar.Parse(data)
	t := &Transcript{Name: name, Comment: string(a.Comment)}
	seen := false
	for _, f := range a.Files {
		switch f.Name {
		case "stdout.jsonl":
			t.Stdout, seen = f.Data, true
		case "stderr":
			t.Stderr = f.Data
		case "exit":
			n, err := strconv.Atoi(strings.TrimSpace(string(f.Data)))
			if err != nil || n < 0 || n > 255 {
				return nil, fmt.Errorf("exit: %q is not an exit code", f.Data)
			}
			t.Exit = n
		case "hang":
			t.Hang = true
		case "want.json":
			dec := json.NewDecoder(bytes.NewReader(f.Data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&t.Want); err != nil {
				return nil, fmt.Errorf("want.json: %w", err)
			}
		default:
			return nil, fmt.Errorf("unknown file %q", f.Name)
		}
	}
	if !seen {
		return nil, fmt.Errorf("no stdout.jsonl")
	}
	return t, nil
}

// Fake is a fake CLI written by WriteFake.
type Fake struct {
	// Path is the script, and Dir where it records what it saw.
	Path, Dir string
}

// WriteFake writes a script into dir that replays t: it records its
// arguments (args, one per line), environment (env), working directory
// (cwd), stdin (stdin) and process id (pid) into dir, prints t's stdout
// and stderr, and exits with t's code; a hanging transcript then starts a
// child (its pid in child.pid) and waits for it forever.
func WriteFake(dir string, t *Transcript) (*Fake, error) {
	for name, data := range map[string][]byte{"stdout.jsonl": t.Stdout, "stderr.txt": t.Stderr} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	q := shellQuote(dir)
	fmt.Fprintf(&b, "#!/bin/sh\n")
	fmt.Fprintf(&b, "d=%s\n", q)
	b.WriteString(`echo $$ > "$d/pid"
for a in "$@"; do printf '%s\n' "$a"; done > "$d/args"
env > "$d/env"
pwd > "$d/cwd"
cat > "$d/stdin"
cat "$d/stdout.jsonl"
cat "$d/stderr.txt" >&2
`)
	if t.Hang {
		b.WriteString(`sleep 3600 &
echo $! > "$d/child.pid"
wait
`)
	}
	fmt.Fprintf(&b, "exit %d\n", t.Exit)
	p := filepath.Join(dir, "fake-cli")
	if err := os.WriteFile(p, []byte(b.String()), 0o700); err != nil {
		return nil, err
	}
	return &Fake{Path: p, Dir: dir}, nil
}

// Read returns a file the fake recorded ("args", "env", "cwd", "stdin",
// "pid", "child.pid").
func (f *Fake) Read(name string) string {
	b, _ := os.ReadFile(filepath.Join(f.Dir, name))
	return string(b)
}

// Args returns the recorded arguments.
func (f *Fake) Args() []string {
	s := strings.TrimSuffix(f.Read("args"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Env returns the recorded environment as sorted NAME=value lines,
// without the variables a POSIX shell sets itself (PWD, SHLVL, _).
func (f *Fake) Env() []string {
	var out []string
	for _, l := range strings.Split(f.Read("env"), "\n") {
		name, _, _ := strings.Cut(l, "=")
		switch name {
		case "", "PWD", "OLDPWD", "SHLVL", "_":
			continue
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// WriteDispatcher writes one script into dir that answers every
// qualification scenario of id's transcripts: it reads the prompt from
// stdin and replays the transcript whose want.json names the scenario the
// prompt asks for ("conformance:text" …). A prompt naming none fails with
// exit code 2.
func WriteDispatcher(dir, id string) (string, error) {
	ts, err := Transcripts(id)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\nin=$(cat)\ncase \"$in\" in\n")
	n := 0
	for _, t := range ts {
		if t.Want.Scenario == "" {
			continue
		}
		n++
		base := filepath.Join(dir, t.Name)
		if err := os.WriteFile(base+".out", t.Stdout, 0o600); err != nil {
			return "", err
		}
		if err := os.WriteFile(base+".err", t.Stderr, 0o600); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "*conformance:%s*)\n  cat %s\n  cat %s >&2\n", t.Want.Scenario, shellQuote(base+".out"), shellQuote(base+".err"))
		if t.Hang {
			b.WriteString("  sleep 3600 &\n  wait\n")
		}
		fmt.Fprintf(&b, "  exit %d ;;\n", t.Exit)
	}
	b.WriteString("esac\necho 'unknown scenario' >&2\nexit 2\n")
	if n == 0 {
		return "", fmt.Errorf("clisim: %s has no qualification transcripts", id)
	}
	p := filepath.Join(dir, id+"-fake")
	if err := os.WriteFile(p, []byte(b.String()), 0o700); err != nil {
		return "", err
	}
	return p, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
