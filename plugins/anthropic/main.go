package main

import (
	"errors"
	"io"
	"strings"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

func main() {}

// Version is the adapter's version; it must equal manifests/anthropic.toml.
const version = "1.0.0"

func init() {
	sdk.SetInfo("anthropic", version)
	sdk.RegisterProvider(provider{})
}

// provider is the Anthropic Messages API adapter.
type provider struct{}

var (
	_ sdk.Provider  = provider{}
	_ sdk.Inspector = provider{}
)

// endpoint reads and checks the instance's settings.
func endpoint(c *sdk.Call) (string, error) {
	var cfg config
	if err := c.DecodeConfig(&cfg); err != nil {
		return "", newError("INTERNAL_ERROR", "settings do not decode")
	}
	ep, err := cfg.validate()
	if err != nil {
		return "", newError("INTERNAL_ERROR", "settings: "+err.Error())
	}
	return ep, nil
}

// Complete runs one model turn: POST {endpoint}messages with stream: true,
// then follows the event stream until message_stop. The host injects
// x-api-key and anthropic-version (manifests/anthropic.toml); the adapter
// never sees the key.
func (provider) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	ep, err := endpoint(c)
	if err != nil {
		return nil, err
	}
	body, err := buildRequest(in)
	if err != nil {
		return nil, newError("INTERNAL_ERROR", err.Error())
	}
	resp, err := c.HTTP(&abi.HTTPRequest{
		Method: "POST",
		URL:    ep + "messages",
		Headers: map[string]string{
			"content-type": "application/json",
			"accept":       "text/event-stream",
		},
		Stream: true,
	}, body)
	if err != nil {
		return nil, transportError(err, false)
	}
	defer resp.Close()
	if resp.Status < 200 || resp.Status > 299 {
		return nil, statusError(resp.Status, resp.Header)
	}
	if ct := resp.Header["content-type"]; !strings.HasPrefix(strings.ToLower(ct), "text/event-stream") {
		return nil, errInvalidResponse("response is not an event stream")
	}
	s := &turnStream{out: c}
	return s.run(resp)
}

// eventSource is the part of *sdk.Response the stream loop uses.
type eventSource interface {
	NextEvent() (name, data []byte, err error)
}

// run reads events until message_stop (then stops reading: the deferred
// Close aborts whatever the vendor still sends) or the end of the body.
func (s *turnStream) run(src eventSource) (*abi.CompleteOutput, error) {
	for {
		name, data, err := src.NextEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, transportError(err, true)
		}
		done, err := s.handle(name, data)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	return s.result()
}
