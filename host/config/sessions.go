package config

// Sessions is [sessions]: conversation-sessions (wire-extensions §3.5, §9
// in snake case). Absent, or enabled = false: the feature is off and not
// advertised. The keys are checked either way, so a table written for a
// later switch-on is not silently wrong.
type Sessions struct {
	Enabled bool `toml:"enabled"`
	// RetentionMs is the idle retention: required when enabled,
	// 1..2,147,483,647.
	RetentionMs int64 `toml:"retention_ms"`
	// MaxEntries bounds the stored sessions: 1..100,000, default 1000.
	MaxEntries int `toml:"max_entries"`
	// MaxMessages bounds the visible messages of one session: 2..100,
	// default 100.
	MaxMessages int `toml:"max_messages"`
	// MaxRecordBytes bounds one session's history, instructions and native
	// state as encoded JSON: 1..1,000,000, default 1,000,000.
	MaxRecordBytes int `toml:"max_record_bytes"`
}

// Bounds and defaults of [sessions].
const (
	MaxSessionRetentionMs        int64 = 2_147_483_647
	DefaultSessionMaxEntries           = 1000
	MaxSessionMaxEntries               = 100_000
	DefaultSessionMaxMessages          = 100
	MinSessionMaxMessages              = 2
	MaxSessionMaxMessages              = 100
	DefaultSessionMaxRecordBytes       = 1_000_000
	MaxSessionMaxRecordBytes           = 1_000_000
)

// SessionsOn reports whether conversation-sessions are configured.
func (f *File) SessionsOn() bool { return f.Sessions != nil && f.Sessions.Enabled }

// withDefaults returns s with the defaults of the unset bounds.
func (s Sessions) withDefaults() Sessions {
	if s.MaxEntries == 0 {
		s.MaxEntries = DefaultSessionMaxEntries
	}
	if s.MaxMessages == 0 {
		s.MaxMessages = DefaultSessionMaxMessages
	}
	if s.MaxRecordBytes == 0 {
		s.MaxRecordBytes = DefaultSessionMaxRecordBytes
	}
	return s
}

// validateSessions checks [sessions] and fills its defaults. A bound that
// is written is checked as written (max_entries = 0 is an error, not the
// default); only an absent one takes the default.
func (f *File) validateSessions(p *problems) {
	if f.Sessions == nil {
		return
	}
	s := f.Sessions
	set := func(k string) bool { _, ok := f.pos["sessions."+k]; return ok }
	switch {
	case s.Enabled && !set("retention_ms") && s.RetentionMs == 0:
		p.add("sessions.retention_ms", "required when sessions are enabled (1..%d)", MaxSessionRetentionMs)
	case (set("retention_ms") || s.RetentionMs != 0) && (s.RetentionMs < 1 || s.RetentionMs > MaxSessionRetentionMs):
		p.add("sessions.retention_ms", "%d out of range 1..%d", s.RetentionMs, MaxSessionRetentionMs)
	}
	between := func(k string, v, lo, hi int) {
		if (set(k) || v != 0) && (v < lo || v > hi) {
			p.add("sessions."+k, "%d out of range %d..%d", v, lo, hi)
		}
	}
	between("max_entries", s.MaxEntries, 1, MaxSessionMaxEntries)
	between("max_messages", s.MaxMessages, MinSessionMaxMessages, MaxSessionMaxMessages)
	between("max_record_bytes", s.MaxRecordBytes, 1, MaxSessionMaxRecordBytes)
	*s = s.withDefaults()
}
