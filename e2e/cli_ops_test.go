package e2e_test

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
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
