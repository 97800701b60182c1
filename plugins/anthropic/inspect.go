package main

import (
	"net/url"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// Inspect reads the models list (https://docs.anthropic.com/en/api/models-list):
// GET {endpoint}models?limit=1000, following after_id=<last_id> while
// has_more is true. It never generates. A repeated cursor or a malformed
// page is INVALID_DISCOVERY_RESPONSE; a cap ends the listing with
// complete: false.
func (provider) Inspect(c *sdk.Call) (*abi.InspectOutput, error) {
	ep, err := endpoint(c)
	if err != nil {
		return nil, err
	}
	var (
		cat    sdk.Catalog
		cursor string
		used   = map[string]bool{}
		budget = sdk.MaxCatalogBytes
	)
	for page := 0; page < sdk.MaxCatalogPages; page++ {
		u := ep + "models?limit=1000"
		if cursor != "" {
			u += "&after_id=" + url.QueryEscape(cursor)
		}
		body, code, err := sdk.GetCatalogPage(c, u, budget, nil)
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
		data, err := root.Get("data")
		if err != nil || data.Kind() != jsonscan.Array {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		it := data.Iter()
		for it.Next() {
			idv, err := it.Value().Get("id")
			id, err2 := idv.String()
			if err != nil || err2 != nil || id == "" {
				return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
			}
			if !cat.Add(id) {
				return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}, nil
			}
		}
		if it.Err() != nil {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		more := false
		if hm, err := root.Get("has_more"); err == nil {
			if more, err = hm.Bool(); err != nil {
				return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
			}
		}
		if !more {
			return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs, Complete: true}, nil
		}
		lv, _ := root.Get("last_id")
		last, err := lv.String()
		if err != nil || last == "" || used[last] {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		used[last] = true
		cursor = last
	}
	return &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}, nil
}
