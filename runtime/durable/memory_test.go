package durable_test

import (
	"testing"

	"adhost/runtime/durable"
	"adhost/runtime/durable/durabletest"
)

func TestMemory(t *testing.T) {
	durabletest.Run(t, func(*testing.T) durable.Store { return durable.NewMemory() })
}
