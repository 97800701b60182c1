//go:build linux

package wasm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"adhost/abi"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

// The process capability (process.go): a hand-written guest drives fake
// CLIs — small shell scripts written into the test's directory — through
// every host function, well-behaved and hostile.

var procGuest struct {
	once sync.Once
	path string
	err  error
}

func loadProcGuest(t *testing.T) *env { return loadProcGuestB(t) }

func loadProcGuestB(t testing.TB) *env {
	t.Helper()
	procGuest.once.Do(func() {
		procGuest.path, procGuest.err = testenv.Build(guestDir+"procguest", testenv.WithManifest(guestDir+"procguest/manifest.toml"))
	})
	if procGuest.err != nil {
		t.Fatal(procGuest.err)
	}
	guests["procguest"] = procGuest.path
	return loadGuest(t, "procguest", "procguest", "1.0.0", Options{})
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "cli")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil { // a new inode, as an upgrade would
		t.Fatal(err)
	}
	return p
}

// account returns a fresh private account directory.
func account(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

func procBinding(t *testing.T, path, home string) *ProcessBinding {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &ProcessBinding{BinaryID: "cli", Path: path, SHA256: sha256Hex(b), Home: home, Grace: 200 * time.Millisecond,
		Env: map[string]func(context.Context) (string, error){
			"CLI_TOKEN": func(context.Context) (string, error) { return "tok-0123456789-secret", nil },
		}}
}

func bindProc(t *testing.T, e *env, pb *ProcessBinding) runtime.Provider {
	t.Helper()
	p, err := e.x.Provider(InstanceConfig{ID: "proc-test", Process: pb})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, p runtime.Provider, msg string) string {
	t.Helper()
	out, err := p.Complete(t.Context(), input(msg), &sink{})
	if err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	return out.Text
}

// pidsIn reads the process ids a script recorded, one per line.
func pidsIn(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d process ids, want %d", path, len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports a live, non-zombie process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// gone polls until no pid is alive; it fails after 5 s (the bound a
// client's disconnect must meet).
func gone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still alive 5 s later", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessImportsNeedManifest(t *testing.T) {
	path, err := testenv.Build(guestDir+"procguest", testenv.WithManifest(guestDir+"procguest/noprocess.toml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(t.Context(), Pin{ID: "procguest", Version: "1.0.0", Path: path, SHA256: sha256Hex(b)}, Options{Cache: sharedCache})
	if !errors.Is(err, ErrImportDenied) || !strings.Contains(err.Error(), "[process]") {
		t.Fatalf("Load without [process]: %v, want %v naming [process]", err, ErrImportDenied)
	}
}

func TestProcessBindRefusals(t *testing.T) {
	e := loadProcGuest(t)
	dir := t.TempDir()
	cli := script(t, dir, "exit 0\n")
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pb   func(*ProcessBinding) *ProcessBinding
		want string
	}{
		{"no binary bound", func(*ProcessBinding) *ProcessBinding { return nil }, "no binary is bound"},
		{"undeclared binary", func(pb *ProcessBinding) *ProcessBinding { pb.BinaryID = "other"; return pb }, "not declared"},
		{"relative path", func(pb *ProcessBinding) *ProcessBinding { pb.Path = "cli"; return pb }, "not absolute"},
		{"missing binary", func(pb *ProcessBinding) *ProcessBinding { pb.Path = filepath.Join(dir, "nope"); return pb }, "no such file"},
		{"digest mismatch", func(pb *ProcessBinding) *ProcessBinding { pb.SHA256 = strings.Repeat("0", 64); return pb }, "sha256 mismatch"},
		{"account directory not private", func(pb *ProcessBinding) *ProcessBinding { pb.Home = open; return pb }, "want 0700"},
		{"undeclared variable", func(pb *ProcessBinding) *ProcessBinding {
			pb.Env["LD_PRELOAD"] = func(context.Context) (string, error) { return "x", nil }
			return pb
		}, "not declared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.x.Provider(InstanceConfig{ID: "p", Process: tc.pb(procBinding(t, cli, account(t)))})
			if !errors.Is(err, ErrInstanceConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %v with %q", err, ErrInstanceConfig, tc.want)
			}
		})
	}
}

// TestProcessRun drives one well-behaved process: arguments passed as
// they are (no shell), stdin, lines longer than the guest's buffer, a last
// line without a newline, CRLF endings, stderr, the exit code.
func TestProcessRun(t *testing.T) {
	e := loadProcGuest(t)
	cli := script(t, t.TempDir(), `cat
printf '\n%s\n' "$1"
printf 'long line here\r\n'
printf 'tail'
echo 'noise on stderr' >&2
exit 3
`)
	p := bindProc(t, e, procBinding(t, cli, account(t)))
	if got, want := run(t, p, "run:a;b$(x)"), "input|a;b$(x)|long line here|tail exit 3 stderr 16"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := run(t, p, "raw:z"), "input\nz\nlong line here\r\ntail exit 3 stderr 16"; got != want {
		t.Errorf("raw: got %q, want %q", got, want)
	}

	// The bounds at their edges: a line of exactly MaxProcessLineBytes
	// passes and one byte more is refused; stderr is kept up to
	// MaxProcessStderrBytes.
	edge := script(t, t.TempDir(), `head -c $1 /dev/zero | tr '\0' a
echo
head -c 100000 /dev/zero >&2
`)
	p = bindProc(t, e, procBinding(t, edge, account(t)))
	max := strconv.Itoa(abi.MaxProcessLineBytes)
	if got, want := run(t, p, "lens:"+max), max+" exit 0 stderr "+strconv.Itoa(abi.MaxProcessStderrBytes); got != want {
		t.Errorf("line at the bound: %q, want %q", got, want)
	}
	if got, want := run(t, p, "lens:"+strconv.Itoa(abi.MaxProcessLineBytes+1)), "read errno "+strconv.Itoa(int(abi.ErrLimit)); got != want {
		t.Errorf("line past the bound: %q, want %q", got, want)
	}
}

// TestProcessEnvironment: the process sees HOME (the account directory,
// also its working directory), the minimal PATH and the variables
// host.toml names — nothing of the host's own environment — and a secret
// it echoes is masked before the guest reads it.
func TestProcessEnvironment(t *testing.T) {
	t.Setenv("ADHOST_HOST_CANARY", "must-not-leak")
	e := loadProcGuest(t)
	dir := t.TempDir()
	cli := script(t, dir, `env > "`+dir+`/env"
pwd > "`+dir+`/cwd"
echo "key=$CLI_TOKEN"
`)
	home := account(t)
	p := bindProc(t, e, procBinding(t, cli, home))
	got := run(t, p, "run:")
	if strings.Contains(got, "tok-0123456789-secret") || !strings.HasPrefix(got, "key=*****") {
		t.Errorf("the echoed secret reached the guest unmasked: %q", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "env"))
	vars := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "PWD", "SHLVL", "_", "OLDPWD": // set by the shell itself
			continue
		}
		vars[k] = v
	}
	want := map[string]string{"HOME": home, "PATH": DefaultProcessPATH, "CLI_TOKEN": "tok-0123456789-secret"}
	if len(vars) != len(want) {
		t.Errorf("environment %v, want exactly %v", vars, want)
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s=%q, want %q", k, vars[k], v)
		}
	}
	if cwd, _ := os.ReadFile(filepath.Join(dir, "cwd")); strings.TrimSpace(string(cwd)) != home {
		t.Errorf("working directory %q, want %q", cwd, home)
	}
}

// TestProcessHostileGuest: a guest declaring [process] tries binaries it
// is not bound to (other ids, paths), floods stdout, and leaves its
// processes open — each is contained.
func TestProcessHostileGuest(t *testing.T) {
	e := loadProcGuest(t)
	dir := t.TempDir()

	t.Run("unbound binaries", func(t *testing.T) {
		p := bindProc(t, e, procBinding(t, script(t, dir, "exit 0\n"), account(t)))
		for _, name := range []string{"other", "/bin/sh", "../cli", dir + "/cli", "cli ", ""} {
			if got, want := run(t, p, "start:"+name), "handle "+strconv.Itoa(int(abi.ErrDenied)); got != want {
				t.Errorf("start %q: %s, want %s", name, got, want)
			}
		}
	})

	t.Run("stdout flood", func(t *testing.T) {
		fl := t.TempDir()
		cli := script(t, fl, `echo $$ > "`+fl+`/pids"
line=$(head -c 60000 /dev/zero | tr '\0' a)
while :; do echo "$line"; done
`)
		p := bindProc(t, e, procBinding(t, cli, account(t)))
		got := run(t, p, "flood")
		if !strings.HasSuffix(got, "errno "+strconv.Itoa(int(abi.ErrLimit))) {
			t.Fatalf("flood: %q, want ErrLimit", got)
		}
		n, _ := strconv.Atoi(strings.Fields(got)[1])
		if limit := abi.MaxProcessStdoutBytes / 60001; n < limit-1 || n > limit {
			t.Errorf("%d lines read before the bound, want %d", n, limit)
		}
		gone(t, pidsIn(t, fl+"/pids", 1))
	})

	t.Run("one line without end", func(t *testing.T) {
		cli := script(t, t.TempDir(), "head -c 10000000 /dev/zero | tr '\\0' a\n")
		p := bindProc(t, e, procBinding(t, cli, account(t)))
		if got := run(t, p, "flood"); got != "lines 0 errno "+strconv.Itoa(int(abi.ErrLimit)) {
			t.Fatalf("long line: %q, want ErrLimit", got)
		}
	})

	t.Run("never closed", func(t *testing.T) {
		lk := t.TempDir()
		cli := script(t, lk, `echo $$ >> "`+lk+`/pids"
trap '' TERM
sleep 3600 &
echo $! >> "`+lk+`/pids"
echo ready
wait
`)
		p := bindProc(t, e, procBinding(t, cli, account(t)))
		limit := strconv.Itoa(int(abi.ErrLimit))
		if got, want := run(t, p, "leak:6"), "1 2 3 4 "+limit+" "+limit; got != want {
			t.Fatalf("leak: %q, want %q", got, want)
		}
		// They ignore SIGTERM: the group is killed after the grace period.
		gone(t, pidsIn(t, lk+"/pids", 2*abi.MaxProcesses))
	})
}

// TestProcessCancel: a hung CLI and the child it spawned are killed when
// the call is cancelled, while the guest is blocked waiting for it.
func TestProcessCancel(t *testing.T) {
	e := loadProcGuest(t)
	dir := t.TempDir()
	cli := script(t, dir, `echo $$ > "`+dir+`/pids"
sleep 3600 &
echo $! >> "`+dir+`/pids"
wait
`)
	p := bindProc(t, e, procBinding(t, cli, account(t)))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Complete(ctx, input("wait"), &sink{})
		errc <- err
	}()
	pids := pidsIn(t, dir+"/pids", 2)
	cancel()
	if err := <-errc; protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("cancelled call: %v, want CANCELLED", err)
	}
	gone(t, pids)
}

// TestProcessBinaryReplaced: a binary replaced after it was verified is
// refused at the next start, and the run fails with a clear code; one
// left alone is not hashed again.
func TestProcessBinaryReplaced(t *testing.T) {
	e := loadProcGuest(t)
	dir := t.TempDir()
	cli := script(t, dir, "echo one\n")
	p := bindProc(t, e, procBinding(t, cli, account(t)))
	if got := run(t, p, "run:"); got != "one exit 0 stderr 0" {
		t.Fatalf("first run: %q", got)
	}
	script(t, dir, "echo two\n")
	_, err := p.Complete(t.Context(), input("run:"), &sink{})
	if protocol.CodeOf(err) != protocol.CodeProviderExtensionUnavail {
		t.Fatalf("replaced binary: %v, want %s", err, protocol.CodeProviderExtensionUnavail)
	}
	if !strings.Contains(e.logs.String(), "sha256 mismatch") {
		t.Error("the operator's log does not say why the binary was refused")
	}
}

func TestDigestCache(t *testing.T) {
	dir := t.TempDir()
	path := script(t, dir, "exit 0\n")
	b, _ := os.ReadFile(path)
	var c digestCache
	for i, want := range []bool{true, false, false} {
		hashed, err := c.verify(path, sha256Hex(b))
		if err != nil || hashed != want {
			t.Fatalf("verify %d: hashed %v, %v; want hashed %v", i, hashed, err, want)
		}
	}
	// Modified in place (same inode, same size): the times differ, so it
	// is hashed again and refused.
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if hashed, err := c.verify(path, sha256Hex(b)); !hashed || !errors.Is(err, ErrBinaryRefused) {
		t.Fatalf("modified binary: hashed %v, %v", hashed, err)
	}
}

// TestProcessExtensionClose: closing the extension (host shutdown) kills
// a CLI whose call is still waiting for it, and its child.
func TestProcessExtensionClose(t *testing.T) {
	e := loadProcGuest(t)
	dir := t.TempDir()
	cli := script(t, dir, `echo $$ > "`+dir+`/pids"
sleep 3600 &
echo $! >> "`+dir+`/pids"
wait
`)
	p := bindProc(t, e, procBinding(t, cli, account(t)))
	errc := make(chan error, 1)
	go func() {
		_, err := p.Complete(context.Background(), input("wait"), &sink{})
		errc <- err
	}()
	pids := pidsIn(t, dir+"/pids", 2)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_ = e.x.Close(ctx) // gives up waiting for the call, then stops its process
	gone(t, pids)
	<-errc // and the call waiting for it ends (the guest saw it exit)
}
