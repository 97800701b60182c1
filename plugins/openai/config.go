package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"unsafe"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// DefaultEndpoint is the base URL used when settings.endpoint is absent.
const DefaultEndpoint = "https://api.openai.com/v1/"

// Values of settings.maxTokensField.
const (
	maxCompletionTokens = "max_completion_tokens"
	maxTokens           = "max_tokens"
)

// settings are the instance settings (manifests/openai.toml holds the same
// rules as a JSON Schema; the host validates against it before the plugin
// runs, and the plugin checks again because it must never trust a path it
// cannot see).
type settings struct {
	// Endpoint is the API base URL, ending in "/" ("…/v1/"). HTTPS, or HTTP
	// to a loopback host only.
	Endpoint string `json:"endpoint"`
	// MaxTokensField names the output bound: max_completion_tokens (OpenAI's
	// current name, the default) or the legacy max_tokens that many
	// OpenAI-compatible servers still want.
	MaxTokensField string `json:"maxTokensField"`
	// StructuredOutput sends response_format json_schema when the run has
	// an outputSchema (default true). Turn it off for servers that reject it;
	// the host still validates the final text.
	StructuredOutput *bool `json:"structuredOutput"`
	// IncludeUsage asks for the usage chunk with stream_options (default
	// true). Some compatible servers reject stream_options.
	IncludeUsage *bool `json:"includeUsage"`
}

// config is validated settings with defaults filled in.
type config struct {
	endpoint         string
	chatURL          string // endpoint + "chat/completions", built once
	maxTokensField   string
	structuredOutput bool
	includeUsage     bool
	// streamReq and bufferedReq are the turn's request to chatURL, streamed
	// or not, prepared once per settings value (see sdk.Request).
	streamReq, bufferedReq *sdk.Request
}

// lastConfig caches the last parsed settings: an instance serves one call
// at a time and almost always the same provider instance, and decoding
// settings with encoding/json on every turn costs more guest CPU than the
// whole stream of a short reply.
// (An atomic pointer keeps native tests that share the package race-free.)
var lastConfig atomic.Pointer[cachedConfig]

type cachedConfig struct {
	raw string
	src *byte // the first byte of the slice raw was copied from
	cfg *config
}

// configFor returns the validated settings for raw, parsing them only when
// they changed since the last call. sdk.Call.Config hands out the same
// never-modified slice while the settings stay the same, so the same
// address and length answer without comparing the bytes (src keeps that
// memory alive, so the address cannot be reused for other bytes).
func configFor(raw []byte) (*config, error) {
	if c := lastConfig.Load(); c != nil && len(raw) == len(c.raw) && (len(raw) > 0 && unsafe.SliceData(raw) == c.src || c.raw == string(raw)) {
		return c.cfg, nil
	}
	cfg, err := parseSettings(raw)
	if err != nil {
		return nil, err
	}
	lastConfig.Store(&cachedConfig{raw: string(raw), src: unsafe.SliceData(raw), cfg: cfg})
	return cfg, nil
}

// parseSettings decodes and validates settings strictly.
func parseSettings(raw []byte) (*config, error) {
	var s settings
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("settings: %w", err)
		}
	}
	c := &config{
		endpoint:         DefaultEndpoint,
		maxTokensField:   maxCompletionTokens,
		structuredOutput: s.StructuredOutput == nil || *s.StructuredOutput,
		includeUsage:     s.IncludeUsage == nil || *s.IncludeUsage,
	}
	if s.Endpoint != "" {
		ep, err := sdk.CheckEndpoint(s.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("settings.endpoint: %w", err)
		}
		c.endpoint = ep
	}
	c.chatURL = c.endpoint + "chat/completions"
	c.streamReq = sdk.NewRequest(&abi.HTTPRequest{Method: "POST", URL: c.chatURL, Headers: chatHeaders, Stream: true})
	c.bufferedReq = sdk.NewRequest(&abi.HTTPRequest{Method: "POST", URL: c.chatURL, Headers: jsonHeaders})
	switch s.MaxTokensField {
	case "", maxCompletionTokens:
	case maxTokens:
		c.maxTokensField = maxTokens
	default:
		return nil, fmt.Errorf("settings.maxTokensField: must be %q or %q", maxCompletionTokens, maxTokens)
	}
	return c, nil
}
