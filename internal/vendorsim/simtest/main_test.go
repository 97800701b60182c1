package simtest

import (
	"testing"

	"go.uber.org/goleak"
)

// Replay starts a simulator per transcript; it must be gone when Replay is.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
