package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStoreBackend(t *testing.T) {
	f, err := decodeValidate(t, "version = 1\n")
	if err != nil || f.StoreBackend() != BackendBadger || f.Store.JetStream != nil {
		t.Fatalf("default: %v %q", err, f.StoreBackend())
	}
	f, err = decodeValidate(t, "version = 1\n[store]\nbackend = \"jetstream\"\n[store.jetstream]\nurl = \"nats://127.0.0.1:4222, nats://10.0.0.2:4222\"\n")
	if err != nil {
		t.Fatal(err)
	}
	j := f.Store.JetStream
	if f.StoreBackend() != BackendJetStream || !slices.Equal(j.URL, []string{"nats://127.0.0.1:4222", "nats://10.0.0.2:4222"}) ||
		j.Replicas != 1 || j.BucketPrefix != "ADHOST" || j.Credentials != "" {
		t.Fatalf("jetstream defaults: %+v", j)
	}
	// An array of URLs, every bound at its edges, credentials beside
	// host.toml.
	for _, r := range []string{"1", "3", "5"} {
		doc := "version = 1\n[store]\nbackend = \"jetstream\"\n[store.jetstream]\nurl = [\"tls://a:4222\", \"nats://b\"]\nreplicas = " + r +
			"\nbucket_prefix = \"" + strings.Repeat("a", 64) + "\"\ncredentials = \"nats.creds\"\n"
		f, err := Decode([]byte(doc), filepath.FromSlash("/etc/adhost/host.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); err != nil {
			t.Fatalf("replicas %s: %v", r, err)
		}
		if want := filepath.FromSlash("/etc/adhost/nats.creds"); f.Store.JetStream.Credentials != want || len(f.Store.JetStream.URL) != 2 {
			t.Fatalf("%+v", f.Store.JetStream)
		}
	}
}

func TestStoreBackendProblems(t *testing.T) {
	js := "version = 1\n[store]\nbackend = \"jetstream\"\n[store.jetstream]\n"
	for _, c := range []struct{ doc, want string }{
		{"version = 1\n[store]\nbackend = \"etcd\"\n", `host.toml:3: store.backend: "etcd": want "badger" or "jetstream"`},
		{"version = 1\n[store]\nbackend = \"jetstream\"\n", `host.toml:2: store.jetstream.url: required`},
		{js + "replicas = 3\n", `host.toml:4: store.jetstream.url: required`},
		{"version = 1\n[store.jetstream]\nurl = \"nats://a\"\n", `host.toml:2: store.jetstream: set, but store.backend is "badger"`},
		{js + "url = \"http://a:4222\"\n", `host.toml:5: store.jetstream.url: "http://a:4222": scheme "http"`},
		{js + "url = \"nats://\"\n", `store.jetstream.url: "nats://": no host`},
		{js + "url = \"nats://u:secret@a/x\"\n", `store.jetstream.url: "nats://***@a/x": a server URL has no path`},
		{js + "url = \"nats://a\"\nreplicas = 2\n", `host.toml:6: store.jetstream.replicas: 2: want 1, 3 or 5`},
		{js + "url = \"nats://a\"\nreplicas = 0\n", `store.jetstream.replicas: 0: want 1, 3 or 5`},
		{js + "url = \"nats://a\"\nbucket_prefix = \"a.b\"\n", `host.toml:6: store.jetstream.bucket_prefix: "a.b" does not match`},
		{js + "url = \"nats://a\"\nbucket_prefix = \"" + strings.Repeat("a", 65) + "\"\n", `store.jetstream.bucket_prefix`},
		{js + "url = \"nats://a\"\nbucket_prefix = \"\"\n", `store.jetstream.bucket_prefix: "" does not match`},
		{js + "url = \"nats://a\"\ncredentials = \"\"\n", `host.toml:6: store.jetstream.credentials: empty`},
	} {
		_, err := decodeValidate(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.doc, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("a password reached the message: %v", err)
		}
	}
	// Unknown keys and wrong types are refused with their line.
	for _, c := range []struct{ doc, want string }{
		{js + "url = \"nats://a\"\nreplica = 3\n", `host.toml:6: unknown key "store.jetstream.replica"`},
		{js + "url = 5\n", `store.jetstream.url`},
	} {
		_, err := decodeValidate(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}
