package wasm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"adhost/runtime/manifest"
)

// Operator-allowlisted origins (manifest network.originsSetting).
//
// A tool like http_fetch reaches what the operator lists in the tool's
// settings, and nothing else: the list replaces nothing of the manifest's
// own origins, it adds exact origins. The checks of every other request
// apply too — no redirects followed, credential headers stripped, the
// address dialed checked after resolution — with one rule for private
// addresses: a listed origin whose host is a name is dialed only to
// public addresses, so a public name that resolves (or is rebound) to a
// loopback, private or link-local address is refused; to reach such an
// address the operator lists it literally (http://127.0.0.1:8080,
// https://[fd00::1]:8443, or the name localhost for loopback).

// MaxAllowOrigins bounds the operator's origin list.
const MaxAllowOrigins = 256

// ResolveAllowOrigins returns the canonical origins of the operator's
// allowlist in an instance's settings (the manifest's
// network.originsSetting key): nil when the manifest has no such key or
// the settings do not set it. Each entry must be written exactly as
// scheme://host[:port].
func ResolveAllowOrigins(m *manifest.Manifest, settings json.RawMessage) ([]string, error) {
	key := m.OriginsSetting()
	raw, err := setting(settings, key)
	if raw == nil || err != nil {
		return nil, err
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("settings.%s: not a list of strings", key)
	}
	if len(list) > MaxAllowOrigins {
		return nil, fmt.Errorf("settings.%s: more than %d origins", key, MaxAllowOrigins)
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(list))
	for i, o := range list {
		c, err := manifest.ExactOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("settings.%s[%d]: %q: %v", key, i, o, err)
		}
		if seen[c] {
			return nil, fmt.Errorf("settings.%s[%d]: duplicate origin %q", key, i, o)
		}
		seen[c] = true
		out = append(out, c)
	}
	return out, nil
}

// setting returns the value of key in an instance's settings object, or
// nil when key is "" or the settings do not set it.
func setting(settings json.RawMessage, key string) (json.RawMessage, error) {
	if key == "" || len(bytes.TrimSpace(settings)) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(settings, &obj); err != nil {
		return nil, fmt.Errorf("settings: not a JSON object")
	}
	return obj[key], nil
}

// allowOperatorOrigins adds the operator's origins to the policy. The
// host:port of an origin that names an address literally (or loopback by
// name) is recorded as one the dialer may reach even when it is not
// public.
func (np *netPolicy) allowOperatorOrigins(origins []string) {
	for _, o := range origins {
		np.allowed[o] = true
		addr := strings.TrimPrefix(strings.TrimPrefix(o, "https://"), "http://")
		host := addr[:strings.LastIndexByte(addr, ':')]
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if _, err := netip.ParseAddr(host); err == nil || manifest.IsLoopbackHost(host) {
			if np.literal == nil {
				np.literal = map[string]bool{}
			}
			np.literal[addr] = true
		}
	}
}
