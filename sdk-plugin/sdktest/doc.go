// Package sdktest runs plugin logic natively, without wasm: a fake Host
// implements the llmhost functions in Go, records what the plugin streams,
// logs and requests, can cancel the call at any point, and performs the
// plugin's HTTP requests for real (net/http, typically against httptest
// servers on loopback) with the host's rules: no redirects, credential
// headers dropped and injected, size and handle limits, and SSE framing by
// abi/sse, the same parser the host uses.
//
// Operations go through sdk.Dispatch, the path the wasm glue takes, so the
// input and result JSON are encoded and decoded as in the host:
//
//	res := sdktest.Complete(t, provider{}, &abi.CompleteInput{...}, sdktest.Options{
//		Config: []byte(`{"endpoint":"` + srv.URL + `/v1/"}`),
//	})
//	if res.Status != abi.StatusOK || res.Output.Text != "Hello" { ... }
package sdktest
