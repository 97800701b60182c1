package qualify

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"adhost/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	if code == 0 {
		// Engines, simulators and extensions must all be shut down.
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
