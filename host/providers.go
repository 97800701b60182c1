package host

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"adhost/runtime"
	"adhost/runtime/discovery"
)

// Discovery builds the GET /v1/providers entries (wire-core §6) of the
// given instances, in order, with their health and model catalog cached and
// refreshed under the rules of §6.2. *discovery.Cache implements it (and
// probes the instances concurrently).
type Discovery interface {
	Entries(ctx context.Context, insts []*runtime.ProviderInstance, refresh bool) []discovery.Provider
}

// serveProviders lists the instances the principal is granted, in host
// configuration order.
func (s *Server) serveProviders(w http.ResponseWriter, r *http.Request, p *runtime.Principal, refresh bool) {
	var granted []*runtime.ProviderInstance
	for _, inst := range s.engine.Providers() {
		if p.Providers[inst.ID] {
			granted = append(granted, inst)
		}
	}
	var entries []discovery.Provider
	if d := s.live.Load().discovery; d != nil && len(granted) > 0 {
		entries = d.Entries(r.Context(), granted, refresh)
	} else {
		entries = make([]discovery.Provider, 0, len(granted))
		for _, inst := range granted {
			entries = append(entries, fallbackEntry(inst))
		}
	}
	for i := range entries {
		// name is a required display string; the instance id is the best
		// name an operator who gave none would expect.
		if entries[i].Name == "" {
			entries[i].Name = entries[i].ID
		}
	}
	if entries == nil {
		entries = []discovery.Provider{}
	}
	b, err := json.Marshal(struct {
		Providers []discovery.Provider `json:"providers"`
	}{entries})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, b)
}

// fallbackEntry is an instance's entry without a discovery cache: health
// DISCOVERY_UNSUPPORTED, and the allowlist as a "configured" catalog, or an
// empty "unavailable" one without allowlist. The catalog never widens
// permission (wire-core §6.1).
func fallbackEntry(inst *runtime.ProviderInstance) discovery.Provider {
	status, msg, _ := discovery.HealthFor(discovery.CodeDiscoveryUnsupported)
	h := discovery.Health{Status: status, Code: discovery.CodeDiscoveryUnsupported, Message: msg, CheckedAt: time.Now()}
	cat := discovery.Catalog{Source: discovery.SourceUnavailable, Models: []string{}}
	if inst.Models != nil {
		cat = discovery.Catalog{Source: discovery.SourceConfigured, Models: append([]string{}, inst.Models...)}
	}
	return discovery.NewProvider(inst, h, cat)
}
