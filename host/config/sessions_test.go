package config

import (
	"strings"
	"testing"
)

// sessionsDoc is the smallest valid file with a [sessions] table.
func sessionsDoc(table string) string {
	return "version = 1\n\n[sessions]\n" + table
}

func decodeValidate(t *testing.T, doc string) (*File, error) {
	t.Helper()
	f, err := Decode([]byte(doc), "")
	if err != nil {
		return nil, err
	}
	return f, f.Validate()
}

func TestSessionsTable(t *testing.T) {
	// Absent: off.
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.SessionsOn() || f.Sessions != nil {
		t.Fatalf("absent table: %v %+v", err, f.Sessions)
	}
	// Enabled with only the required key: the defaults of §3.5.
	f, err = decodeValidate(t, sessionsDoc("enabled = true\nretention_ms = 3600000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.SessionsOn() || *f.Sessions != (Sessions{Enabled: true, RetentionMs: 3600000, MaxEntries: 1000, MaxMessages: 100, MaxRecordBytes: 1_000_000}) {
		t.Fatalf("defaults: %+v", f.Sessions)
	}
	// Every bound at both edges is accepted.
	for _, tbl := range []string{
		"retention_ms = 1\nmax_entries = 1\nmax_messages = 2\nmax_record_bytes = 1\n",
		"retention_ms = 2147483647\nmax_entries = 100000\nmax_messages = 100\nmax_record_bytes = 1000000\n",
	} {
		if _, err := decodeValidate(t, sessionsDoc("enabled = true\n"+tbl)); err != nil {
			t.Errorf("%q: %v", tbl, err)
		}
	}
	// Disabled: the table is still checked, retention not required.
	if f, err := decodeValidate(t, sessionsDoc("enabled = false\n")); err != nil || f.SessionsOn() {
		t.Errorf("disabled: %v", err)
	}
}

func TestSessionsTableErrors(t *testing.T) {
	for _, tc := range []struct {
		table, want string
	}{
		{"enabled = true\n", "host.toml:3: sessions.retention_ms: required"},
		{"enabled = true\nretention_ms = 0\n", "host.toml:5: sessions.retention_ms: 0 out of range 1..2147483647"},
		{"enabled = true\nretention_ms = 2147483648\n", "host.toml:5: sessions.retention_ms: 2147483648 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_entries = 0\n", "host.toml:6: sessions.max_entries: 0 out of range 1..100000"},
		{"enabled = true\nretention_ms = 1\nmax_entries = 100001\n", "host.toml:6: sessions.max_entries: 100001 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_messages = 1\n", "host.toml:6: sessions.max_messages: 1 out of range 2..100"},
		{"enabled = true\nretention_ms = 1\nmax_messages = 101\n", "host.toml:6: sessions.max_messages: 101 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_record_bytes = 0\n", "host.toml:6: sessions.max_record_bytes: 0 out of range 1..1000000"},
		{"enabled = true\nretention_ms = 1\nmax_record_bytes = 1000001\n", "host.toml:6: sessions.max_record_bytes: 1000001 out of range"},
		{"enabled = false\nmax_messages = 200\n", "host.toml:5: sessions.max_messages: 200 out of range"},
	} {
		_, err := decodeValidate(t, sessionsDoc(tc.table))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.table, err, tc.want)
		}
	}
	// Unknown keys and wrong types are decode errors naming key and line.
	for _, tc := range []struct{ table, want string }{
		{"enabled = true\nretention_ms = 1\nmax_entry = 5\n", `host.toml:6: unknown key "sessions.max_entry"`},
		{"enabled = \"yes\"\n", "host.toml:4: sessions.enabled"},
	} {
		_, err := Decode([]byte(sessionsDoc(tc.table)), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.table, err, tc.want)
		}
	}
}
