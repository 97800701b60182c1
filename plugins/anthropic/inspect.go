package main

import (
	"errors"
	"net/url"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
)

// Discovery bounds (wire-extensions §7): at most 1000 ids, 20 pages and
// 2 MB of catalog bodies per probe; hitting one gives complete: false.
const (
	maxCatalogIDs   = 1000
	maxCatalogPages = 20
	maxCatalogBytes = 2_000_000
)

// Inspection codes (wire-extensions §7).
const (
	codeCatalog     = "CATALOG_AVAILABLE"
	codeAuth        = "AUTH_REJECTED"
	codeRateLimited = "RATE_LIMITED"
	codeUnreachable = "PROVIDER_UNREACHABLE"
	codeInvalid     = "INVALID_DISCOVERY_RESPONSE"
	codeFailed      = "DISCOVERY_FAILED"
	codeUnsupported = "DISCOVERY_UNSUPPORTED"
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
		ids    []string
		seen   = map[string]bool{}
		cursor string
		used   = map[string]bool{}
		budget = maxCatalogBytes
	)
	for page := 0; page < maxCatalogPages; page++ {
		u := ep + "models?limit=1000"
		if cursor != "" {
			u += "&after_id=" + url.QueryEscape(cursor)
		}
		body, code, err := getPage(c, u, budget)
		if err != nil {
			return nil, err
		}
		if code != "" {
			if code == codeCatalog { // a byte cap: what was read is all there is
				return &abi.InspectOutput{Code: codeCatalog, Models: ids}, nil
			}
			return &abi.InspectOutput{Code: code}, nil
		}
		budget -= len(body)
		root, err := jsonscan.Parse(body)
		if err != nil || root.Kind() != jsonscan.Object {
			return &abi.InspectOutput{Code: codeInvalid}, nil
		}
		data, err := root.Get("data")
		if err != nil || data.Kind() != jsonscan.Array {
			return &abi.InspectOutput{Code: codeInvalid}, nil
		}
		it := data.Iter()
		for it.Next() {
			idv, err := it.Value().Get("id")
			id, err2 := idv.String()
			if err != nil || err2 != nil || id == "" {
				return &abi.InspectOutput{Code: codeInvalid}, nil
			}
			if seen[id] {
				continue
			}
			if len(ids) == maxCatalogIDs {
				return &abi.InspectOutput{Code: codeCatalog, Models: ids}, nil
			}
			seen[id] = true
			ids = append(ids, id)
		}
		if it.Err() != nil {
			return &abi.InspectOutput{Code: codeInvalid}, nil
		}
		more := false
		if hm, err := root.Get("has_more"); err == nil {
			if more, err = hm.Bool(); err != nil {
				return &abi.InspectOutput{Code: codeInvalid}, nil
			}
		}
		if !more {
			return &abi.InspectOutput{Code: codeCatalog, Models: ids, Complete: true}, nil
		}
		lv, _ := root.Get("last_id")
		last, err := lv.String()
		if err != nil || last == "" || used[last] {
			return &abi.InspectOutput{Code: codeInvalid}, nil
		}
		used[last] = true
		cursor = last
	}
	return &abi.InspectOutput{Code: codeCatalog, Models: ids}, nil
}

// getPage GETs one catalog page within the remaining byte budget. It returns
// the body, or an inspection code for a failed page (codeCatalog meaning
// "the byte cap was hit"), or an error for cancellation.
func getPage(c *sdk.Call, u string, budget int) ([]byte, string, error) {
	if budget <= 0 {
		return nil, codeCatalog, nil
	}
	resp, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: u, Headers: map[string]string{"accept": "application/json"}}, nil)
	if err != nil {
		if errors.Is(err, sdk.ErrCancelled) {
			return nil, "", sdk.ErrCancelled
		}
		return nil, codeUnreachable, nil
	}
	defer resp.Close()
	switch s := resp.Status; {
	case s == 401 || s == 403:
		return nil, codeAuth, nil
	case s == 429:
		return nil, codeRateLimited, nil
	case s == 404:
		return nil, codeUnsupported, nil
	case s < 200 || s > 299:
		return nil, codeFailed, nil
	}
	body, err := resp.ReadAll(budget)
	var se *sdk.Error
	var he *sdk.HTTPError
	switch {
	case err == nil:
	case errors.Is(err, sdk.ErrCancelled):
		return nil, "", sdk.ErrCancelled
	case errors.As(err, &se) && se.Code == sdk.CodeResponseTooLarge,
		errors.As(err, &he) && he.Errno == abi.ErrLimit:
		return nil, codeCatalog, nil
	default:
		return nil, codeUnreachable, nil
	}
	return body, "", nil
}
