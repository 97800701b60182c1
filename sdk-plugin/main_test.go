package sdk_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every upstream
// request the SDK started must be closed and its connection released.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
