package e2e_test

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDoctorBesideRunningHost: `adhost doctor` on the configuration of a
// running host checks that host rather than failing to bind its address,
// and reports the store the host holds as held (with its pid) — exit 0.
// Once the host is gone the same address and store check as free.
func TestDoctorBesideRunningHost(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, _ := os.ReadFile(s.config)
	os.WriteFile(s.config, append([]byte("version = 1\n[server]\nlisten = \""+addr+"\"\n"), strings.TrimPrefix(string(b), "version = 1\n")...), 0o644)
	srv := startServer(t, s, "--listen", addr)

	code, out, errOut := adhost(t, "doctor", "--config", s.config, "--json")
	var checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out, errOut)
	}
	byName := map[string]string{}
	for _, c := range checks {
		if !c.OK {
			t.Errorf("FAIL %s: %s", c.Name, c.Detail)
		}
		byName[strings.Fields(c.Name)[0]] = c.Detail
	}
	if code != 0 {
		t.Errorf("doctor beside a running host: exit %d", code)
	}
	if d := byName["listen"]; !strings.Contains(d, "running adhost") {
		t.Errorf("listen check: %q", d)
	}
	if d := byName["store"]; !strings.Contains(d, "held by another process") || !strings.Contains(d, "is another adhost running? (pid ") {
		t.Errorf("store check: %q", d)
	}

	srv.stop(t, os.Interrupt)
	code, out, _ = adhost(t, "doctor", "--config", s.config)
	if code != 0 || !strings.Contains(out, "ok    listen "+addr+"\n") || strings.Contains(out, "held") {
		t.Errorf("doctor after the host stopped: exit %d\n%s", code, out)
	}
}

// TestServeColdStart: on an empty compilation cache serve says what it is
// compiling and how long it took; SIGINT in the middle of it says start-up
// was interrupted (exit 130) rather than blaming an extension.
func TestServeColdStart(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	cache := filepath.Join(s.dir, "data", "wasm-cache")
	os.Remove(cache) // the shared warm cache is a symlink
	srv := startServer(t, s)
	srv.stop(t, os.Interrupt)
	if e := srv.stderr.String(); !strings.Contains(e, "compiling extension") || !strings.Contains(e, `extension=fixture@1.0.0`) || !strings.Contains(e, "compiled extension") {
		t.Fatalf("cold start said nothing about compiling:\n%s", e)
	}

	// Interrupted while compiling.
	s2 := newSite(t)
	os.Remove(filepath.Join(s2.dir, "data", "wasm-cache"))
	cmd := exec.Command(adhostBin, "serve", "--config", s2.config, "--listen", "127.0.0.1:0")
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errb.String(), "compiling extension") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no compiling line: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "start-up interrupted") || strings.Contains(errb.String(), "instantiate failed") {
		t.Fatalf("interrupted start: %v\n%s", err, errb.String())
	}
}

// TestOperatorCommandsBesideRunningHost: while a host holds the store,
// qualify stores its report through the host's operator socket (exit 0),
// plugins list reads the result through it, and status shows the host's
// process — none of them fights the host for the store.
func TestOperatorCommandsBesideRunningHost(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	srv := startServer(t, s)
	sock := filepath.Join(s.dir, "data", "adhost.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator socket: %v %v", fi, err)
	}
	code, out, errOut := adhost(t, "qualify", "--config", s.config, "--extension", "fixture@1.0.0", "--simulate", "--json")
	var rep struct{ Passed bool }
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.Passed || strings.Contains(errOut, "not stored") {
		t.Fatalf("qualify beside the host: exit %d %v\n%s%s", code, err, out, errOut)
	}
	code, out, errOut = adhost(t, "plugins", "list", "--config", s.config, "--json")
	var rows []struct{ ID, Qualified string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
		t.Fatalf("plugins list: exit %d %v\n%s%s", code, err, out, errOut)
	}
	for _, r := range rows {
		if r.ID == "fixture" && !strings.HasPrefix(r.Qualified, "passed ") {
			t.Errorf("fixture qualified %q", r.Qualified)
		}
	}
	code, out, errOut = adhost(t, "status", "--config", s.config, "--url", srv.URL, "--json")
	var st struct {
		Operator *struct{ PID int }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Operator == nil || st.Operator.PID != srv.cmd.Process.Pid {
		t.Fatalf("status: exit %d %v\n%s%s", code, err, out, errOut)
	}
	srv.stop(t, os.Interrupt)
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after a clean stop: %v", err)
	}
}
