package wasm

import (
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	goruntime "runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/protocol"
)

func upstream(t *testing.T) (*httptest.Server, *x509.CertPool, chan string) {
	t.Helper()
	hits := make(chan string, 100)
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		fmt.Fprintf(w, "auth=%t xkey=%q cookie=%q proxy=%q custom=%q static=%q",
			r.Header.Get("Authorization") == "Bearer sk-secret", r.Header.Get("X-Api-Key"), r.Header.Get("Cookie"),
			r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Custom"), r.Header.Get("X-Static"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		http.Redirect(w, r, "https://other.test/steal", http.StatusFound)
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		w.Header().Set("Content-Type", "text/event-stream")
		// CR LF split across writes, a comment, an event without data.
		for _, part := range []string{"event: a\r", "\ndata: 1\r\n\r", "\n: ping\n\nevent: empty\n\n", "data: hello", " world\n\n"} {
			w.Write([]byte(part))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/bigsse", func(w http.ResponseWriter, r *http.Request) {
		chunk := "data: " + strings.Repeat("x", 64<<10) + "\n\n"
		for i := 0; i <= abi.MaxStreamBytes/(64<<10)+1; i++ {
			if _, err := w.Write([]byte(chunk)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", abi.MaxResponseBytes+1)))
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, roots, hits
}

func TestHTTP(t *testing.T) {
	srv, roots, hits := upstream(t)
	e := loadProvider(t, Options{
		RootCAs: roots,
		LookupHost: func(ctx context.Context, host string) ([]netip.Addr, error) {
			// A declared origin whose name resolves to loopback.
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	})
	var secretCalls atomic.Int32
	for _, client := range []string{"direct", "transport"} {
		p := newProvider(t, e, InstanceConfig{
			Settings: json.RawMessage(`{"endpoint":"` + srv.URL + `/v1"}`),
			Secrets: map[string]func(context.Context) (string, error){"api_key": func(ctx context.Context) (string, error) {
				secretCalls.Add(1)
				return "sk-secret", nil
			}},
		})
		if client == "transport" {
			p.(*provider).net.h1 = nil // the fallback keeps the same guarantees
		}
		t.Run(client, func(t *testing.T) { testHTTPCases(t, p, srv.URL) })
	}
	if secretCalls.Load() == 0 {
		t.Error("secret resolver never called")
	}
	close(hits)
	for h := range hits {
		if h == "/steal" {
			t.Error("redirect target contacted")
		}
	}
}

func testHTTPCases(t *testing.T, p runtime.Provider, base string) {
	for _, tc := range []struct{ name, in, want string }{
		{"credentials injected, guest headers stripped", "http:" + base + "/echo",
			`status:200 auth=true xkey="" cookie="" proxy="" custom="ok" static="static-value"`},
		{"undeclared origin", "http:https://evil.test/", "errno:-1"},
		{"plain http", "http:http://example.com/", "errno:-1"},
		{"same host other port", "http:https://127.0.0.1:1/", "errno:-1"},
		{"declared origin resolving to loopback", "http:https://api.hostile.test/v1/models", "errno:-1"},
		{"redirect", "http:" + base + "/redirect", "errno:-8"},
		{"bad url", "http:%zz", "errno:-2"},
		{"sse", "sse:" + base + "/sse", "status:200 a=1;message=hello world;eof"},
		// Handles and their event readers are pooled: a reused one starts clean.
		{"sse again", "sse:" + base + "/sse", "status:200 a=1;message=hello world;eof"},
		{"stream limit", "sse:" + base + "/bigsse", "errno:-5"},
		{"sse after a stream limit", "sse:" + base + "/sse", "status:200 a=1;message=hello world;eof"},
		{"body limit", "http:" + base + "/big", "errno:-5"},
		{"read after a body limit", "http:" + base + "/echo",
			`status:200 auth=true xkey="" cookie="" proxy="" custom="ok" static="static-value"`},
		{"request body limit", "post:" + base + "/echo", "errno:-5"},
		{"handle limit", "handles:" + base + "/echo", fmt.Sprintf("last=%d", abi.ErrLimit)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := p.Complete(t.Context(), input(tc.in), &sink{})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !strings.HasPrefix(out.Text, tc.want) && !(strings.HasPrefix(tc.want, "errno") && strings.HasSuffix(out.Text, tc.want)) {
				t.Errorf("guest saw %.200q, want %q", out.Text, tc.want)
			}
			if strings.Contains(out.Text, "sk-secret") {
				t.Error("secret visible to the guest")
			}
		})
	}
}

// TestHTTPCancel: cancelling the run aborts the upstream request.
func TestHTTPCancel(t *testing.T) {
	got, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(got)
		<-r.Context().Done()
		close(aborted)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	e := loadProvider(t, Options{RootCAs: roots})
	p := newProvider(t, e, InstanceConfig{Settings: json.RawMessage(`{"endpoint":"` + srv.URL + `"}`)})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-got; cancel() }()
	_, err := p.Complete(ctx, input("http:"+srv.URL+"/hang"), &sink{})
	if protocol.CodeOf(err) != protocol.CodeCancelled {
		t.Fatalf("err = %v, want CANCELLED", err)
	}
	<-aborted
	if n := p.(*provider).net.h1.idleCount(); n != 0 {
		t.Errorf("idle = %d after a cancelled request, want 0", n)
	}
}

func TestPublicAddr(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"8.8.8.8", true}, {"2606:4700::1111", true},
		{"127.0.0.1", false}, {"10.1.2.3", false}, {"172.16.0.1", false}, {"192.168.1.1", false},
		{"169.254.169.254", false}, {"0.0.0.0", false}, {"100.64.0.1", false}, {"::1", false},
		{"fe80::1", false}, {"fd00::1", false}, {"::", false}, {"224.0.0.1", false}, {"255.255.255.255", false},
	} {
		if got := publicAddr(netip.MustParseAddr(tc.ip).Unmap()); got != tc.want {
			t.Errorf("publicAddr(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
	// IPv4-mapped loopback is caught after Unmap.
	if publicAddr(netip.MustParseAddr("::ffff:127.0.0.1").Unmap()) {
		t.Error("mapped loopback is public")
	}
}

// echoUpstream is a declared endpoint that hands the request's headers
// back every way a server might: as response headers, in a JSON body, in
// base64, and as a stream of events flushed byte by byte so that each
// value is split across many reads.
func echoUpstream(t *testing.T) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.Header {
			w.Header()["X-Echo-"+k] = vs
		}
		// In a name too (the client canonicalises its case).
		w.Header().Set("X-Token-"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "1")
		b, _ := json.Marshal(map[string]any{
			"headers": r.Header,
			"base64":  base64.StdEncoding.EncodeToString([]byte(r.Header.Get("Authorization"))),
		})
		// PHP's json_encode escapes '/' and leaves HTML characters.
		b = append(b[:len(b)-1], `,"php":"`+strings.ReplaceAll(r.Header.Get("X-Api-Key"), "/", `\/`)+`"}`...)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Range") == "bytes=2-" {
			b = b[2:]
		}
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(b)
			zw.Close()
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("/br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br") // not asked for, not decoded
		w.Write([]byte(r.Header.Get("Authorization")))
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		auth, _ := json.Marshal(r.Header.Get("Authorization"))
		stream := "event: " + r.Header.Get("X-Api-Key") + "\n" +
			"data: {\"auth\":" + string(auth) + "}\n\n" +
			"data: " + r.Header.Get("X-Api-Key") + "\n" + "data: " + r.Header.Get("Authorization") + "\n\n"
		for i := range len(stream) {
			w.Write([]byte{stream[i]})
			w.(http.Flusher).Flush()
		}
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, roots
}

// TestCredentialsNeverComeBack: whatever a declared endpoint echoes, the
// guest never reads an injected credential (http_head, http_read,
// http_next_event), and a result or event that carries one anyway fails
// the call; no log line carries one either.
func TestCredentialsNeverComeBack(t *testing.T) {
	const (
		apiKey = "sk-echo-0123456789abcdefABCDEF"
		orgKey = "org/<key>&42-secret" // characters JSON encoders escape
	)
	srv, roots := echoUpstream(t)
	e := loadGuest(t, "echo", "echoback", "1.0.0", Options{RootCAs: roots})
	for _, client := range []string{"direct", "transport"} {
		p := newProvider(t, e, InstanceConfig{
			Settings: json.RawMessage(`{"endpoint":"` + srv.URL + `"}`),
			Secrets: map[string]func(context.Context) (string, error){
				"api_key": func(context.Context) (string, error) { return apiKey, nil },
				"org_key": func(context.Context) (string, error) { return orgKey, nil },
			},
		})
		if client == "transport" {
			p.(*provider).net.h1 = nil // asks for gzip and inflates it
		}
		t.Run(client, func(t *testing.T) { testCredentialEcho(t, p, srv.URL, apiKey, orgKey) })
	}
	// Every line, debug included.
	if f := leakedPiece(e.logs.String(), apiKey); f != "" {
		t.Errorf("a log line carries %q:\n%s", f, e.logs.String())
	}
}

// leakedPiece returns the first piece of a credential in s: pieces that
// no encoding the tests use changes, and the middle of the base64 echo.
func leakedPiece(s, apiKey string) string {
	b64 := base64.StdEncoding.EncodeToString([]byte("Bearer " + apiKey))
	for _, f := range []string{apiKey[3 : len(apiKey)-3], "42-secret", b64[12 : len(b64)-8]} {
		if strings.Contains(s, f) {
			return f
		}
	}
	return ""
}

func testCredentialEcho(t *testing.T, p runtime.Provider, base, apiKey, orgKey string) {
	leaked := func(s string) string { return leakedPiece(s, apiKey) }
	for _, tc := range []struct{ name, in, want string }{
		{"headers and JSON body", "read:" + base + "/headers", `"x-echo-authorization":"Bearer ` + stars(apiKey) + `"`},
		{"body in base64", "read:" + base + "/headers", `"base64":"`},
		{"header names", "read:" + base + "/headers", `"x-token-` + stars(apiKey) + `":"1"`},
		{"events split across reads", "events:" + base + "/sse", stars(orgKey) + `={"auth":"Bearer ` + stars(apiKey) + `"};`},
		{"event data lines", "events:" + base + "/sse", "message=" + stars(orgKey) + "\nBearer " + stars(apiKey) + ";eof"},
		{"stream read raw", "read:" + base + "/sse", "data: " + stars(orgKey) + "\ndata: Bearer " + stars(apiKey)},
		// The guest's own Accept-Encoding and Range are dropped: the
		// direct client asks for no encoding, the Transport asks for gzip
		// and inflates it; the range is whole.
		{"compressed and ranged", "read-gzip:" + base + "/headers", "\n" + `{"base64":"QmVhcmVyIHNr*`},
		{"undecoded encoding", "read:" + base + "/br", "errno:-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{}
			out, err := p.Complete(t.Context(), input(tc.in), s)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !strings.Contains(out.Text, tc.want) {
				t.Errorf("guest read %q, want it to contain %q", out.Text, tc.want)
			}
			if f := leaked(out.Text); f != "" {
				t.Errorf("the guest read %q: %s", f, out.Text)
			}
			if f := leaked(s.text()); f != "" {
				t.Errorf("an event carries %q", f)
			}
		})
	}
	for _, tc := range []struct {
		name, in string
		want     protocol.Code
	}{
		{"result", "leak-output:" + apiKey, protocol.CodeInvalidProviderResult},
		{"result, JSON-escaped", "leak-output:" + orgKey, protocol.CodeInvalidProviderResult},
		{"event", "leak-emit:" + apiKey, protocol.CodeInvalidProviderResult},
		{"event, JSON-escaped", "leak-emit:x " + orgKey + " y", protocol.CodeInvalidProviderResult},
		{"no credential", "leak-output:sk-echo-", ""},
		{"log line", "leak-log:" + apiKey, ""}, // dropped: see the check of the logs below
	} {
		t.Run("guest puts it in a "+tc.name, func(t *testing.T) {
			s := &sink{}
			out, err := p.Complete(t.Context(), input(tc.in), s)
			if got := protocol.CodeOf(err); got != tc.want {
				t.Fatalf("code %q (%v), want %q", got, err, tc.want)
			}
			if err != nil && leaked(err.Error()) != "" {
				t.Errorf("error carries a credential: %v", err)
			}
			if out != nil && leaked(out.Text) != "" {
				t.Errorf("result delivered: %q", out.Text)
			}
			if f := leaked(s.text()); f != "" {
				t.Errorf("event delivered: %q", f)
			}
		})
	}
}

// BenchmarkHTTPRoundTrip: one request as a guest makes it (http_start,
// http_read to the end, http_close) with a credential injected and masked,
// to a loopback server answering like a chat completion, through the
// direct client and through net/http's Transport. Besides ns/op and
// allocs/op: wakeups/op estimates goroutine wake-ups (the runtime records
// the scheduling latency of one in 8, /sched/latencies:seconds),
// goroutines/op those created, ctxsw/op the process's context switches and
// cpu-ns/op its user + system CPU. The in-process server's goroutines are
// counted in all of them, alike for both clients.
func BenchmarkHTTPRoundTrip(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the mock vendor."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer srv.Close()
	x := benchLoad(b, Options{Cache: sharedCache})
	defer x.Close(context.Background())
	ep, _ := url.Parse(srv.URL)
	meta, _ := json.Marshal(abi.HTTPRequest{Method: "POST", URL: srv.URL + "/v1/chat/completions",
		Headers: map[string]string{"Content-Type": "application/json"}})
	body := []byte(`{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}`)
	const bodyAt, bufAt, bufLen = 4096, 8192, 32 << 10
	for _, client := range []string{"direct", "transport"} {
		b.Run(client, func(b *testing.B) {
			np, err := newNetPolicy(x, ep, map[string]func(context.Context) (string, error){
				"api_key": func(context.Context) (string, error) { return "sk-bench-0123456789abcdef", nil },
			})
			if err != nil {
				b.Fatal(err)
			}
			if client == "transport" {
				np.h1 = nil
			}
			inst, l, err := x.pool.acquire(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer x.pool.release(b.Context(), inst, l, false)
			cs := &callState{x: x, inst: inst, op: abi.OpComplete, sink: nopSink{}, parent: b.Context(), ctx: b.Context(), net: np}
			ctx := context.WithValue(b.Context(), callKey{}, cs)
			inst.mem.Write(0, meta)
			inst.mem.Write(bodyAt, body)
			stack := make([]uint64, 4)
			goruntime.LockOSThread() // as a call's goroutine is
			defer goruntime.UnlockOSThread()
			roundTrip := func() {
				stack[0], stack[1], stack[2], stack[3] = 0, uint64(len(meta)), bodyAt, uint64(len(body))
				hostHTTPStart(ctx, inst.mod, stack)
				h := int32(uint32(stack[0]))
				if h < 0 {
					b.Fatalf("http_start: %d", h)
				}
				for got := 0; ; {
					stack[0], stack[1], stack[2] = uint64(h), bufAt, bufLen
					hostHTTPRead(ctx, inst.mod, stack)
					if int64(stack[0]) < 0 {
						b.Fatalf("http_read: %d", int64(stack[0]))
					}
					n, eof := abi.UnpackEOF(int64(stack[0]))
					if got += int(n); eof {
						if got != len(answer) {
							b.Fatalf("read %d bytes, want %d", got, len(answer))
						}
						break
					}
				}
				stack[0] = uint64(h)
				hostHTTPClose(ctx, inst.mod, stack)
			}
			roundTrip() // the connection is dialed outside the loop
			samples := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/goroutines-created:goroutines"}}
			read := func() (wakeups, created uint64) {
				metrics.Read(samples)
				for _, c := range samples[0].Value.Float64Histogram().Counts {
					wakeups += c
				}
				return wakeups * 8, samples[1].Value.Uint64()
			}
			w0, g0 := read()
			cpu0, sw0 := processUsage()
			for b.Loop() {
				roundTrip()
			}
			w1, g1 := read()
			cpu1, sw1 := processUsage()
			n := float64(b.N)
			b.ReportMetric(float64(w1-w0)/n, "wakeups/op")
			b.ReportMetric(float64(g1-g0)/n, "goroutines/op")
			b.ReportMetric(float64(sw1-sw0)/n, "ctxsw/op")
			b.ReportMetric(float64(cpu1-cpu0)/n, "cpu-ns/op")
		})
	}
}
