package qualify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"adhost/internal/vendorsim"
	"adhost/runtime/wasm"
)

// SimulateOptions configure Simulate.
type SimulateOptions struct {
	// Model is the model id (default "fixture-model"); the simulator lists
	// it in its catalog.
	Model string
	// Vendor names the simulator (vendorsim.Vendors()). Default: the
	// manifest's vendor when a simulator has that name ("openai",
	// "anthropic"), else the extension id ("gemini", whose vendor is
	// "google").
	Vendor string
	// Timeout bounds each scenario (default DefaultTimeout).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives engine logs (default: discarded).
	Logger *slog.Logger
}

// Simulate qualifies a loaded extension against the loopback vendor
// simulator of its manifest's vendor, with no further configuration: it
// starts the simulator with a generated key, binds the extension to it (the
// manifest's endpoint setting pointing at the simulator, every credential
// slot holding the key, injected by the host), runs the scenarios strictly,
// and adds the credential scenario (every request carried the key).
func Simulate(ctx context.Context, x *wasm.Extension, opts SimulateOptions) (*Report, error) {
	m := x.Manifest()
	if m.EndpointSetting() == "" {
		return nil, fmt.Errorf("qualify: %s has no endpoint setting to point at the simulator", m.ID)
	}
	if opts.Model == "" {
		opts.Model = "fixture-model"
	}
	key, err := randomKey()
	if err != nil {
		return nil, err
	}
	vendor := opts.Vendor
	if vendor == "" {
		vendor = m.Vendor
		if _, err := vendorsim.Lookup(vendor); err != nil {
			vendor = m.ID
		}
	}
	// The simulator lists the model under test, so discovery finds it.
	models := append([]string(nil), vendorsim.DefaultModels...)
	if !slices.Contains(models, opts.Model) {
		models = append(models, opts.Model)
	}
	sim, err := vendorsim.New(vendor, vendorsim.Options{APIKey: key, Models: models})
	if err != nil {
		return nil, fmt.Errorf("qualify: %s: no simulator for vendor %q: %w", m.ID, m.Vendor, err)
	}
	defer sim.Close()
	settings, err := json.Marshal(map[string]string{m.EndpointSetting(): sim.Endpoint()})
	if err != nil {
		return nil, err
	}
	secrets := map[string]func(context.Context) (string, error){}
	for _, c := range m.Credentials {
		secrets[c.Name] = func(context.Context) (string, error) { return key, nil }
	}
	p, err := x.Provider(wasm.InstanceConfig{ID: "qualify-" + m.ID, Settings: settings, Secrets: secrets})
	if err != nil {
		return nil, fmt.Errorf("qualify: bind %s to the simulator: %w", m.ID, err)
	}
	rep, err := Run(ctx, Options{
		Provider: p, Manifest: m, SHA256: x.Pin().SHA256, Endpoint: sim.URL(), Model: opts.Model,
		Timeout: opts.Timeout, Now: opts.Now, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	rep.AddScenario(credentialResult(sim, len(m.Credentials) > 0))
	return rep, nil
}

// credentialResult checks the simulator's recordings: with credential
// slots, every request must have carried the generated key; without, the
// check is skipped.
func credentialResult(sim *vendorsim.Server, slots bool) ScenarioResult {
	res := ScenarioResult{Name: ScenarioCredential}
	if !slots {
		res.Status, res.Reason = StatusSkipped, "the extension declares no credential slot"
		return res
	}
	reqs := sim.Requests()
	if len(reqs) == 0 {
		res.Status, res.Reason = StatusFailed, "the simulator received no request"
		return res
	}
	for i, r := range reqs {
		res.Events = append(res.Events, ObservedEvent{Sequence: int64(i + 1), Type: "request",
			Detail: r.Method + " " + r.Path + " credential " + r.Credential})
		if r.Credential != vendorsim.CredentialOK && res.Status == "" {
			res.Status = StatusFailed
			res.Reason = fmt.Sprintf("request %d (%s %s) arrived with credential %s", i+1, r.Method, r.Path, r.Credential)
		}
	}
	if res.Status == "" {
		res.Status = StatusPassed
	}
	return res
}

func randomKey() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("qualify: no randomness for the simulator key")
	}
	return "sk-qualify-" + hex.EncodeToString(b), nil
}
