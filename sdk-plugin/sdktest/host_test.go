package sdktest_test

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
	"adhost/sdk-plugin/sdktest"
)

func TestBufferRule(t *testing.T) {
	h := sdktest.NewHost(t, sdktest.Options{Config: []byte(`{"a":"bcdef"}`)})
	h.SetInput([]byte(`{"model":"m"}`))
	buf := bytes.Repeat([]byte{'#'}, 4)
	if n := h.Input(buf); n != 13 || string(buf) != "####" {
		t.Errorf("short Input = %d, wrote %q; want 13 and nothing written", n, buf)
	}
	if n := h.Config(buf); n != 13 || string(buf) != "####" {
		t.Errorf("short Config = %d, wrote %q", n, buf)
	}
	big := make([]byte, 13)
	if n := h.Input(big); n != 13 || string(big) != `{"model":"m"}` {
		t.Errorf("Input = %d %q", n, big)
	}
}

func sseServer(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func start(h *sdktest.Host, url string, stream bool) int32 {
	meta, _ := json.Marshal(abi.HTTPRequest{Method: "GET", URL: url, Stream: stream})
	return h.HTTPStart(meta, nil)
}

func TestEvents(t *testing.T) {
	srv := sseServer(t, "data: "+strings.Repeat("a", 50)+"\n\ndata: "+strings.Repeat("b", 500)+"\n\n")
	h := sdktest.NewHost(t, sdktest.Options{MaxEventBytes: 200})
	id := start(h, srv.URL, true)
	if id <= 0 {
		t.Fatalf("HTTPStart = %d", id)
	}
	small := make([]byte, 10)
	v := h.HTTPNextEvent(id, small)
	if n, eof := abi.UnpackEOF(v); n != 58 || eof || string(small) != string(make([]byte, 10)) {
		t.Fatalf("short NextEvent = %d %v, wrote %q", n, eof, small)
	}
	buf := make([]byte, 100)
	if n, _ := abi.UnpackEOF(h.HTTPNextEvent(id, buf)); n != 58 || !strings.HasPrefix(string(buf[:n]), "message\naaa") {
		t.Fatalf("NextEvent = %q", buf[:n])
	}
	if v := h.HTTPNextEvent(id, buf); abi.Errno(v) != abi.ErrLimit {
		t.Errorf("oversized event: %d, want ErrLimit", v)
	}
	h.HTTPClose(id)
	if v := h.HTTPNextEvent(id, buf); abi.Errno(v) != abi.ErrBadHandle {
		t.Errorf("closed handle: %d", v)
	}

	raw := start(h, srv.URL, false)
	if v := h.HTTPNextEvent(raw, buf); abi.Errno(v) != abi.ErrBadRequest {
		t.Errorf("NextEvent on a raw response: %d", v)
	}
	h.HTTPClose(raw)
}

func TestHandleLimitAndCancel(t *testing.T) {
	srv := sseServer(t, "")
	h := sdktest.NewHost(t, sdktest.Options{})
	for i := 0; i < abi.MaxHTTPHandles; i++ {
		if id := start(h, srv.URL, false); id <= 0 {
			t.Fatalf("request %d: %d", i, id)
		}
	}
	if id := start(h, srv.URL, false); abi.Errno(id) != abi.ErrLimit {
		t.Errorf("request past the handle limit: %d", id)
	}
	h.Cancel()
	if !h.Cancelled() {
		t.Error("Cancelled() = false")
	}
	if id := start(h, srv.URL, false); abi.Errno(id) != abi.ErrCancelled && abi.Errno(id) != abi.ErrLimit {
		t.Errorf("request after cancel: %d", id)
	}
	if h.Emit(abi.EmitText, []byte("late")) != true {
		t.Error("Emit after cancel reported not cancelled")
	}
	if it := h.Items(); len(it) != 1 || !it[0].Dropped || h.Text() != "" {
		t.Errorf("items after cancel = %+v", it)
	}
	h.Close()
	if h.OpenHandles() != 0 {
		t.Errorf("open handles after Close: %d", h.OpenHandles())
	}
}

// TestCall shows testing a helper that takes a *sdk.Call.
func TestCall(t *testing.T) {
	h := sdktest.NewHost(t, sdktest.Options{Config: []byte(`{"endpoint":"http://127.0.0.1:1/"}`)})
	c := h.Call()
	var cfg struct{ Endpoint string }
	if err := c.DecodeConfig(&cfg); err != nil || cfg.Endpoint != "http://127.0.0.1:1/" {
		t.Fatalf("config %+v: %v", cfg, err)
	}
	_, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: cfg.Endpoint}, nil)
	var he *sdk.HTTPError
	if !errors.As(err, &he) || he.Errno != abi.ErrNetwork {
		t.Errorf("HTTP to a closed port: %v", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	h := sdktest.NewHost(t, sdktest.Options{})
	if id := start(h, "https://api.example.com/v1/models", false); abi.Errno(id) != abi.ErrNetwork {
		t.Errorf("request to a public host: %d, want ErrNetwork", id)
	}
}
