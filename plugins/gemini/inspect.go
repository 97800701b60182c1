package main

import (
	"net/url"
	"strings"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// Inspect reads the models list
// (https://ai.google.dev/api/models#method:-models.list): GET
// {endpoint}models?pageSize=1000, following pageToken=<nextPageToken> until
// a page has none. Names "models/gemini-…" are listed without the
// "models/" prefix (the id a run names), and only models that list
// generateContent among their supportedGenerationMethods (when the field is
// present): embedding-only models cannot serve a run. It never generates. A
// repeated page token or a malformed page is INVALID_DISCOVERY_RESPONSE; a
// cap ends the listing with complete: false.
func (provider) Inspect(c *sdk.Call) (*abi.InspectOutput, error) {
	_, ep, err := settings(c)
	if err != nil {
		return nil, err
	}
	var (
		cat    sdk.Catalog
		token  string
		used   = map[string]bool{}
		budget = sdk.MaxCatalogBytes
	)
	for page := 0; page < sdk.MaxCatalogPages; page++ {
		u := ep + "models?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		body, code, err := sdk.GetCatalogPage(c, u, budget, badKey)
		if err != nil {
			return nil, err
		}
		if code != "" {
			if code == sdk.InspectCatalogAvailable { // a byte cap: what was read is all there is
				return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}, nil
			}
			return &abi.InspectOutput{Code: code}, nil
		}
		budget -= len(body)
		root, err := jsonscan.Parse(body)
		if err != nil || root.Kind() != jsonscan.Object {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		if models, err := root.Get("models"); err == nil {
			if models.Kind() != jsonscan.Array {
				return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
			}
			it := models.Iter()
			for it.Next() {
				m := it.Value()
				nv, err := m.Get("name")
				name, err2 := nv.String()
				if err != nil || err2 != nil || name == "" {
					return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
				}
				if !generates(m) {
					continue
				}
				id := strings.TrimPrefix(name, "models/")
				if id == "" {
					continue
				}
				if !cat.Add(id) {
					return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}, nil
				}
			}
			if it.Err() != nil {
				return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
			}
		}
		next := ""
		if tv, err := root.Get("nextPageToken"); err == nil {
			if next, err = tv.String(); err != nil {
				return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
			}
		}
		if next == "" {
			return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs, Complete: true}, nil
		}
		if used[next] {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		used[next] = true
		token = next
	}
	return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}, nil
}

// generates reports whether a Model lists generateContent among its
// supportedGenerationMethods, or does not say.
func generates(m jsonscan.Value) bool {
	methods, err := m.Get("supportedGenerationMethods")
	if err != nil || methods.Kind() != jsonscan.Array {
		return true
	}
	it := methods.Iter()
	for it.Next() {
		if it.Value().Equal("generateContent") {
			return true
		}
	}
	return false
}

// badKey maps the 400 API_KEY_INVALID that Gemini answers for a bad key to
// AUTH_REJECTED; any other 400 is DISCOVERY_FAILED. Other statuses take
// sdk.GetCatalogPage's mapping.
func badKey(resp *sdk.Response) string {
	if resp.Status != 400 {
		return ""
	}
	if b, _ := resp.ReadAll(maxErrorBody); errorReason(b) == "API_KEY_INVALID" {
		return sdk.InspectAuthRejected
	}
	return sdk.InspectDiscoveryFailed
}
