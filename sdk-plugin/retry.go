package sdk

import (
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds a Retry-After delay an adapter passes on.
const MaxRetryAfter = 24 * time.Hour

// RetryAfterMs parses a Retry-After header value (RFC 9110 §10.2.3:
// delay-seconds, fractional accepted, or an HTTP-date relative to now) into
// milliseconds. It returns 0 when the value is absent or unusable, or a
// delay in seconds is negative or above MaxRetryAfter; a date in the past
// gives 0 and one beyond MaxRetryAfter is capped to it.
func RetryAfterMs(v string, now time.Time) int64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > MaxRetryAfter.Seconds() {
			return 0
		}
		d = time.Duration(secs * float64(time.Second))
	} else if t, err := time.Parse(time.RFC1123, v); err == nil {
		d = t.Sub(now)
		if d < 0 {
			d = 0
		}
	} else {
		return 0
	}
	return min(d, MaxRetryAfter).Milliseconds()
}
