package config

// Jobs is [jobs]: durable-jobs (wire-extensions §2.5, §9 in snake case).
// Absent, or enabled = false: the feature is off and not advertised. The
// keys are checked either way, so a table written for a later switch-on is
// not silently wrong. The job store lives in the host's store ([store]).
type Jobs struct {
	Enabled bool `toml:"enabled"`
	// RetentionMs is how long a terminal job keeps its payload before it
	// is erased to a tombstone: required when enabled,
	// 1..31,536,000,000 (a year).
	RetentionMs int64 `toml:"retention_ms"`
	// MaxJobs bounds all records, tombstones included: 1..100,000,
	// default 1000.
	MaxJobs int `toml:"max_jobs"`
	// MaxJobsPerSubject bounds one subject's records, tombstones
	// included: 1..100,000, default 100.
	MaxJobsPerSubject int `toml:"max_jobs_per_subject"`
	// MaxBytes bounds the stored payload (+4,096 per live job): at least
	// 65,536, default 64,000,000.
	MaxBytes int64 `toml:"max_bytes"`
	// MaxJobBytes bounds one job (its record and events):
	// 16,384..64,000,000, default 8,000,000.
	MaxJobBytes int64 `toml:"max_job_bytes"`
	// LeaseMs is the single-owner worker lease, renewed every third of
	// it: 300..3,600,000, default 30,000.
	LeaseMs int64 `toml:"lease_ms"`
	// Workers bounds concurrent dispatch attempts and runs: 1..1000,
	// default 32 (each run still takes an admission slot of [limits]).
	Workers int `toml:"workers"`
	// PollIntervalMs is the dispatch poll: 10..60,000, default 250. A
	// submission or a finished job also wakes the worker at once.
	PollIntervalMs int64 `toml:"poll_interval_ms"`
}

// Bounds and defaults of [jobs] (wire-extensions §2.5).
const (
	MaxJobRetentionMs      int64 = 31_536_000_000
	DefaultJobsMaxJobs           = 1000
	MaxJobsMaxJobs               = 100_000
	DefaultJobsPerSubject        = 100
	DefaultJobsMaxBytes    int64 = 64_000_000
	MinJobsMaxBytes        int64 = 65_536
	DefaultJobsMaxJobBytes int64 = 8_000_000
	MinJobsMaxJobBytes     int64 = 16_384
	MaxJobsMaxJobBytes     int64 = 64_000_000
	DefaultJobsLeaseMs     int64 = 30_000
	MinJobsLeaseMs         int64 = 300
	MaxJobsLeaseMs         int64 = 3_600_000
	DefaultJobsWorkers           = 32
	MaxJobsWorkers               = 1000
	DefaultJobsPollMs      int64 = 250
	MinJobsPollMs          int64 = 10
	MaxJobsPollMs          int64 = 60_000
	maxJobsBytesUpper      int64 = 1 << 53
)

// JobsOn reports whether durable jobs are configured.
func (f *File) JobsOn() bool { return f.Jobs != nil && f.Jobs.Enabled }

func (j Jobs) withDefaults() Jobs {
	if j.MaxJobs == 0 {
		j.MaxJobs = DefaultJobsMaxJobs
	}
	if j.MaxJobsPerSubject == 0 {
		j.MaxJobsPerSubject = DefaultJobsPerSubject
	}
	if j.MaxBytes == 0 {
		j.MaxBytes = DefaultJobsMaxBytes
	}
	if j.MaxJobBytes == 0 {
		j.MaxJobBytes = DefaultJobsMaxJobBytes
	}
	if j.LeaseMs == 0 {
		j.LeaseMs = DefaultJobsLeaseMs
	}
	if j.Workers == 0 {
		j.Workers = DefaultJobsWorkers
	}
	if j.PollIntervalMs == 0 {
		j.PollIntervalMs = DefaultJobsPollMs
	}
	return j
}

// validateJobs checks [jobs] and fills its defaults. A bound that is
// written is checked as written (max_jobs = 0 is an error, not the
// default); only an absent one takes the default.
func (f *File) validateJobs(p *problems) {
	if f.Jobs == nil {
		return
	}
	j := f.Jobs
	set := func(k string) bool { _, ok := f.pos["jobs."+k]; return ok }
	between := func(k string, v, lo, hi int64) {
		if (set(k) || v != 0) && (v < lo || v > hi) {
			p.add("jobs."+k, "%d out of range %d..%d", v, lo, hi)
		}
	}
	if j.Enabled && !set("retention_ms") && j.RetentionMs == 0 {
		p.add("jobs.retention_ms", "required when jobs are enabled (1..%d)", MaxJobRetentionMs)
	} else {
		between("retention_ms", j.RetentionMs, 1, MaxJobRetentionMs)
	}
	between("max_jobs", int64(j.MaxJobs), 1, MaxJobsMaxJobs)
	between("max_jobs_per_subject", int64(j.MaxJobsPerSubject), 1, MaxJobsMaxJobs)
	if (set("max_bytes") || j.MaxBytes != 0) && (j.MaxBytes < MinJobsMaxBytes || j.MaxBytes > maxJobsBytesUpper) {
		p.add("jobs.max_bytes", "%d out of range: at least %d", j.MaxBytes, MinJobsMaxBytes)
	}
	between("max_job_bytes", j.MaxJobBytes, MinJobsMaxJobBytes, MaxJobsMaxJobBytes)
	between("lease_ms", j.LeaseMs, MinJobsLeaseMs, MaxJobsLeaseMs)
	between("workers", int64(j.Workers), 1, MaxJobsWorkers)
	between("poll_interval_ms", j.PollIntervalMs, MinJobsPollMs, MaxJobsPollMs)
	*j = j.withDefaults()
}
