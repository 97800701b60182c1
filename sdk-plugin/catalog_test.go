package sdk_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

func TestCatalog(t *testing.T) {
	var c sdk.Catalog
	if c.IDs != nil {
		t.Fatal("zero Catalog has ids")
	}
	for _, id := range []string{"a", "b", "a"} {
		if !c.Add(id) {
			t.Fatalf("Add(%q) = false", id)
		}
	}
	if len(c.IDs) != 2 || c.IDs[0] != "a" || c.IDs[1] != "b" {
		t.Fatalf("IDs = %v, want [a b]", c.IDs)
	}
	for i := len(c.IDs); i < sdk.MaxCatalogIDs; i++ {
		if !c.Add("m" + strconv.Itoa(i)) {
			t.Fatalf("Add #%d = false below the cap", i)
		}
	}
	if c.Add("over") {
		t.Fatal("Add past MaxCatalogIDs = true")
	}
	if !c.Add("a") {
		t.Fatal("repeated id at the cap = false")
	}
	if len(c.IDs) != sdk.MaxCatalogIDs {
		t.Fatalf("len(IDs) = %d, want %d", len(c.IDs), sdk.MaxCatalogIDs)
	}
	e := sdk.Catalog{IDs: []string{}}
	if e.IDs == nil || len(e.IDs) != 0 {
		t.Fatal("empty catalog lost its non-nil slice")
	}
}

func TestGetCatalogPage(t *testing.T) {
	srv := upstream(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	teapot := func(r *sdk.Response) string {
		if r.Status == 418 {
			return sdk.InspectAccessDenied
		}
		return ""
	}
	for _, tc := range []struct {
		name   string
		url    string
		budget int
		status func(*sdk.Response) string
		body   string
		code   string
	}{
		{name: "ok", url: "/echo", budget: 100, code: ""},
		{name: "budget spent", url: "/echo", budget: 0, code: sdk.InspectCatalogAvailable},
		{name: "body over budget", url: "/big", budget: 100, code: sdk.InspectCatalogAvailable},
		{name: "big within budget", url: "/big", budget: 5000, body: strings.Repeat("z", 5000)},
		{name: "401", url: "/status/401", budget: 100, code: sdk.InspectAuthRejected},
		{name: "403", url: "/status/403", budget: 100, code: sdk.InspectAuthRejected},
		{name: "404", url: "/status/404", budget: 100, code: sdk.InspectDiscoveryUnsupported},
		{name: "429", url: "/status/429", budget: 100, code: sdk.InspectRateLimited},
		{name: "500", url: "/status/500", budget: 100, code: sdk.InspectDiscoveryFailed},
		{name: "418", url: "/status/418", budget: 100, code: sdk.InspectDiscoveryFailed},
		{name: "418 hook", url: "/status/418", budget: 100, status: teapot, code: sdk.InspectAccessDenied},
		{name: "401 hook passes", url: "/status/401", budget: 100, status: teapot, code: sdk.InspectAuthRejected},
		{name: "unreachable", url: closedURL + "/x", budget: 100, code: sdk.InspectProviderUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if strings.HasPrefix(u, "/") {
				u = srv.URL + u
			}
			h := sdktest.NewHost(t, sdktest.Options{})
			body, code, err := sdk.GetCatalogPage(h.Call(), u, tc.budget, tc.status)
			if err != nil || code != tc.code || string(body) != tc.body {
				t.Errorf("GetCatalogPage = %q, %q, %v; want %q, %q", body, code, err, tc.body, tc.code)
			}
			if n := h.OpenHandles(); n != 0 {
				t.Errorf("%d handles left open", n)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		h := sdktest.NewHost(t, sdktest.Options{})
		h.Cancel()
		_, code, err := sdk.GetCatalogPage(h.Call(), srv.URL+"/echo", 100, nil)
		if !errors.Is(err, sdk.ErrCancelled) || code != "" {
			t.Errorf("GetCatalogPage after cancel = %q, %v; want ErrCancelled", code, err)
		}
	})
}
