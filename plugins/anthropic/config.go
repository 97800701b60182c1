package main

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// defaultEndpoint is Anthropic's API base; requests go to
// {endpoint}messages and {endpoint}models.
const defaultEndpoint = "https://api.anthropic.com/v1/"

// config is the instance's settings (manifests/anthropic.toml). The host
// validated them against the manifest's schema; validate re-checks what the
// adapter relies on, as wire-extensions §10.2 asks of every adapter.
type config struct {
	Endpoint string `json:"endpoint"`
}

// validate checks the endpoint and returns it normalized with a trailing
// slash: HTTPS, or HTTP on a loopback host; no user info, query or fragment.
// The message never echoes the value.
func (c *config) validate() (string, error) {
	raw := c.Endpoint
	if raw == "" {
		return defaultEndpoint, nil
	}
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
		if !loopback(u.Hostname()) {
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

// loopback reports whether host names the loopback interface (the same rule
// as the host's origin policy: localhost, *.localhost, 127.0.0.0/8, ::1).
func loopback(host string) bool {
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
