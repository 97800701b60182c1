package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/manifest"
	"adhost/runtime/wasm"
)

// Local CLI adapters (issue 17): a provider instance of an extension whose
// manifest declares [process] is bound to a pinned [[binaries]] entry and a
// private account directory. These checks run in cliPrecheck (serve,
// doctor) and plugins verify, before anything compiles.

// cliCheckBinaries checks the bound binaries' digests and the account
// directories on disk, and every binding against its extension's manifest:
// a [process] extension needs a binary its manifest declares, an extension
// without [process] takes none.
func cliCheckBinaries(cfg *config.File, manifests map[string]*manifest.Manifest) error {
	errs := []error{cfg.CheckBinaries()}
	where := func(key string) string {
		name := cfg.Path
		if name == "" {
			name = "host.toml"
		}
		if l := cfg.Line(key); l > 0 {
			return fmt.Sprintf("%s:%d: %s", name, l, key)
		}
		return name + ": " + key
	}
	for i, p := range cfg.Providers {
		m := manifests[p.Extension]
		if m == nil {
			continue
		}
		key := fmt.Sprintf("providers[%d].binary", i)
		switch {
		case m.Process == nil && p.Binary != "":
			errs = append(errs, fmt.Errorf("%s: extension %s starts no local CLI (its manifest declares no [process])", where(key), p.Extension))
		case m.Process != nil && p.Binary == "":
			errs = append(errs, fmt.Errorf("%s: required: extension %s runs a local CLI; bind a [[binaries]] id (the manifest declares %s) and an account_directory",
				where(fmt.Sprintf("providers[%d]", i)), p.Extension, cliQuoted(m.Process.Binaries)))
		case m.Process != nil && !slices.Contains(m.Process.Binaries, p.Binary):
			errs = append(errs, fmt.Errorf("%s: %q is not a binary extension %s declares (%s)", where(key), p.Binary, p.Extension, cliQuoted(m.Process.Binaries)))
		}
		if m.Process == nil {
			continue
		}
		for _, name := range m.Process.Env {
			if ref, ok := p.Secrets[name]; ok {
				if _, err := ref.Resolve(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", where(fmt.Sprintf("providers[%d].secrets.%s", i, name)), err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func cliQuoted(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// cliBindCLIProvider binds a provider entry: an extension with [process]
// gets its binary, account directory and the secrets its manifest names
// as variables (the rest stay credential slots); any other goes the usual
// way.
func cliBindCLIProvider(x *wasm.Extension, p config.Provider, settings json.RawMessage) (runtime.Provider, error) {
	m := x.Manifest()
	if m.Process == nil {
		return cliExtensionProvider(x, p.ID, settings, cliSecretFuncs(p.Secrets))
	}
	b := p.BinaryPin // set by config validation
	if b == nil {
		return nil, fmt.Errorf("extension %s runs a local CLI: the provider has no binary", p.Extension)
	}
	slots := map[string]config.SecretRef{}
	vars := map[string]config.SecretRef{}
	for name, ref := range p.Secrets {
		if slices.Contains(m.Process.Env, name) {
			vars[name] = ref
		} else {
			slots[name] = ref
		}
	}
	return x.Provider(wasm.InstanceConfig{
		ID: p.ID, Settings: settings, Secrets: cliCtxSecrets(cliSecretFuncs(slots)),
		Process: &wasm.ProcessBinding{
			BinaryID: b.ID, Path: b.Path, SHA256: b.SHA256, Home: p.AccountDirectory,
			Env: cliCtxSecrets(cliSecretFuncs(vars)),
		},
	})
}
