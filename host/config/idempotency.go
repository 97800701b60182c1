package config

// Idempotency is [idempotency]: idempotency keys on runs (wire-core §15,
// wire-extensions §8, §9 in snake case). Absent, or enabled = false: keys
// are IDEMPOTENCY_UNAVAILABLE and the feature is not advertised. The keys
// are checked either way.
//
// There is no max_entries: the records live in the host's store, bounded
// by its disk, and accepted keys are never expired or evicted, so a bound
// on their number would only turn, once reached, into a refusal of every
// new key that nothing clears.
type Idempotency struct {
	Enabled bool `toml:"enabled"`
	// MaxRecordBytes bounds what one key records: the JSON of its events
	// (all but text.delta, run.progress and the terminal one) plus its
	// result. 1..2,147,483,647, default 8,000,000. A run that would
	// record more fails with OPERATION_RECORD_LIMIT.
	MaxRecordBytes int `toml:"max_record_bytes"`
}

// Bounds and defaults of [idempotency] (runtime/idempotency's).
const (
	DefaultIdempotencyMaxRecordBytes = 8_000_000
	MaxIdempotencyMaxRecordBytes     = 2_147_483_647
)

// IdempotencyOn reports whether idempotency keys are configured.
func (f *File) IdempotencyOn() bool { return f.Idempotency != nil && f.Idempotency.Enabled }

// validateIdempotency checks [idempotency] and fills its default. A bound
// that is written is checked as written (max_record_bytes = 0 is an
// error, not the default).
func (f *File) validateIdempotency(p *problems) {
	if f.Idempotency == nil {
		return
	}
	x := f.Idempotency
	_, set := f.pos["idempotency.max_record_bytes"]
	if (set || x.MaxRecordBytes != 0) && (x.MaxRecordBytes < 1 || x.MaxRecordBytes > MaxIdempotencyMaxRecordBytes) {
		p.add("idempotency.max_record_bytes", "%d out of range 1..%d", x.MaxRecordBytes, MaxIdempotencyMaxRecordBytes)
	}
	if x.MaxRecordBytes == 0 {
		x.MaxRecordBytes = DefaultIdempotencyMaxRecordBytes
	}
}
