// Package clisimtest is the test harness of the local CLI adapters: it
// loads an adapter's real wasm build through runtime/wasm, binds it to a
// fake CLI (package clisim) with a private account directory, and checks
// what the adapter made of a transcript and how the host treated the
// process.
package clisimtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"adhost/internal/clisim"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

// Adapter names the adapter under test.
type Adapter struct {
	Dir     string // "plugins/claude-code"
	ID      string // "claude-code"
	Version string
	Binary  string // the manifest's binary id
	// Streams is the manifest's textStreaming.
	Streams bool
}

// Load builds the adapter for wasip1 (once per test binary) and loads it
// pinned with the build's digest; it is closed when the test ends.
func Load(t testing.TB, a Adapter) *wasm.Extension {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the wasm module; skipped with -short")
	}
	path := testenv.BuildPlugin(t, a.Dir)
	x, err := wasm.Load(t.Context(), wasm.Pin{ID: a.ID, Version: a.Version, Path: path, SHA256: Digest(t, path)}, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(context.Background()) })
	return x
}

// Digest is the sha256 of a file.
func Digest(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Bound is a provider instance bound to a fake CLI.
type Bound struct {
	runtime.Provider
	Fake *clisim.Fake
	Home string
}

// Bind writes a fake replaying tr into a fresh directory, makes a private
// account directory, and binds x to them; env are further variables
// (the manifest's process.env).
func Bind(t testing.TB, x *wasm.Extension, a Adapter, tr *clisim.Transcript, env map[string]string) *Bound {
	t.Helper()
	dir := t.TempDir()
	fake, err := clisim.WriteFake(dir, tr)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "account")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := x.Provider(wasm.InstanceConfig{ID: a.ID + "-test", Process: Binding(t, a.Binary, fake.Path, home, env)})
	if err != nil {
		t.Fatal(err)
	}
	return &Bound{Provider: p, Fake: fake, Home: home}
}

// Binding is the ProcessBinding of a binary at path with its current
// digest.
func Binding(t testing.TB, id, path, home string, env map[string]string) *wasm.ProcessBinding {
	pb := &wasm.ProcessBinding{BinaryID: id, Path: path, SHA256: Digest(t, path), Home: home,
		Env: map[string]func(context.Context) (string, error){}, Grace: 500 * time.Millisecond}
	for k, v := range env {
		pb.Env[k] = func(context.Context) (string, error) { return v, nil }
	}
	return pb
}

// Input is the turn every transcript answers.
func Input(tr *clisim.Transcript, model string) *abi.CompleteInput {
	return &abi.CompleteInput{Model: model, Instructions: "Be brief.",
		Messages:        []abi.Message{{Role: abi.RoleUser, Content: "Hello " + tr.Name}},
		MaxOutputTokens: 256, Step: 1, Buffered: tr.Want.Buffered}
}

// Sink records what a turn streamed.
type Sink struct {
	OnText func()

	mu       sync.Mutex
	deltas   []string
	progress int
	usage    []abi.Usage
}

func (s *Sink) Text(d string) {
	s.mu.Lock()
	s.deltas = append(s.deltas, d)
	f := s.OnText
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *Sink) Progress() {
	s.mu.Lock()
	s.progress++
	s.mu.Unlock()
}

func (s *Sink) Usage(u abi.Usage) {
	s.mu.Lock()
	s.usage = append(s.usage, u)
	s.mu.Unlock()
}

// Deltas are the streamed deltas so far.
func (s *Sink) Deltas() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deltas...)
}

// Check runs tr's turn through b and compares the outcome with tr.Want.
// A transcript that hangs is skipped (the hygiene tests run it).
func Check(t *testing.T, a Adapter, b *Bound, tr *clisim.Transcript, model string) {
	t.Helper()
	if tr.Hang {
		t.Skip("hangs: see the hygiene tests")
	}
	sink := &Sink{}
	out, err := b.Complete(t.Context(), Input(tr, model), sink)
	w := tr.Want
	if w.Error != "" {
		if err == nil {
			t.Fatalf("want %s, got output %+v", w.Error, out)
		}
		if code := protocol.CodeOf(err); string(code) != w.Error {
			t.Fatalf("code %s, want %s (%v)", code, w.Error, err)
		}
		Public(t, err, tr)
		return
	}
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if out.Text != w.Text {
		t.Errorf("text %q, want %q", out.Text, w.Text)
	}
	if w.Finish != "" && out.FinishReason != w.Finish {
		t.Errorf("finishReason %q, want %q", out.FinishReason, w.Finish)
	}
	got, _ := json.Marshal(out.Usage)
	want, _ := json.Marshal(w.Usage)
	if string(got) != string(want) {
		t.Errorf("usage %s, want %s", got, want)
	}
	deltas := sink.Deltas()
	switch {
	case a.Streams && !w.Buffered:
		if strings.Join(deltas, "\x00") != strings.Join(w.Deltas, "\x00") {
			t.Errorf("deltas %q, want %q", deltas, w.Deltas)
		}
	case len(deltas) > 0:
		t.Errorf("streamed %q in a turn that must not stream", deltas)
	}
}

// Public fails when err's public message carries anything the CLI printed
// (a line of its stdout or stderr).
func Public(t testing.TB, err error, tr *clisim.Transcript) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("not a protocol error: %v", err)
	}
	msg := pe.Message
	if msg == "" {
		msg = protocol.Message(pe.Code)
	}
	for _, l := range strings.Split(string(tr.Stderr)+"\n"+string(tr.Stdout), "\n") {
		if l = strings.TrimSpace(l); len(l) >= 8 && strings.Contains(msg, l) {
			t.Errorf("public message %q carries CLI output %q", msg, l)
		}
	}
	for _, w := range []string{"conformance-secret-marker", "Invalid API key", "TypeError", "node_modules"} {
		if strings.Contains(msg, w) {
			t.Errorf("public message %q carries %q", msg, w)
		}
	}
}

// Gone polls until none of pids exists any more (a zombie counts as gone:
// it holds no resources but its table entry) or the deadline passes, and
// reports the ones still alive.
func Gone(pids []int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		var alive []int
		for _, pid := range pids {
			if Alive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports whether pid is a live (not zombie) process.
func Alive(pid int) bool {
	if pid <= 1 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// PIDs polls until the fake recorded its pid and its child's pid (a
// hanging transcript), and returns them.
func PIDs(t testing.TB, f *clisim.Fake) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pid, _ := strconv.Atoi(strings.TrimSpace(f.Read("pid")))
		child, _ := strconv.Atoi(strings.TrimSpace(f.Read("child.pid")))
		if pid > 0 && child > 0 {
			return []int{pid, child}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake CLI did not start its child (pid %d, child %d)", pid, child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
