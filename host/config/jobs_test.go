package config

import (
	"strings"
	"testing"
)

func jobsDoc(table string) string { return "version = 1\n\n[jobs]\n" + table }

func TestJobsTable(t *testing.T) {
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.JobsOn() || f.Jobs != nil {
		t.Fatalf("absent table: %v %+v", err, f.Jobs)
	}
	f, err = decodeValidate(t, jobsDoc("enabled = true\nretention_ms = 86400000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Jobs{Enabled: true, RetentionMs: 86400000, MaxJobs: 1000, MaxJobsPerSubject: 100, MaxBytes: 64_000_000,
		MaxJobBytes: 8_000_000, LeaseMs: 30_000, Workers: 32, PollIntervalMs: 250}
	if !f.JobsOn() || *f.Jobs != want {
		t.Fatalf("defaults: %+v", f.Jobs)
	}
	for _, tbl := range []string{
		"retention_ms = 1\nmax_jobs = 1\nmax_jobs_per_subject = 1\nmax_bytes = 65536\nmax_job_bytes = 16384\nlease_ms = 300\nworkers = 1\npoll_interval_ms = 10\n",
		"retention_ms = 31536000000\nmax_jobs = 100000\nmax_jobs_per_subject = 100000\nmax_bytes = 9000000000\nmax_job_bytes = 64000000\nlease_ms = 3600000\nworkers = 1000\npoll_interval_ms = 60000\n",
	} {
		if _, err := decodeValidate(t, jobsDoc("enabled = true\n"+tbl)); err != nil {
			t.Errorf("%q: %v", tbl, err)
		}
	}
	if f, err := decodeValidate(t, jobsDoc("enabled = false\n")); err != nil || f.JobsOn() {
		t.Errorf("disabled: %v", err)
	}
}

func TestJobsTableErrors(t *testing.T) {
	for _, tc := range []struct{ table, want string }{
		{"enabled = true\n", "host.toml:3: jobs.retention_ms: required"},
		{"enabled = true\nretention_ms = 0\n", "host.toml:5: jobs.retention_ms: 0 out of range 1..31536000000"},
		{"enabled = true\nretention_ms = 31536000001\n", "host.toml:5: jobs.retention_ms: 31536000001 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_jobs = 0\n", "host.toml:6: jobs.max_jobs: 0 out of range 1..100000"},
		{"enabled = true\nretention_ms = 1\nmax_jobs = 100001\n", "host.toml:6: jobs.max_jobs: 100001 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_jobs_per_subject = 0\n", "host.toml:6: jobs.max_jobs_per_subject: 0 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_jobs_per_subject = 100001\n", "host.toml:6: jobs.max_jobs_per_subject: 100001 out of range"},
		{"enabled = true\nretention_ms = 1\nmax_bytes = 65535\n", "host.toml:6: jobs.max_bytes: 65535 out of range: at least 65536"},
		{"enabled = true\nretention_ms = 1\nmax_job_bytes = 16383\n", "host.toml:6: jobs.max_job_bytes: 16383 out of range 16384..64000000"},
		{"enabled = true\nretention_ms = 1\nmax_job_bytes = 64000001\n", "host.toml:6: jobs.max_job_bytes: 64000001 out of range"},
		{"enabled = true\nretention_ms = 1\nlease_ms = 299\n", "host.toml:6: jobs.lease_ms: 299 out of range 300..3600000"},
		{"enabled = true\nretention_ms = 1\nlease_ms = 3600001\n", "host.toml:6: jobs.lease_ms: 3600001 out of range"},
		{"enabled = true\nretention_ms = 1\nworkers = 0\n", "host.toml:6: jobs.workers: 0 out of range 1..1000"},
		{"enabled = true\nretention_ms = 1\nworkers = 1001\n", "host.toml:6: jobs.workers: 1001 out of range"},
		{"enabled = true\nretention_ms = 1\npoll_interval_ms = 9\n", "host.toml:6: jobs.poll_interval_ms: 9 out of range 10..60000"},
		{"enabled = true\nretention_ms = 1\npoll_interval_ms = 60001\n", "host.toml:6: jobs.poll_interval_ms: 60001 out of range"},
		{"enabled = false\nworkers = 5000\n", "host.toml:5: jobs.workers: 5000 out of range"},
	} {
		_, err := decodeValidate(t, jobsDoc(tc.table))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.table, err, tc.want)
		}
	}
	for _, tc := range []struct{ table, want string }{
		{"enabled = true\nretention_ms = 1\nmax_job = 5\n", `host.toml:6: unknown key "jobs.max_job"`},
		{"enabled = \"yes\"\n", "host.toml:4: jobs.enabled"},
	} {
		_, err := Decode([]byte(jobsDoc(tc.table)), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.table, err, tc.want)
		}
	}
}
