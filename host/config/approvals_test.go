package config

import (
	"strings"
	"testing"
)

func TestReviewTables(t *testing.T) {
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.ApprovalsOn() || f.AppToolsOn() {
		t.Fatalf("absent tables: %v", err)
	}
	f, err = decodeValidate(t, "version = 1\n\n[approvals]\nenabled = true\n\n[application_tools]\nenabled = true\n")
	if err != nil || !f.ApprovalsOn() || !f.AppToolsOn() || !f.Approvals.IdlePauseAllowed() || !f.AppTools.ReviewByDefault() ||
		f.Approvals.MaxPending != 1000 || f.AppTools.MaxPending != 1000 {
		t.Fatalf("defaults: %v %+v %+v", err, f.Approvals, f.AppTools)
	}
	f, err = decodeValidate(t, "version = 1\n\n[approvals]\nenabled = true\nallow_idle_pause = false\nmax_pending = 1\n\n"+
		"[application_tools]\nenabled = true\nrequire_approval = false\nmax_pending = 1000000\n")
	if err != nil || f.Approvals.IdlePauseAllowed() || f.AppTools.ReviewByDefault() || f.Approvals.MaxPending != 1 || f.AppTools.MaxPending != 1_000_000 {
		t.Fatalf("edges: %v %+v %+v", err, f.Approvals, f.AppTools)
	}
	if f, err := decodeValidate(t, "version = 1\n\n[approvals]\nenabled = false\n"); err != nil || f.ApprovalsOn() {
		t.Errorf("disabled: %v", err)
	}
}

func TestReviewTableErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[approvals]\nenabled = true\nmax_pending = 0\n", "host.toml:5: approvals.max_pending: 0 out of range 1..1000000"},
		{"[approvals]\nmax_pending = 1000001\n", "host.toml:4: approvals.max_pending: 1000001 out of range"},
		{"[application_tools]\nenabled = true\nmax_pending = -1\n", "host.toml:5: application_tools.max_pending: -1 out of range"},
		{"[approvals]\nenabled = true\ntimeout_ms = 5\n", "timeout_ms"},
		{"[application_tools]\nrequire_approval = \"no\"\n", "require_approval"},
	} {
		_, err := decodeValidate(t, "version = 1\n\n"+tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestGrantReview(t *testing.T) {
	no, yes := false, true
	g := Grants{ApplicationTools: []ApplicationTool{{Name: "a"}, {Name: "b", RequiresApproval: &no}, {Name: "c", RequiresApproval: &yes}}}
	r := g.AppToolReview()
	if len(r) != 3 || !r["a"] || r["b"] || !r["c"] {
		t.Errorf("review = %v", r)
	}
	if g.Unimplemented() {
		t.Error("application tool grants are implemented")
	}
}
