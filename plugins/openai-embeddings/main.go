// Command openai-embeddings is an embedder extension for the embeddings
// endpoint of any OpenAI-compatible service (OpenAI, Azure-style proxies,
// vLLM, llama.cpp server, Ollama, …): POST {endpoint}embeddings with
// {"model", "input": [...], "encoding_format": "float"} and the vectors of
// data[].embedding, put back in input order by data[].index.
//
// The host injects the API key (manifests/openai-embeddings.toml
// [[credentials]]); the plugin never sees it. Vectors are returned as the
// service sent them: the retrieval service checks their count, dimension
// and finiteness and normalises them (wire-extensions §6.4).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/openai-embeddings.toml (a test checks it).
const (
	ID      = "openai-embeddings"
	Version = "1.0.0"
)

// DefaultEndpoint is the base URL when settings.endpoint is absent.
const DefaultEndpoint = "https://api.openai.com/v1/"

// MaxDimensions is the largest vector (wire-extensions §6.1).
const MaxDimensions = 4096

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterEmbedder(embedder{})
}

type embedder struct{}

// settings are the instance settings; the host checks them against the
// manifest's schema first, the plugin again because it trusts nothing.
type settings struct {
	// Endpoint is the API base URL ending in the version path
	// ("https://api.openai.com/v1/").
	Endpoint string `json:"endpoint"`
	// Dimensions, when set, is sent as "dimensions" (text-embedding-3
	// models shorten their vectors to it; others may reject it).
	Dimensions int `json:"dimensions"`
}

type config struct {
	url        string
	dimensions int
}

func parseSettings(raw []byte) (*config, error) {
	var s settings
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, errors.New("settings do not decode")
		}
	}
	if s.Endpoint == "" {
		s.Endpoint = DefaultEndpoint
	}
	ep, err := sdk.CheckEndpoint(s.Endpoint)
	if err != nil {
		return nil, err
	}
	if s.Dimensions < 0 || s.Dimensions > MaxDimensions {
		return nil, fmt.Errorf("dimensions %d out of range 1..%d", s.Dimensions, MaxDimensions)
	}
	return &config{url: ep + "embeddings", dimensions: s.Dimensions}, nil
}

// request is the embeddings request body.
type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

// response is the part of an embeddings response the plugin reads.
type response struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage *struct {
		PromptTokens *int64 `json:"prompt_tokens"`
	} `json:"usage"`
}

// errorBody is the OpenAI error shape {"error":{"message","type","code"}}.
type errorBody struct {
	Error *struct {
		Type string          `json:"type"`
		Code json.RawMessage `json:"code"`
	} `json:"error"`
}

// Embed sends one request for all inputs (the host batches them: at most
// batch_texts texts and batch_bytes bytes a call).
func (embedder) Embed(c *sdk.Call, in *abi.EmbedInput) (*abi.EmbedOutput, error) {
	cfg, err := parseSettings(c.Config())
	if err != nil {
		return nil, &sdk.Error{Code: sdk.CodeInternalError, Message: "settings: " + err.Error()}
	}
	if len(in.Inputs) == 0 {
		return &abi.EmbedOutput{Vectors: [][]float32{}}, nil
	}
	body, err := json.Marshal(request{Model: in.Model, Input: in.Inputs, EncodingFormat: "float", Dimensions: cfg.dimensions})
	if err != nil {
		return nil, &sdk.Error{Code: sdk.CodeInternalError, Message: "request does not encode"}
	}
	resp, err := c.HTTP(&abi.HTTPRequest{Method: "POST", URL: cfg.url,
		Headers: map[string]string{"content-type": "application/json", "accept": "application/json"}}, body)
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	raw, err := resp.ReadAll(abi.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return nil, statusError(resp, raw)
	}
	return decode(raw, len(in.Inputs))
}

// statusError maps a non-2xx answer: 401/403 PROVIDER_AUTH, 429
// RATE_LIMITED with Retry-After, other statuses PROVIDER_ERROR (retryable
// from 500). An OpenAI quota error ("insufficient_quota", also a 429)
// carries no Retry-After hint: waiting a few seconds does not bring the
// quota back, so the plugin does not suggest it.
func statusError(resp *sdk.Response, raw []byte) error {
	e := sdk.ResponseError(resp)
	var eb errorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Error != nil {
		var code string
		_ = json.Unmarshal(eb.Error.Code, &code)
		if resp.Status == 429 && (code == "insufficient_quota" || eb.Error.Type == "insufficient_quota") {
			e.Retryable, e.RetryAfterMs = false, 0
		}
		e.Message += " (" + eb.Error.Type + ")"
	}
	return e
}

// decode puts the vectors in input order by index. A count or dimension
// that does not match is passed on as it came: the retrieval service
// checks both against the request and the corpus and answers
// INVALID_EMBEDDING (wire-extensions §6.6), which says more than a
// malformed response would. An index that is missing, repeated or out of
// range leaves no order to restore: INVALID_PROVIDER_RESPONSE.
func decode(raw []byte, n int) (*abi.EmbedOutput, error) {
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.Errorf(sdk.CodeInvalidProviderResponse, "embeddings response does not decode")
	}
	out := &abi.EmbedOutput{Vectors: make([][]float32, len(r.Data))}
	if len(r.Data) != n {
		for i, d := range r.Data {
			out.Vectors[i] = d.Embedding
		}
	} else {
		for i, d := range r.Data {
			if d.Index == nil || *d.Index < 0 || *d.Index >= n || out.Vectors[*d.Index] != nil {
				return nil, sdk.Errorf(sdk.CodeInvalidProviderResponse, "data[%d].index is missing, out of range or repeated", i)
			}
			if d.Embedding == nil {
				d.Embedding = []float32{}
			}
			out.Vectors[*d.Index] = d.Embedding
		}
	}
	if r.Usage != nil && r.Usage.PromptTokens != nil && *r.Usage.PromptTokens >= 0 {
		t := *r.Usage.PromptTokens
		out.Usage = &abi.Usage{InputTokens: &t}
	}
	return out, nil
}
