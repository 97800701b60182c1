package e2e_test

import (
	"strings"
	"time"
)

// The host writes its log through a buffered writer that lets lines
// gather for about a millisecond (host/logwriter.go): a line about what
// just happened may still be on its way when a test looks.

// settled returns the log once it has stopped growing for 100 ms (at most
// 5 s): every line logged before the call is in it. Checks that something
// is NOT in the log read it this way, so a late line cannot slip past.
func (s *syncBuffer) settled() string {
	const quiet, most = 100 * time.Millisecond, 5 * time.Second
	deadline := time.Now().Add(most)
	text := s.String()
	for still := time.Now(); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if now := s.String(); len(now) != len(text) {
			text, still = now, time.Now()
		} else if time.Since(still) >= quiet {
			break
		}
	}
	return text
}

// waitFor reports whether the log holds sub within 5 s.
func (s *syncBuffer) waitFor(sub string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.String(), sub) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
