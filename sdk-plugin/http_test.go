package sdk_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Seen-Custom", r.Header.Get("X-Custom"))
		w.Header().Set("X-Seen-Cookie", r.Header.Get("Cookie"))
		w.WriteHeader(201)
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("z", 5000)))
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		var code int
		fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/status/"), "%d", &code)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(code)
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "\ufeff: comment\r\nevent: delta\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata: line2\n\nevent: empty\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// run runs fn as a provider's Complete and returns the result.
func run(t *testing.T, opts sdktest.Options, fn func(c *sdk.Call) error) *sdktest.CompleteResult {
	t.Helper()
	return sdktest.Complete(t, providerFunc(func(c *sdk.Call, _ *abi.CompleteInput) (*abi.CompleteOutput, error) {
		if err := fn(c); err != nil {
			return nil, err
		}
		return &abi.CompleteOutput{}, nil
	}), &abi.CompleteInput{}, opts)
}

func TestHTTPRequest(t *testing.T) {
	srv := upstream(t)
	res := run(t, sdktest.Options{Headers: map[string]string{"Authorization": "Bearer injected"}}, func(c *sdk.Call) error {
		r, err := c.HTTP(&abi.HTTPRequest{Method: "POST", URL: srv.URL + "/echo", Headers: map[string]string{
			"Authorization": "Bearer guest", "Cookie": "a=b", "X-Custom": "yes", "Content-Type": "application/json",
		}}, []byte(`{"q":1}`))
		if err != nil {
			return err
		}
		defer r.Close()
		if r.Status != 201 {
			t.Errorf("status = %d", r.Status)
		}
		if got := r.Header["x-seen-auth"]; got != "Bearer injected" {
			t.Errorf("upstream saw Authorization %q, want the injected one", got)
		}
		if r.Header["x-seen-cookie"] != "" || r.Header["x-seen-custom"] != "yes" {
			t.Errorf("headers seen upstream: %v", r.Header)
		}
		body, err := r.ReadAll(1 << 20)
		if err != nil || string(body) != `{"q":1}` {
			t.Errorf("body = %q, %v", body, err)
		}
		if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Errorf("Read after EOF = %d, %v", n, err)
		}
		return nil
	})
	if res.Status != abi.StatusOK {
		t.Fatalf("status %d: %+v", res.Status, res.Error)
	}
	if len(res.Requests) != 1 || res.Requests[0].Header.Get("Cookie") != "" || string(res.Requests[0].Body) != `{"q":1}` {
		t.Errorf("recorded request = %+v", res.Requests)
	}
}

func TestHTTPFailures(t *testing.T) {
	srv := upstream(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		name  string
		opts  sdktest.Options
		url   string
		errno abi.Errno
		code  string
	}{
		{name: "redirect", url: srv.URL + "/redirect", errno: abi.ErrRedirect, code: "PROVIDER_UNREACHABLE"},
		{name: "origin denied", url: srv.URL + "/echo", opts: sdktest.Options{Origins: []string{"https://api.example.com"}},
			errno: abi.ErrDenied, code: "PROVIDER_UNREACHABLE"},
		{name: "network", url: closedURL + "/x", errno: abi.ErrNetwork, code: "PROVIDER_UNREACHABLE"},
		{name: "bad url", url: "ftp://x/", errno: abi.ErrBadRequest, code: "INTERNAL_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, tc.opts, func(c *sdk.Call) error {
				_, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: tc.url}, nil)
				var he *sdk.HTTPError
				if !errors.As(err, &he) || he.Errno != tc.errno {
					t.Errorf("err = %v, want errno %v", err, tc.errno)
				}
				return err // returned unchanged: the SDK maps it
			})
			if res.Status != abi.StatusError || res.Error.Code != tc.code {
				t.Errorf("status %d error %+v, want %s", res.Status, res.Error, tc.code)
			}
		})
	}
}

func TestHTTPStatusAndLimit(t *testing.T) {
	srv := upstream(t)
	res := run(t, sdktest.Options{}, func(c *sdk.Call) error {
		r, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: srv.URL + "/big"}, nil)
		if err != nil {
			return err
		}
		if _, err := r.ReadAll(100); err == nil {
			t.Error("ReadAll past max: no error")
		} else if e := (*sdk.Error)(nil); !errors.As(err, &e) || e.Code != sdk.CodeResponseTooLarge {
			t.Errorf("ReadAll past max: %v", err)
		}
		r.Close()
		r, err = c.HTTP(&abi.HTTPRequest{Method: "GET", URL: srv.URL + "/status/429"}, nil)
		if err != nil {
			return err
		}
		defer r.Close()
		return sdk.ResponseError(r)
	})
	if res.Status != abi.StatusError || res.Error.Code != "RATE_LIMITED" || res.Error.RetryAfterMs != 3000 || res.Error.Status != 429 {
		t.Errorf("result %d %+v", res.Status, res.Error)
	}
}

func TestNextEvent(t *testing.T) {
	srv := upstream(t)
	var got []string
	res := run(t, sdktest.Options{}, func(c *sdk.Call) error {
		r, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: srv.URL + "/sse", Stream: true}, nil)
		if err != nil {
			return err
		}
		// Not closed on purpose: the SDK closes it when the call returns.
		for {
			name, data, err := r.NextEvent()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			got = append(got, string(name)+"|"+string(data))
		}
		if _, _, err := r.NextEvent(); err != io.EOF {
			t.Errorf("NextEvent after EOF: %v", err)
		}
		return nil
	})
	if res.Status != abi.StatusOK {
		t.Fatalf("status %d %+v", res.Status, res.Error)
	}
	want := []string{`delta|{"a":1}`, "message|line1\nline2", "message|[DONE]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestCancelDuringStream(t *testing.T) {
	srv := upstream(t)
	opts := sdktest.Options{OnEmit: func(h *sdktest.Host, _ sdktest.Item) { h.Cancel() }}
	res := run(t, opts, func(c *sdk.Call) error {
		r, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: srv.URL + "/hang", Stream: true}, nil)
		if err != nil {
			return err
		}
		defer r.Close()
		_, data, err := r.NextEvent()
		if err != nil || string(data) != "first" {
			t.Fatalf("first event %q, %v", data, err)
		}
		if !c.EmitTextBytes(data) {
			t.Error("EmitTextBytes after cancel = false")
		}
		// The upstream never sends more: the blocked read must end with
		// the cancellation.
		_, _, err = r.NextEvent()
		if !errors.Is(err, sdk.ErrCancelled) {
			t.Errorf("NextEvent after cancel: %v, want ErrCancelled", err)
		}
		return err
	})
	if res.Status != abi.StatusCancelled {
		t.Errorf("status = %d, want cancelled", res.Status)
	}
}

// TestSend: a prepared request sends the same request as HTTP; its
// response has no Header map and Get finds each header, for the call's
// first response (whose head buffer is reused) and for a second one open
// at the same time; ResponseError reads Retry-After through Get.
func TestSend(t *testing.T) {
	srv := upstream(t)
	echo := sdk.NewRequest(&abi.HTTPRequest{Method: "POST", URL: srv.URL + "/echo", Headers: map[string]string{"X-Custom": "yes"}})
	limited := sdk.NewRequest(&abi.HTTPRequest{Method: "GET", URL: srv.URL + "/status/429"})
	for turn := range 2 { // the second call reuses the first one's buffers
		res := run(t, sdktest.Options{Headers: map[string]string{"Authorization": "Bearer injected"}}, func(c *sdk.Call) error {
			r, err := c.Send(echo, []byte(`{"q":1}`))
			if err != nil {
				return err
			}
			r2, err := c.Send(echo, []byte(`{"q":2}`))
			if err != nil {
				return err
			}
			for i, r := range []*sdk.Response{r, r2} {
				if r.Status != 201 || r.Header != nil {
					t.Errorf("turn %d response %d: status %d, Header %v", turn, i, r.Status, r.Header)
				}
				if got := r.Get("x-seen-auth"); got != "Bearer injected" {
					t.Errorf("turn %d response %d: x-seen-auth %q", turn, i, got)
				}
				if r.Get("x-seen-custom") != "yes" || r.Get("x-seen-cookie") != "" || r.Get("x-absent") != "" {
					t.Errorf("turn %d response %d: custom %q cookie %q", turn, i, r.Get("x-seen-custom"), r.Get("x-seen-cookie"))
				}
				body, err := r.ReadAll(1 << 20)
				if err != nil || string(body) != fmt.Sprintf(`{"q":%d}`, i+1) {
					t.Errorf("turn %d response %d: body %q, %v", turn, i, body, err)
				}
				r.Close()
			}
			r, err = c.Send(limited, nil)
			if err != nil {
				return err
			}
			return sdk.ResponseError(r)
		})
		if res.Status != abi.StatusError || res.Error.Code != "RATE_LIMITED" || res.Error.RetryAfterMs != 3000 {
			t.Errorf("turn %d: result %d %+v", turn, res.Status, res.Error)
		}
		if len(res.Requests) != 3 || res.Requests[0].Header.Get("X-Custom") != "yes" || res.Requests[0].Method != "POST" {
			t.Errorf("turn %d: requests %+v", turn, res.Requests)
		}
	}
}
