//go:build !linux

package wasm

import "context"

// withLinearMemory leaves wazero's default linear memory (a Go slice grown
// by copying) outside Linux; memory_linux.go says what that costs.
func (inst *instance) withLinearMemory(ctx context.Context) context.Context { return ctx }
