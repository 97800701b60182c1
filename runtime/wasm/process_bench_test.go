//go:build linux

package wasm

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkProcessTurn is one guest call that starts a trivial CLI, reads
// its lines and waits for it: the host's fixed cost of a local CLI turn
// (digest cache hit, fork/exec, pipes, process group, reaping).
func BenchmarkProcessTurn(b *testing.B) {
	e := loadProcGuestB(b)
	dir := b.TempDir()
	path := filepath.Join(dir, "cli")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho one\necho two\n"), 0o700); err != nil {
		b.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		b.Fatal(err)
	}
	body, _ := os.ReadFile(path)
	p, err := e.x.Provider(InstanceConfig{ID: "bench", Process: &ProcessBinding{BinaryID: "cli", Path: path, SHA256: sha256Hex(body), Home: home}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		out, err := p.Complete(b.Context(), input("run:"), &sink{})
		if err != nil || out.Text != "one|two exit 0 stderr 0" {
			b.Fatalf("%+v %v", out, err)
		}
	}
}

// BenchmarkDigestVerify compares a verified binary's check before a start
// (a stat) with the full hash a changed file costs, for a 64 MiB file (a
// CLI bundled with its runtime is of that order).
func BenchmarkDigestVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big")
	data := make([]byte, 64<<20)
	if err := os.WriteFile(path, data, 0o700); err != nil {
		b.Fatal(err)
	}
	want := sha256Hex(data)
	b.Run("cached", func(b *testing.B) {
		var c digestCache
		if _, err := c.verify(path, want); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if hashed, err := c.verify(path, want); err != nil || hashed {
				b.Fatal(hashed, err)
			}
		}
	})
	b.Run("hashed", func(b *testing.B) {
		for b.Loop() {
			var c digestCache
			if _, err := c.verify(path, want); err != nil {
				b.Fatal(err)
			}
		}
	})
}
