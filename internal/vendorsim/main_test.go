package vendorsim

import (
	"testing"

	"go.uber.org/goleak"
)

// Held streams and server goroutines must all end when a Server closes.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
