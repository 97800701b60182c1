package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"adhost/abi"
	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/attachments"
	"adhost/runtime/durable"
	"adhost/runtime/manifest"
	"adhost/runtime/retrieval"
	"adhost/runtime/wasm"
)

// cliBindProvider builds the runtime.ProviderInstance of one [[providers]]
// entry: capabilities, vendor, authMode and usageSource from the
// extension's manifest; models, account and name from host.toml; the
// Provider from the extension with the entry's settings and secrets.
func cliBindProvider(ctx context.Context, x *wasm.Extension, p config.Provider) (*runtime.ProviderInstance, error) {
	if x == nil {
		return nil, fmt.Errorf("extension %s is not loaded", p.Extension)
	}
	m := x.Manifest()
	if m.Kind != abi.KindProvider {
		return nil, fmt.Errorf("extension %s is a %s extension, not a provider", p.Extension, m.Kind)
	}
	settings, err := cliSettingsJSON(p.Settings)
	if err != nil {
		return nil, err
	}
	prov, err := cliBindCLIProvider(x, p, settings)
	if err != nil {
		return nil, err
	}
	caps := make(map[string]bool, len(m.Capabilities))
	for k, v := range m.Capabilities {
		caps[k] = v
	}
	mediaCaps(caps, p.InputMediaTypes)
	return &runtime.ProviderInstance{
		ID:           p.ID,
		Name:         p.Name,
		Vendor:       m.Vendor,
		AuthMode:     m.AuthMode,
		AccountID:    p.AccountID,
		Models:       slices.Clone(p.Models),
		Capabilities: caps,
		UsageSource:  m.UsageSource,
		Provider:     prov,

		InputMediaTypes: maps.Clone(p.InputMediaTypes),
	}, nil
}

// mediaCaps turns the manifest's images/documents capabilities, which say
// what the adapter can carry, into the instance's: true only when some
// model enables an image type (images) or PDF (documents), else absent
// (wire-context §1.2).
func mediaCaps(caps map[string]bool, media map[string][]string) {
	delete(caps, "images")
	delete(caps, "documents")
	for _, types := range media {
		for _, t := range types {
			switch {
			case strings.HasPrefix(t, "image/"):
				caps["images"] = true
			case t == "application/pdf":
				caps["documents"] = true
			}
		}
	}
}

// cliCheckMedia refuses input_media_types that provider i's extension
// cannot carry (its manifest lacks the images or documents capability).
func cliCheckMedia(cfg *config.File, i int, m *manifest.Manifest) []error {
	var errs []error
	p := cfg.Providers[i]
	for _, model := range slices.Sorted(maps.Keys(p.InputMediaTypes)) {
		for _, t := range p.InputMediaTypes[model] {
			if (strings.HasPrefix(t, "image/") && !m.Capability("images")) ||
				(t == "application/pdf" && !m.Capability("documents")) {
				errs = append(errs, cfg.MediaTypeError(i, model, t))
			}
		}
	}
	return errs
}

// cliContext is the selected-context service with [context]'s budgets and,
// with [retrieval], its evidence and stored documents (cliContextSources).
func cliContext(cfg *config.File, retr *retrieval.Service) *attachments.Service {
	maxBytes, maxText := cfg.ContextBudgets()
	opts := attachments.Options{MaxBytes: maxBytes, MaxTextBytes: maxText}
	cliContextSources(&opts, retr)
	return attachments.New(opts)
}

// cliPrecheck verifies every pin's digest and reads its embedded manifest
// (cheap: no compilation), then checks what the configuration asks of each
// extension: provider entries name provider extensions whose credential
// slots are all configured and resolvable, [[tools]] entries name tool
// extensions. Configuration mistakes thus fail in milliseconds, before the
// seconds a cold compile of every module takes.
func cliPrecheck(cfg *config.File) error {
	manifests := map[string]*manifest.Manifest{}
	var errs []error
	for _, e := range cfg.Extensions {
		if err := cliCheckDigest(e); err != nil {
			errs = append(errs, err)
			continue
		}
		_, _, m, _, err := cliReadModule(e.Module)
		if err != nil {
			errs = append(errs, fmt.Errorf("extension %s: %w", e.Ref(), err))
			continue
		}
		if m.ID != e.ID || m.Version != e.Version {
			errs = append(errs, fmt.Errorf("extension %s: embedded manifest is %s@%s: expected %s, actual %s@%s", e.Ref(), m.ID, m.Version, e.Ref(), m.ID, m.Version))
			continue
		}
		manifests[e.Ref()] = m
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for i, p := range cfg.Providers {
		m := manifests[p.Extension]
		if m == nil {
			continue // Validate already reported an unpinned extension
		}
		if m.Kind != abi.KindProvider {
			errs = append(errs, fmt.Errorf("providers[%d] (%s): extension %s is a %s extension, not a provider", i, p.ID, p.Extension, m.Kind))
			continue
		}
		errs = append(errs, cliCheckMedia(cfg, i, m)...)
		for _, c := range m.Credentials {
			ref, ok := p.Secrets[c.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("providers[%d] (%s): credential slot %q of %s is not configured (secrets = { %s = { env = \"NAME\" } })", i, p.ID, c.Name, p.Extension, c.Name))
				continue
			}
			if _, err := ref.Resolve(); err != nil {
				errs = append(errs, fmt.Errorf("providers[%d] (%s): secrets.%s: %w", i, p.ID, c.Name, err))
			}
		}
	}
	for i, t := range cfg.Tools {
		if m := manifests[t.Extension]; m != nil && m.Kind != abi.KindTool {
			errs = append(errs, fmt.Errorf("tools[%d]: extension %s is a %s extension, not a tool extension", i, t.Extension, m.Kind))
		}
	}
	errs = append(errs, cliCheckBinaries(cfg, manifests)) // cli_binaries.go
	return errors.Join(errs...)
}

// cliBindTools returns the host tools of one [[tools]] entry: the
// extension's definitions of the configured names (each must be offered),
// with requires_approval applied.
//
// kv is the store that holds the kv namespaces of tool extensions whose
// manifest sets kv = true (the notes tool); nil denies their kv calls.
func cliBindTools(ctx context.Context, x *wasm.Extension, t config.Tools, kv durable.KV) ([]*runtime.Tool, error) {
	if x == nil {
		return nil, fmt.Errorf("extension %s is not loaded", t.Extension)
	}
	if k := x.Manifest().Kind; k != abi.KindTool {
		return nil, fmt.Errorf("extension %s is a %s extension, not a tool extension", t.Extension, k)
	}
	settings, err := cliSettingsJSON(t.Settings)
	if err != nil {
		return nil, err
	}
	set, err := x.ToolSet(wasm.InstanceConfig{ID: t.Extension, Settings: settings, KV: kv})
	if err != nil {
		return nil, err
	}
	defs, err := set.Tools(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var offered []string
	byName := map[string]abi.ToolDef{}
	for _, d := range defs {
		byName[d.Name] = d
		offered = append(offered, d.Name)
	}
	var out []*runtime.Tool
	var errs []error
	for _, n := range t.Names {
		d, ok := byName[n]
		if !ok {
			errs = append(errs, fmt.Errorf("extension %s does not offer tool %q (offers %q)", t.Extension, n, offered))
			continue
		}
		out = append(out, &runtime.Tool{Def: d, RequiresApproval: slices.Contains(t.RequiresApproval, n), Set: set})
	}
	return out, errors.Join(errs...)
}

func cliSettingsJSON(s map[string]any) (json.RawMessage, error) {
	if len(s) == 0 {
		return json.RawMessage(`{}`), nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return b, nil
}

// cliSecretFuncs turns secret references into lazy resolvers: the value is
// read when the extension needs it, so a rotated file is picked up, and it
// never sits in a long-lived structure.
func cliSecretFuncs(refs map[string]config.SecretRef) map[string]func() (string, error) {
	out := make(map[string]func() (string, error), len(refs))
	for name, ref := range refs {
		out[name] = ref.Resolve
	}
	return out
}

// cliExtensionProvider binds an extension to one [[providers]] entry
// through runtime/wasm.
func cliExtensionProvider(x *wasm.Extension, id string, settings json.RawMessage, secrets map[string]func() (string, error)) (runtime.Provider, error) {
	return x.Provider(wasm.InstanceConfig{ID: id, Settings: settings, Secrets: cliCtxSecrets(secrets)})
}

func cliCtxSecrets(m map[string]func() (string, error)) map[string]func(context.Context) (string, error) {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]func(context.Context) (string, error), len(m))
	for k, f := range m {
		out[k] = func(context.Context) (string, error) { return f() }
	}
	return out
}
