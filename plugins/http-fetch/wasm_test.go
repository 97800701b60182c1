package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/internal/testenv"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/schema"
	"adhost/runtime/wasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// site serves the pages the tests fetch.
func site() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<html><head><title>Hi</title><script>x()</script></head><body><p>Hello &amp; welcome</p></body></html>`))
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("just text"))
	})
	mux.HandleFunc("/size/ok", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("a", MaxBodyBytes)))
	})
	mux.HandleFunc("/size/over", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("a", MaxBodyBytes+1)))
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G'})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	return mux
}

type fetcher struct {
	t  *testing.T
	ts runtime.ToolSet
}

func load(t *testing.T, opts wasm.Options, origins ...string) (*fetcher, error) {
	t.Helper()
	settings, _ := json.Marshal(map[string]any{"allow_origins": append([]string{}, origins...)})
	ts, err := plugintest.LoadTools(t, "plugins/http-fetch", ID, Version, opts, wasm.InstanceConfig{Settings: settings})
	if err != nil {
		return nil, err
	}
	return &fetcher{t, ts}, nil
}

func (f *fetcher) fetch(url string) (*result, error) {
	args, _ := json.Marshal(map[string]string{"url": url})
	out, err := f.ts.Invoke(f.t.Context(), abi.ToolCall{ID: "c", Name: ToolName, Arguments: args}, func() {})
	if err != nil {
		return nil, err
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		f.t.Fatalf("output %s: %v", out, err)
	}
	return &r, nil
}

func (f *fetcher) refused(url, want string) {
	f.t.Helper()
	r, err := f.fetch(url)
	if err != nil || !strings.Contains(r.Error, want) || r.Text != "" {
		f.t.Errorf("%s: %+v %v, want an error with %q", url, r, err, want)
	}
}

// TestWasm runs the built tool against 127.0.0.1 servers: a loopback
// origin is reached only when it is listed exactly; a name that resolves
// to loopback is refused even when listed (DNS rebinding); redirects and
// bodies past the bound are refused; HTML comes back as text.
func TestWasm(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	plain := httptest.NewServer(site())
	defer plain.Close()
	other := httptest.NewServer(http.RedirectHandler(plain.URL+"/page", http.StatusFound))
	defer other.Close()
	tlsSrv := httptest.NewTLSServer(site())
	defer tlsSrv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	opts := wasm.Options{RootCAs: pool, LookupHost: func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // every name is rebound to loopback
	}}
	named := "https://example.com:" + strconv.Itoa(tlsPort)
	f, err := load(t, opts, plain.URL, other.URL, named, tlsSrv.URL)
	if err != nil {
		t.Fatal(err)
	}

	r, err := f.fetch(plain.URL + "/page#frag")
	if err != nil || r.Status != 200 || r.ContentType != "text/html" || r.Text != "Hi\n\nHello & welcome" || r.Error != "" || r.URL != plain.URL+"/page" {
		t.Errorf("page: %+v %v", r, err)
	}
	if r, err := f.fetch(tlsSrv.URL + "/plain"); err != nil || r.Text != "just text" {
		t.Errorf("https by address: %+v %v", r, err)
	}
	if r, err := f.fetch(plain.URL + "/size/ok"); err != nil || r.Error != "" || len(r.Text) != MaxTextBytes || !r.Truncated {
		t.Errorf("a body at the bound: error %q, %d bytes, truncated %v, %v", r.Error, len(r.Text), r.Truncated, err)
	}
	f.refused(plain.URL+"/size/over", "larger than 1000000 bytes")
	f.refused(plain.URL+"/binary", `not text (content type "image/png")`)
	f.refused(other.URL+"/", "redirect")
	f.refused(named+"/page", "private address")                                                   // listed by name, resolves to loopback
	f.refused("https://example.org/", "not allowlisted")                                          // not listed
	f.refused(strings.Replace(plain.URL, "127.0.0.1", "localhost", 1)+"/page", "not allowlisted") // another origin
	f.refused("ftp://example.com/x", "not an absolute http(s) URL")
	f.refused("http://user:pw@127.0.0.1/", "user info")

	// An empty allowlist reaches nothing, loopback included.
	empty, err := load(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	empty.refused(plain.URL+"/page", "not allowlisted")

	// A listing the host would not honour is a configuration error.
	for _, bad := range [][]string{{"https://example.com/path"}, {"http://example.com"}, {"HTTPS://Example.com"}, {plain.URL, plain.URL}} {
		if _, err := load(t, opts, bad...); err == nil || !strings.Contains(err.Error(), "allow_origins") {
			t.Errorf("allow_origins %q: %v", bad, err)
		}
	}
}

// TestWasmTimeout: a server that never answers ends the call at the
// extension's wall-clock bound (the smaller of the manifest's timeoutMs
// and the operator's turn timeout), as a failed tool call.
func TestWasmTimeout(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and loads a wasm module (not with -short or -race)")
	}
	srv := httptest.NewServer(site())
	defer srv.Close()
	f, err := load(t, wasm.Options{TurnTimeout: 300 * time.Millisecond}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.fetch(srv.URL + "/slow"); protocol.CodeOf(err) != protocol.CodeToolFailed {
		t.Fatalf("slow server: %v, want TOOL_FAILED", err)
	}
}

func TestManifest(t *testing.T) {
	m := plugintest.CheckToolManifest(t, ID, tools{})
	if m.OriginsSetting() != "allow_origins" || len(m.Origins()) != 0 || m.KV || !m.Tool(ToolName).HasSideEffects() {
		t.Fatalf("manifest: %+v", m)
	}
	defs := m.ToolDefs()
	out, err := schema.Compile(defs[0].OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*result{{URL: "u", Status: 200, ContentType: "text/html", Text: "x"}, {URL: "u", Error: "refused"}, {URL: "u", Text: strings.Repeat("ü", MaxTextBytes/2), Truncated: true}} {
		if err := out.ValidateJSON(encode(r)); err != nil {
			t.Errorf("output %+v: %v", r, err)
		}
	}
}
