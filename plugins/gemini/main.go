package main

import (
	"errors"
	"io"
	"net/url"
	"strings"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

func main() {}

// Version is the adapter's version; it must equal manifests/gemini.toml.
const version = "1.0.0"

func init() {
	sdk.SetInfo("gemini", version)
	sdk.RegisterProvider(provider{})
}

// provider is the Gemini API (generateContent) adapter.
type provider struct{}

var (
	_ sdk.Provider  = provider{}
	_ sdk.Inspector = provider{}
)

// settings reads and checks the instance's settings.
func settings(c *sdk.Call) (cfg config, ep string, err error) {
	if err := c.DecodeConfig(&cfg); err != nil {
		return cfg, "", newError("INTERNAL_ERROR", "settings do not decode")
	}
	if ep, err = cfg.validate(); err != nil {
		return cfg, "", newError("INTERNAL_ERROR", "settings: "+err.Error())
	}
	if _, err := cfg.structured(); err != nil {
		return cfg, "", newError("INTERNAL_ERROR", "settings: "+err.Error())
	}
	return cfg, ep, nil
}

// modelPath is the request path of a model: "models/{id}". A model given
// with its resource prefix ("models/gemini-2.5-flash") is accepted too. The
// id is path-escaped, so it can never add path segments or a query.
func modelPath(model string) string {
	return "models/" + url.PathEscape(strings.TrimPrefix(model, "models/"))
}

// Complete runs one model turn: POST
// {endpoint}models/{model}:streamGenerateContent?alt=sse (or
// :generateContent with settings.stream false). The host injects
// x-goog-api-key (manifests/gemini.toml); the adapter never sees the key.
func (provider) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	cfg, ep, err := settings(c)
	if err != nil {
		return nil, err
	}
	mode, _ := cfg.structured()
	prev := readNative(in.Native)
	body, err := buildRequest(in, mode, prev)
	if err != nil {
		return nil, newError("INTERNAL_ERROR", err.Error())
	}
	stream := cfg.streaming()
	u := ep + modelPath(in.Model) + ":generateContent"
	accept := "application/json"
	if stream {
		u = ep + modelPath(in.Model) + ":streamGenerateContent?alt=sse"
		accept = "text/event-stream"
	}
	resp, err := c.HTTP(&abi.HTTPRequest{
		Method:  "POST",
		URL:     u,
		Headers: map[string]string{"content-type": "application/json", "accept": accept},
		Stream:  stream,
	}, body)
	if err != nil {
		return nil, transportError(err, false)
	}
	defer resp.Close()
	if resp.Status < 200 || resp.Status > 299 {
		// The error body is read (bounded) only for its machine-readable
		// details: ErrorInfo.reason and RetryInfo.retryDelay.
		b, _ := resp.ReadAll(maxErrorBody)
		return nil, statusError(resp.Status, resp.Header, b)
	}
	s := &turnStream{out: c, step: in.Step}
	ct := strings.ToLower(resp.Header["content-type"])
	if stream {
		if !strings.HasPrefix(ct, "text/event-stream") {
			return nil, errInvalidResponse("response is not an event stream")
		}
		if err := s.run(resp); err != nil {
			return nil, err
		}
	} else {
		if !strings.HasPrefix(ct, "application/json") {
			return nil, errInvalidResponse("response is not JSON")
		}
		b, err := resp.ReadAll(abi.MaxResponseBytes)
		if err != nil {
			return nil, transportError(err, true)
		}
		if err := s.handle(b); err != nil {
			return nil, err
		}
	}
	out, err := s.result()
	if err != nil {
		return nil, err
	}
	out.Native = nil
	if len(out.ToolCalls) > 0 && len(prev)+len(s.sigs) > 0 {
		// The next step sends this step's calls back, and those of earlier
		// steps since the user spoke: keep every signature.
		all := make(map[string]string, len(prev)+len(s.sigs))
		for k, v := range prev {
			all[k] = v
		}
		for k, v := range s.sigs {
			all[k] = v
		}
		out.Native = nativeState(all)
	}
	return out, nil
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// eventSource is the part of *sdk.Response the stream loop uses.
type eventSource interface {
	NextEvent() (name, data []byte, err error)
}

// run reads every chunk to the end of the body: Gemini marks no end in-band
// beyond the finishReason, and the usage of the last chunk may follow it.
func (s *turnStream) run(src eventSource) error {
	for {
		_, data, err := src.NextEvent()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return transportError(err, true)
		}
		if err := s.handle(data); err != nil {
			return err
		}
	}
}
