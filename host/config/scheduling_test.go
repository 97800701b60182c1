package config

import (
	"strings"
	"testing"
)

// schedDoc is a file with one token (subject "alice") and one provider
// (account "acct-1"), and the given [limits] lines.
func schedDoc(limits string) string {
	return `version = 1

[[extensions]]
id = "fixture"
version = "1.0.0"
module = "fixture.wasm"
sha256 = "` + strings.Repeat("a", 64) + `"

[[providers]]
id = "p"
extension = "fixture@1.0.0"
account_id = "acct-1"
models = ["m"]

[[tokens]]
id = "t"
subject = "alice"
secret = { env = "T" }
providers = ["p"]

[limits]
` + limits
}

func TestSchedulingKeys(t *testing.T) {
	f, err := decodeValidate(t, schedDoc(""))
	if err != nil || f.QueueOn() {
		t.Fatalf("absent: %v queue=%v", err, f != nil && f.QueueOn())
	}
	f, err = decodeValidate(t, schedDoc("max_concurrent_runs = 8\nmax_concurrent_runs_per_account = 8\nqueue_total = 100000\nqueue_per_subject = 100000\n"+
		"[limits.subjects]\nalice = 8\n[limits.accounts]\nacct-1 = 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := f.Limits
	if !f.QueueOn() || l.QueueTotal != 100000 || l.QueuePerSubject != 100000 || l.MaxConcurrentRunsPerAccount != 8 ||
		l.Subjects["alice"] != 8 || l.Accounts["acct-1"] != 1 {
		t.Fatalf("decoded %+v", l)
	}
	if _, err := decodeValidate(t, schedDoc("queue_total = 1\nqueue_per_subject = 1\nmax_concurrent_runs_per_account = 1\n")); err != nil {
		t.Fatalf("lower edges: %v", err)
	}
}

func TestSchedulingKeyErrors(t *testing.T) {
	for _, tc := range []struct{ limits, want string }{
		{"max_concurrent_runs_per_account = 0\n", "host.toml:22: limits.max_concurrent_runs_per_account: 0 out of range 1..32"},
		{"max_concurrent_runs_per_account = 33\n", "limits.max_concurrent_runs_per_account: 33 out of range 1..32"},
		{"queue_total = 4\n", "host.toml:22: limits.queue_total: needs limits.queue_per_subject"},
		{"queue_per_subject = 4\n", "host.toml:22: limits.queue_per_subject: needs limits.queue_total"},
		{"queue_total = 0\nqueue_per_subject = 0\n", "limits.queue_total: 0 out of range 1..100000"},
		{"queue_total = 100001\nqueue_per_subject = 1\n", "limits.queue_total: 100001 out of range 1..100000"},
		{"queue_total = 4\nqueue_per_subject = 5\n", "host.toml:23: limits.queue_per_subject: 5 out of range 1..4"},
		{"[limits.subjects]\nalice = 0\n", "host.toml:23: limits.subjects.alice: 0 out of range 1..32"},
		{"[limits.subjects]\nalice = 33\n", "limits.subjects.alice: 33 out of range"},
		{"[limits.subjects]\nbob = 1\n", `limits.subjects.bob: "bob" is not the subject of any configured token`},
		{"[limits.accounts]\nacct-1 = 33\n", "limits.accounts.acct-1: 33 out of range"},
		{"[limits.accounts]\nother = 1\n", `limits.accounts.other: "other" is not the account_id of any configured provider`},
		{"[limits.subjects]\nalice = \"x\"\n", "limits.subjects.alice"},
		{"queue_size = 4\n", "queue_size"},
	} {
		_, err := decodeValidate(t, schedDoc(tc.limits))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.limits, err, tc.want)
		}
	}
}

// resDoc is schedDoc with [resources] tables instead of [limits] lines.
func resDoc(tables string) string { return schedDoc("") + "\n" + tables }

func TestResourcesTables(t *testing.T) {
	f, err := decodeValidate(t, resDoc(""))
	if err != nil || f.Resources != nil {
		t.Fatalf("absent: %v %+v", err, f.Resources)
	}
	f, err = decodeValidate(t, resDoc("[resources.default]\nmax_tokens = 9007199254740991\nmax_cost_usd = 0.01\nunknown_usage = \"reject\"\n"+
		"[resources.subjects.alice]\nmax_tokens = 1\n[resources.accounts.acct-1]\nunknown_usage = \"allow\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Resources
	if *r.Default != (Budget{MaxTokens: MaxBudgetTokens, MaxCostUSD: 0.01, UnknownUsage: "reject"}) ||
		r.Subjects["alice"] != (Budget{MaxTokens: 1}) || r.Accounts["acct-1"] != (Budget{UnknownUsage: "allow"}) {
		t.Fatalf("decoded %+v", r)
	}
}

func TestResourcesErrors(t *testing.T) {
	for _, tc := range []struct{ tables, want string }{
		{"[resources.default]\nmax_tokens = 0\n", "host.toml:24: resources.default.max_tokens: 0 out of range 1..9007199254740991"},
		{"[resources.default]\nmax_tokens = 9007199254740992\n", "resources.default.max_tokens: 9007199254740992 out of range"},
		{"[resources.default]\nmax_cost_usd = 0.0\n", "host.toml:24: resources.default.max_cost_usd: 0 must be a positive amount"},
		{"[resources.default]\nmax_cost_usd = -1.0\n", "resources.default.max_cost_usd: -1 must be a positive amount"},
		{"[resources.default]\nmax_cost_usd = nan\n", "resources.default.max_cost_usd: NaN must be a positive amount"},
		{"[resources.default]\nunknown_usage = \"deny\"\n", `host.toml:24: resources.default.unknown_usage: "deny" is not "allow" or "reject"`},
		{"[resources.subjects.bob]\nmax_tokens = 5\n", `resources.subjects.bob: "bob" is not the subject of any configured token`},
		{"[resources.accounts.other]\nmax_tokens = 5\n", `resources.accounts.other: "other" is not the account_id of any configured provider`},
		{"[resources.accounts.acct-1]\nmax_tokens = -5\n", "host.toml:24: resources.accounts.acct-1.max_tokens: -5 out of range"},
		{"[resources.default]\nmax_steps = 5\n", "resources.default.max_steps"},
	} {
		_, err := decodeValidate(t, resDoc(tc.tables))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.tables, err, tc.want)
		}
	}
}

func TestDiagnosticsTables(t *testing.T) {
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.MetricsOn() || f.DiagnosticsOn() || f.Log != nil {
		t.Fatalf("absent: %v", err)
	}
	f, err = decodeValidate(t, "version = 1\n[metrics]\nenabled = true\n[log]\nformat = \"json\"\nlevel = \"debug\"\n"+
		"[diagnostics]\notlp_endpoint = \"http://127.0.0.1:4318\"\nlevel = \"steps\"\nsample_rate = 0.0\ninclude_names = true\n")
	if err != nil {
		t.Fatal(err)
	}
	if !f.MetricsOn() || !f.DiagnosticsOn() || f.Log.Format != "json" || f.Diagnostics.ExportIntervalMs != DefaultExportIntervalMs ||
		*f.Diagnostics.SampleRate != 0 || !f.Diagnostics.IncludeNames {
		t.Fatalf("decoded %+v %+v %+v", f.Metrics, f.Log, f.Diagnostics)
	}
	for _, tc := range []struct{ doc, want string }{
		{"[log]\nformat = \"xml\"\n", `host.toml:3: log.format: "xml" is not "text" or "json"`},
		{"[log]\nlevel = \"trace\"\n", `host.toml:3: log.level: "trace" is not`},
		{"[diagnostics]\notlp_endpoint = \"localhost:4318\"\n", `host.toml:3: diagnostics.otlp_endpoint: "localhost:4318" is not an http or https URL`},
		{"[diagnostics]\notlp_endpoint = \"http://u:p@h:4318\"\n", "diagnostics.otlp_endpoint: must be a base URL without credentials"},
		{"[diagnostics]\nlevel = \"all\"\n", `diagnostics.level: "all" is not`},
		{"[diagnostics]\nsample_rate = 1.5\n", "host.toml:3: diagnostics.sample_rate: 1.5 out of range 0..1"},
		{"[diagnostics]\nexport_interval_ms = 999\n", "host.toml:3: diagnostics.export_interval_ms: 999 out of range 1000..3600000"},
		{"[diagnostics]\nexport_interval_ms = 3600001\n", "diagnostics.export_interval_ms: 3600001 out of range"},
		{"[metrics]\nenabled = true\npath = \"/m\"\n", "metrics.path"},
	} {
		_, err := decodeValidate(t, "version = 1\n"+tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}
