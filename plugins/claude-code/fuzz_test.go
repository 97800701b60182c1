//go:build !wasip1

package main

import (
	"testing"

	"adhost/internal/clisim/clisimtest"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

// FuzzLines: see clisimtest.Fuzz.
func FuzzLines(f *testing.F) {
	clisimtest.Fuzz(f, adapter.ID, func(c *sdk.Call) cliturn.Parser { return newTurn(c, true) })
}
