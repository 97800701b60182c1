package main

import sdk "adhost/sdk-plugin"

// defaultEndpoint is Anthropic's API base; requests go to
// {endpoint}messages and {endpoint}models.
const defaultEndpoint = "https://api.anthropic.com/v1/"

// config is the instance's settings (manifests/anthropic.toml). The host
// validated them against the manifest's schema; validate re-checks what the
// adapter relies on, as wire-extensions §10.2 asks of every adapter.
type config struct {
	Endpoint string `json:"endpoint"`
}

// validate returns the configured endpoint normalized by sdk.CheckEndpoint,
// or the vendor's default when none is configured.
func (c *config) validate() (string, error) {
	if c.Endpoint == "" {
		return defaultEndpoint, nil
	}
	return sdk.CheckEndpoint(c.Endpoint)
}
