package main

import (
	"errors"
	"net/url"
	"strings"

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
		ids    []string
		seen   = map[string]bool{}
		token  string
		used   = map[string]bool{}
		budget = maxCatalogBytes
	)
	for page := 0; page < maxCatalogPages; page++ {
		u := ep + "models?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
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
		if models, err := root.Get("models"); err == nil {
			if models.Kind() != jsonscan.Array {
				return &abi.InspectOutput{Code: codeInvalid}, nil
			}
			it := models.Iter()
			for it.Next() {
				m := it.Value()
				nv, err := m.Get("name")
				name, err2 := nv.String()
				if err != nil || err2 != nil || name == "" {
					return &abi.InspectOutput{Code: codeInvalid}, nil
				}
				if !generates(m) {
					continue
				}
				id := strings.TrimPrefix(name, "models/")
				if id == "" || seen[id] {
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
		}
		next := ""
		if tv, err := root.Get("nextPageToken"); err == nil {
			if next, err = tv.String(); err != nil {
				return &abi.InspectOutput{Code: codeInvalid}, nil
			}
		}
		if next == "" {
			return &abi.InspectOutput{Code: codeCatalog, Models: ids, Complete: true}, nil
		}
		if used[next] {
			return &abi.InspectOutput{Code: codeInvalid}, nil
		}
		used[next] = true
		token = next
	}
	return &abi.InspectOutput{Code: codeCatalog, Models: ids}, nil
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
	case s == 400:
		// A bad key is a 400 API_KEY_INVALID at Gemini.
		if b, _ := resp.ReadAll(maxErrorBody); errorReason(b) == "API_KEY_INVALID" {
			return nil, codeAuth, nil
		}
		return nil, codeFailed, nil
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
