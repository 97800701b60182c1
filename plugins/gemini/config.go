package main

import (
	"errors"

	sdk "adhost/sdk-plugin"
)

// defaultEndpoint is the Gemini API base; requests go to
// {endpoint}models/{model}:… and {endpoint}models.
const defaultEndpoint = "https://generativelanguage.googleapis.com/v1beta/"

// config is the instance's settings (manifests/gemini.toml). The host
// validated them against the manifest's schema; validate re-checks what the
// adapter relies on, as wire-extensions §10.2 asks of every adapter.
type config struct {
	Endpoint string `json:"endpoint"`
	// Stream selects streamGenerateContent?alt=sse (nil: true) over
	// generateContent.
	Stream *bool `json:"stream"`
	// StructuredOutput is "auto" (default), "mime" or "off"; see
	// structuredConfig.
	StructuredOutput string `json:"structuredOutput"`
}

// streaming reports whether turns use streamGenerateContent.
func (c *config) streaming() bool { return c.Stream == nil || *c.Stream }

// structured returns the structured-output mode, or an error for a value the
// schema would have refused.
func (c *config) structured() (string, error) {
	switch c.StructuredOutput {
	case "":
		return structuredAuto, nil
	case structuredAuto, structuredMime, structuredOff:
		return c.StructuredOutput, nil
	}
	return "", errors.New("structuredOutput must be auto, mime or off")
}

// validate returns the configured endpoint normalized by sdk.CheckEndpoint,
// or the vendor's default when none is configured.
func (c *config) validate() (string, error) {
	if c.Endpoint == "" {
		return defaultEndpoint, nil
	}
	return sdk.CheckEndpoint(c.Endpoint)
}
