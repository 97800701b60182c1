package sdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/jsonscan"
	"adhost/sdk-plugin/sdktest"
)

// chatAdapter is the shape of a streaming vendor adapter: one HTTP request,
// then one jsonscan lookup per event, no reflection and no allocation per
// delta.
type chatAdapter struct{}

func (chatAdapter) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	var cfg struct {
		Endpoint string `json:"endpoint"`
	}
	if err := c.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"model": in.Model, "stream": true}) // once per turn
	resp, err := c.HTTP(&abi.HTTPRequest{Method: "POST", URL: cfg.Endpoint + "chat/completions", Stream: true,
		Headers: map[string]string{"content-type": "application/json"}}, body)
	if err != nil {
		return nil, err // *sdk.HTTPError: mapped to PROVIDER_UNREACHABLE, or cancellation
	}
	defer resp.Close()
	if resp.Status != http.StatusOK {
		return nil, sdk.ResponseError(resp)
	}
	var text, delta []byte
	out := &abi.CompleteOutput{FinishReason: "stop"}
	for {
		_, data, err := resp.NextEvent()
		if err == io.EOF {
			return nil, sdk.Errorf(sdk.CodeIncompleteStream, "stream ended without [DONE]")
		}
		if err != nil {
			return nil, err
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			break
		}
		// One pass over the event, one over the choice (see package
		// jsonscan on the cost model).
		var top, choice [2]jsonscan.Value
		if err := jsonscan.Pick(data, top[:], "choices", "usage"); err != nil {
			return nil, sdk.Errorf(sdk.CodeInvalidProviderResponse, "event: %v", err)
		}
		first, err := top[0].Get("[0]")
		if errors.Is(err, jsonscan.ErrNotFound) {
			continue // e.g. a usage-only chunk: "choices":[]
		}
		if err != nil {
			return nil, sdk.Errorf(sdk.CodeInvalidProviderResponse, "event: %v", err)
		}
		if err := first.Pick(choice[:], "delta", "finish_reason"); err != nil {
			return nil, sdk.Errorf(sdk.CodeInvalidProviderResponse, "choice: %v", err)
		}
		if v, err := choice[0].Get("content"); err == nil && v.Kind() == jsonscan.String {
			delta, _ = v.AppendString(delta[:0])
			if c.EmitTextBytes(delta) {
				return nil, sdk.ErrCancelled
			}
			text = append(text, delta...)
		}
		if choice[1].Equal("length") {
			out.FinishReason = "length"
		}
	}
	out.Text = string(text)
	return out, nil
}

func TestAdapterPattern(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"lo \u00e9"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3}}`,
		`[DONE]`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			io.WriteString(w, "data: "+c+"\n\n")
		}
	}))
	defer srv.Close()

	in := &abi.CompleteInput{Model: "m", Messages: []abi.Message{{Role: abi.RoleUser, Content: "hi"}}, MaxOutputTokens: 5}
	res := sdktest.Complete(t, chatAdapter{}, in, sdktest.Options{
		Config:  []byte(`{"endpoint":"` + srv.URL + `/v1/"}`),
		Headers: map[string]string{"Authorization": "Bearer k"}, // what the host injects
		Origins: []string{srv.URL},
	})
	if res.Status != abi.StatusOK || res.Output.Text != "Hello é" || res.Output.FinishReason != "length" {
		t.Fatalf("status %d output %+v error %+v", res.Status, res.Output, res.Error)
	}

	// Without the credential the upstream says 401: PROVIDER_AUTH.
	res = sdktest.Complete(t, chatAdapter{}, in, sdktest.Options{Config: []byte(`{"endpoint":"` + srv.URL + `/v1/"}`)})
	if res.Status != abi.StatusError || res.Error.Code != sdk.CodeProviderAuth {
		t.Errorf("unauthenticated: status %d error %+v", res.Status, res.Error)
	}
	if res.Error.Status != 401 || strings.Contains(res.Error.Message, "no\n") {
		t.Errorf("error = %+v (the body is never read into it)", res.Error)
	}
}
