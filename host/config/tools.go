package config

import (
	"fmt"

	"adhost/runtime/manifest"
)

// AllowOriginsKey is the [[tools]] settings key of http_fetch's origin
// allowlist (manifests/http-fetch.toml network.originsSetting). The
// extension's settings schema checks every setting when serve binds the
// tool; this key is checked here as well, so a mistake in the list names
// its line before anything loads.
const AllowOriginsKey = "allow_origins"

// validateToolSettings checks [[tools]] settings.allow_origins: a list of
// origins written exactly as scheme://host[:port], without duplicates.
func (f *File) validateToolSettings(p *problems) {
	for i, t := range f.Tools {
		raw, ok := t.Settings[AllowOriginsKey]
		if !ok {
			continue
		}
		key := fmt.Sprintf("tools[%d].settings.%s", i, AllowOriginsKey)
		list, ok := raw.([]any)
		if !ok {
			p.add(key, "must be a list of origins (scheme://host[:port])")
			continue
		}
		seen := map[string]bool{}
		for j, v := range list {
			s, ok := v.(string)
			if !ok {
				p.add(fmt.Sprintf("%s[%d]", key, j), "must be a string")
				continue
			}
			c, err := manifest.ExactOrigin(s)
			switch {
			case err != nil:
				p.add(fmt.Sprintf("%s[%d]", key, j), "%q: %v", s, err)
			case seen[c]:
				p.add(fmt.Sprintf("%s[%d]", key, j), "duplicate origin %q", s)
			}
			seen[c] = true
		}
	}
}
