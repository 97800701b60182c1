package qualify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"adhost/internal/clisim"
	"adhost/runtime/wasm"
)

// SimulateCLI qualifies a local CLI adapter (a manifest with [process])
// without the CLI installed: it writes a fake binary that replays the
// adapter's recorded transcripts (package clisim) — the prompt of each
// scenario selects its transcript — into a private temporary directory,
// binds the extension to it with a private account directory, and runs
// the scenarios strictly. The host treats the fake exactly like a real
// CLI: digest check, environment, process group, kill on cancellation.
func SimulateCLI(ctx context.Context, x *wasm.Extension, opts SimulateOptions) (*Report, error) {
	m := x.Manifest()
	if m.Process == nil || len(m.Process.Binaries) == 0 {
		return nil, fmt.Errorf("qualify: %s starts no local CLI", m.ID)
	}
	if !clisim.Has(m.ID) {
		return nil, fmt.Errorf("qualify: no recorded CLI transcripts for %s; use --live with a configured provider", m.ID)
	}
	if opts.Model == "" {
		opts.Model = "fixture-model"
	}
	dir, err := os.MkdirTemp("", "adhost-qualify-cli-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fake, err := clisim.WriteDispatcher(dir, m.ID)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(fake)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	home := filepath.Join(dir, "account")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	p, err := x.Provider(wasm.InstanceConfig{ID: "qualify-" + m.ID, Process: &wasm.ProcessBinding{
		BinaryID: m.Process.Binaries[0], Path: fake, SHA256: hex.EncodeToString(sum[:]), Home: home,
	}})
	if err != nil {
		return nil, fmt.Errorf("qualify: bind %s to the fake CLI: %w", m.ID, err)
	}
	rep, err := Run(ctx, Options{
		Provider: p, Manifest: m, SHA256: x.Pin().SHA256, Model: opts.Model,
		Timeout: opts.Timeout, Now: opts.Now, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	rep.AddScenario(ScenarioResult{Name: ScenarioCredential, Status: StatusSkipped,
		Reason: "a local CLI adapter: the CLI uses its own login in the account directory, the host injects no credential"})
	return rep, nil
}
