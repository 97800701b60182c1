package config

import (
	"strings"
	"testing"
)

func idempotencyDoc(table string) string {
	return "version = 1\n\n[idempotency]\n" + table
}

func TestIdempotencyTable(t *testing.T) {
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.IdempotencyOn() || f.Idempotency != nil {
		t.Fatalf("absent table: %v %+v", err, f.Idempotency)
	}
	f, err = decodeValidate(t, idempotencyDoc("enabled = true\n"))
	if err != nil || !f.IdempotencyOn() || *f.Idempotency != (Idempotency{Enabled: true, MaxRecordBytes: 8_000_000}) {
		t.Fatalf("defaults: %v %+v", err, f.Idempotency)
	}
	for _, v := range []string{"1", "2147483647"} {
		f, err := decodeValidate(t, idempotencyDoc("enabled = true\nmax_record_bytes = "+v+"\n"))
		if err != nil {
			t.Errorf("max_record_bytes = %s: %v", v, err)
		} else if got := f.Idempotency.MaxRecordBytes; v == "1" && got != 1 {
			t.Errorf("max_record_bytes = 1 decoded as %d", got)
		}
	}
	if f, err := decodeValidate(t, idempotencyDoc("enabled = false\nmax_record_bytes = 5\n")); err != nil || f.IdempotencyOn() {
		t.Errorf("disabled: %v", err)
	}
}

func TestIdempotencyTableErrors(t *testing.T) {
	for _, tc := range []struct {
		table, want string
	}{
		{"enabled = true\nmax_record_bytes = 0\n", "host.toml:5: idempotency.max_record_bytes: 0 out of range 1..2147483647"},
		{"enabled = true\nmax_record_bytes = -1\n", "host.toml:5: idempotency.max_record_bytes: -1 out of range"},
		{"enabled = true\nmax_record_bytes = 2147483648\n", "host.toml:5: idempotency.max_record_bytes: 2147483648 out of range"},
		{"enabled = false\nmax_record_bytes = 0\n", "host.toml:5: idempotency.max_record_bytes: 0 out of range"},
		{"enabled = true\nmax_entries = 10\n", `host.toml:5: unknown key "idempotency.max_entries"`},
		{"enabled = \"yes\"\n", "host.toml:4: idempotency.enabled"},
	} {
		_, err := decodeValidate(t, idempotencyDoc(tc.table))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.table, err, tc.want)
		}
	}
}
