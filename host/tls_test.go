package host

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"adhost/client"
)

// testPKI writes a fresh CA and a leaf certificate for 127.0.0.1 to dir
// and returns the CA pool and the leaf's PEM paths.
func testPKI(t *testing.T, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "adhost test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, certFile, keyFile
}

// TestTLS serves HTTPS on 127.0.0.1 with a certificate from a test CA and
// talks to it with certificate verification on: HSTS is on every
// response, TLS below 1.2 is refused, and the Go client works over it.
func TestTLS(t *testing.T) {
	env := newEnv(t, envOptions{})
	pool, certFile, keyFile := testPKI(t, t.TempDir())
	cfg, err := TLSConfig(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x", cfg.MinVersion)
	}
	s := NewServer(ServerOptions{
		Engine: env.engine,
		Tokens: []Token{{ID: "t1", Subject: "alice", Secret: testToken, Providers: []string{testProvider}}},
	})
	s.SetReady()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, cfg) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	base := "https://" + ln.Addr().String()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for _, target := range []string{"/health", "/nope"} {
		resp, err := hc.Get(base + target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		checkCommonHeaders(t, resp.Header, true)
	}

	c, err := client.New(base, client.WithToken(testToken), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(t.Context(), req("hi"))
	if err != nil || res.Text != "Hello world" {
		t.Fatalf("run over TLS: %v %v", res, err)
	}

	// SSE over TLS (HTTP/2 with Go's client): frames and flushing work.
	var text string
	if _, err := c.Stream(t.Context(), req("deltas:100"), func(ev client.Event) error {
		text += ev.Text
		return nil
	}); err != nil || len(text) != 100 {
		t.Fatalf("stream over TLS: %q %v", text, err)
	}

	// Without the CA the certificate does not verify.
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("unverified certificate accepted")
	}
	// TLS 1.1 is refused.
	old := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}
	defer old.CloseIdleConnections()
	if _, err := (&http.Client{Transport: old}).Get(base + "/health"); err == nil {
		t.Error("TLS 1.1 accepted")
	}
}

func TestTLSConfigMissingFiles(t *testing.T) {
	if _, err := TLSConfig(filepath.Join(t.TempDir(), "no.pem"), "no.key"); err == nil {
		t.Error("missing files accepted")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7433": true, "127.0.0.1": true, "localhost:80": true, "localhost": true,
		"[::1]:7433": true, "::1": true, "[::1]": true,
		"0.0.0.0:7433": false, ":7433": false, "192.168.1.2:7433": false, "example.com:443": false,
		"127.0.0.2:7433": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
