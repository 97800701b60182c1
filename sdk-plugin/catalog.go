package sdk

import (
	"errors"

	"adhost/abi"
)

// Discovery bounds (wire-extensions §7): an inspection probe lists at most
// MaxCatalogIDs ids, reads at most MaxCatalogPages pages and
// MaxCatalogBytes bytes of catalog bodies; hitting one ends the listing
// with complete: false.
const (
	MaxCatalogIDs   = 1000
	MaxCatalogPages = 20
	MaxCatalogBytes = 2_000_000
)

// Catalog accumulates the model ids of a paginated discovery listing:
// duplicates are dropped, in first-seen order, and at most MaxCatalogIDs
// are kept. The zero value is ready to use; IDs stays nil until the first
// id (set it to an empty slice first for a non-nil empty listing).
type Catalog struct {
	IDs  []string
	seen map[string]bool
}

// Add records id. It reports false, leaving the catalog unchanged, when id
// is new but the catalog already holds MaxCatalogIDs ids (the listing is
// then incomplete); a repeated id is ignored and reports true.
func (c *Catalog) Add(id string) bool {
	if c.seen[id] {
		return true
	}
	if len(c.IDs) == MaxCatalogIDs {
		return false
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[id] = true
	c.IDs = append(c.IDs, id)
	return true
}

// GetCatalogPage GETs one discovery page (accept: application/json) and
// reads its body within budget, the bytes of MaxCatalogBytes not yet used.
// It returns the body, or an inspection code for a page that failed
// (InspectCatalogAvailable meaning "the byte budget is spent": what was read
// is all the listing has), or ErrCancelled.
//
// A non-2xx status maps to InspectAuthRejected (401, 403),
// InspectRateLimited (429), InspectDiscoveryUnsupported (404) or
// InspectDiscoveryFailed (any other); status, when not nil, is asked first
// and its code, when not "", is used instead (for a vendor that answers a
// bad key with another status). A failed request or read is
// InspectProviderUnreachable.
func GetCatalogPage(c *Call, url string, budget int, status func(*Response) string) ([]byte, string, error) {
	if budget <= 0 {
		return nil, InspectCatalogAvailable, nil
	}
	resp, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: url, Headers: map[string]string{"accept": "application/json"}}, nil)
	if err != nil {
		if errors.Is(err, ErrCancelled) {
			return nil, "", ErrCancelled
		}
		return nil, InspectProviderUnreachable, nil
	}
	defer resp.Close()
	if s := resp.Status; s < 200 || s > 299 {
		if status != nil {
			if code := status(resp); code != "" {
				return nil, code, nil
			}
		}
		switch {
		case s == 401 || s == 403:
			return nil, InspectAuthRejected, nil
		case s == 429:
			return nil, InspectRateLimited, nil
		case s == 404:
			return nil, InspectDiscoveryUnsupported, nil
		}
		return nil, InspectDiscoveryFailed, nil
	}
	body, err := resp.ReadAll(budget)
	var se *Error
	var he *HTTPError
	switch {
	case err == nil:
	case errors.Is(err, ErrCancelled):
		return nil, "", ErrCancelled
	case errors.As(err, &se) && se.Code == CodeResponseTooLarge,
		errors.As(err, &he) && he.Errno == abi.ErrLimit:
		return nil, InspectCatalogAvailable, nil
	default:
		return nil, InspectProviderUnreachable, nil
	}
	return body, "", nil
}
