package host

import (
	"encoding/json"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime"
	"adhost/runtime/discovery"
)

func TestProvidersFallback(t *testing.T) {
	env := newEnv(t, envOptions{})
	ps, err := newClient(t, env).Providers(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	// Only the granted instance is listed.
	if len(ps) != 1 || ps[0].ID != testProvider {
		t.Fatalf("providers = %+v", ps)
	}
	p := ps[0]
	if p.Name != "Fake" || p.Vendor != "test" || p.AuthMode != "none" || !p.Capabilities["textStreaming"] || p.Capabilities["tools"] {
		t.Errorf("entry = %+v", p)
	}
	if len(p.Models) != 1 || p.Models[0] != testModel {
		t.Errorf("models = %v", p.Models)
	}
	if p.Health == nil || p.Health.Code != "DISCOVERY_UNSUPPORTED" || p.Health.Status != "unsupported" ||
		p.ModelCatalog == nil || p.ModelCatalog.Source != "configured" || p.ModelCatalog.Complete {
		t.Errorf("discovery = %+v %+v", p.Health, p.ModelCatalog)
	}
	// A token without provider grants sees an empty list.
	c, _ := client.New(env.ts.URL, client.WithToken(otherToken))
	ps, err = c.Providers(t.Context(), true)
	if err != nil || len(ps) != 0 {
		t.Errorf("other token: %v %v", ps, err)
	}
}

func TestProvidersDiscovery(t *testing.T) {
	checked := time.Date(2026, 3, 4, 10, 0, 0, 123e6, time.UTC)
	cache := discovery.New(discovery.Options{Now: func() time.Time { return checked }})
	defer cache.Close()
	env := newEnv(t, envOptions{discovery: cache})
	for _, target := range []string{"/v1/providers", "/v1/providers?refresh=true"} {
		status, _, b := do(t, env, "GET", target, map[string][]string{"Authorization": {"Bearer " + testToken}}, nil)
		if status != 200 {
			t.Fatal(status)
		}
		var doc struct {
			Providers []map[string]json.RawMessage `json:"providers"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Providers) != 1 {
			t.Fatalf("body %s", b)
		}
		e := doc.Providers[0]
		if string(e["health"]) != `{"status":"ready","code":"CATALOG_AVAILABLE","message":"`+mustMessage(t)+`","checkedAt":"2026-03-04T10:00:00.123Z"}` {
			t.Errorf("health = %s", e["health"])
		}
		if string(e["modelCatalog"]) != `{"source":"provider","models":["fake-model"],"complete":true}` {
			t.Errorf("modelCatalog = %s", e["modelCatalog"])
		}
		if string(e["models"]) != `["fake-model"]` || string(e["capabilities"]) != `{"textStreaming":true,"tools":false}` {
			t.Errorf("entry = %s", b)
		}
	}
	// The client accepts what the host sends.
	if _, err := newClient(t, env).Providers(t.Context(), true); err != nil {
		t.Error(err)
	}
}

func mustMessage(t *testing.T) string {
	_, msg, ok := discovery.HealthFor(discovery.CodeCatalogAvailable)
	if !ok {
		t.Fatal("no message for CATALOG_AVAILABLE")
	}
	return msg
}

func TestFallbackEntryShapes(t *testing.T) {
	// An empty allowlist is sent as [] (no model allowed), a nil one is
	// omitted (any model); optional fields are never null.
	for _, tc := range []struct {
		models []string
		source string
	}{
		{nil, "unavailable"},
		{[]string{}, "configured"},
	} {
		b, _ := json.Marshal(fallbackEntry(&runtime.ProviderInstance{ID: "p", Vendor: "v", AuthMode: "none", Models: tc.models}))
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		got, ok := m["models"]
		if tc.models == nil && ok || tc.models != nil && string(got) != `[]` {
			t.Errorf("models %v → %s", tc.models, b)
		}
		var cat struct{ Source string }
		_ = json.Unmarshal(m["modelCatalog"], &cat)
		if cat.Source != tc.source {
			t.Errorf("source = %s: %s", cat.Source, b)
		}
		for k, v := range m {
			if string(v) == "null" {
				t.Errorf("%s is null: %s", k, b)
			}
		}
	}
}
