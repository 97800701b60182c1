package sdk

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// CheckEndpoint validates an operator-configured vendor endpoint
// (wire-extensions §10.2) and returns it normalized with a trailing slash,
// so adapters append paths rather than resolve them: HTTPS, or HTTP on a
// loopback host; no user info, query or fragment. The host enforces the
// same origin policy again on every request; checking here turns a
// misconfiguration into a clear settings error instead of a denied call.
// Messages never echo the value, which may be private.
func CheckEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", errors.New("endpoint is not an absolute URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return "", errors.New("endpoint must not carry credentials, a query or a fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return "", errors.New("endpoint must be HTTPS (HTTP only on a loopback host)")
		}
	default:
		return "", errors.New("endpoint must be HTTPS (HTTP only on a loopback host)")
	}
	s := u.String()
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}

// IsLoopbackHost reports whether host names the loopback interface, by the
// host's origin-policy rule: localhost, *.localhost, 127.0.0.0/8 in dotted
// decimal, ::1.
func IsLoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "::1" {
		return true
	}
	parts := strings.Split(h, ".")
	if len(parts) != 4 || parts[0] != "127" {
		return false
	}
	for _, p := range parts[1:] {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 || strconv.Itoa(n) != p {
			return false
		}
	}
	return true
}
