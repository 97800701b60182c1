package client

import (
	"bytes"
	"testing"

	"adhost/runtime/protocol"
)

// FuzzEventValidator: arbitrary event data never panics, an accepted event
// keeps its bytes, and a rejected one carries a client code.
func FuzzEventValidator(f *testing.F) {
	f.Add([]byte(`{"type":"run.started","runId":"r","sequence":1,"timestamp":"2026-01-01T00:00:00Z","provider":"p","model":"m"}`),
		[]byte(`{"type":"run.completed","runId":"r","sequence":2,"timestamp":"2026-01-01T00:00:00.1Z","result":{"runId":"r","provider":"p","model":"m","text":"","usage":{"inputTokens":3},"steps":1,"finishReason":"stop"}}`))
	f.Add([]byte(`{"type":"run.started","runId":"r","sequence":1,"timestamp":"2026-01-01T00:00:00Z","provider":"p","model":"m"}`),
		[]byte(`{"type":"x.y","runId":"r","sequence":2,"timestamp":"2026-01-01T00:00:00Z","optional":true}`))
	f.Add([]byte(`null`), []byte("\xff"))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		v := validator{req: &protocol.RunRequest{Provider: "p", Model: "m"}}
		for _, data := range [][]byte{first, second} {
			ev, deliver, err := v.event(data)
			if err != nil {
				code := CodeOf(err)
				if code != protocol.CodeInvalidStream && code != protocol.CodeUnsupportedEvent {
					t.Fatalf("unexpected code %q", code)
				}
				return
			}
			if deliver && !bytes.Equal(ev.Raw, data) {
				t.Fatalf("Raw = %q, want %q", ev.Raw, data)
			}
		}
	})
}

// FuzzProviders: the catalog validator never panics and rejects with
// INVALID_RESPONSE only.
func FuzzProviders(f *testing.F) {
	f.Add([]byte(`{"providers":[{"id":"a","name":"A","vendor":"v","authMode":"none","capabilities":{"tools":true,"textStreaming":false},"models":[],"health":{"status":"ready","code":"C","message":"m","checkedAt":"2026-01-01T00:00:00Z"},"modelCatalog":{"source":"provider","models":["x"],"complete":true}}]}`))
	f.Add([]byte(`{"providers":[{"id":"a","inputMediaTypes":null}]}`))
	f.Add([]byte(`{"protocol":"agenticdriver","version":"1.0","supportedVersions":["1.0"],"features":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := validateProviders(body); err != nil && CodeOf(err) != protocol.CodeInvalidResponse {
			t.Fatalf("code %q", CodeOf(err))
		}
		if _, err := validateProtocol(body); err != nil && CodeOf(err) != protocol.CodeInvalidResponse {
			t.Fatalf("code %q", CodeOf(err))
		}
	})
}
