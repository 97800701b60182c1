//go:build !wasip1

package main

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
		// Simulators, fake hosts and loaded extensions must all be closed.
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
