package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Store backends ([store] backend).
const (
	BackendBadger    = "badger"
	BackendJetStream = "jetstream"
)

// JetStream is [store.jetstream]: the shared store of several hosts
// (durable jobs, sessions and idempotency keys). Usage records and
// qualification reports stay in the local Badger store (store.path).
type JetStream struct {
	// URL is one or more nats:// (or tls://) server URLs of one cluster:
	// a string (several comma-separated) or an array of strings.
	URL URLList `toml:"url"`
	// Credentials is a NATS credentials (.creds) file, relative to
	// host.toml; empty: none.
	Credentials string `toml:"credentials"`
	// Replicas of every bucket and stream: 1, 3 or 5 (default 1).
	Replicas int `toml:"replicas"`
	// BucketPrefix names the buckets and the stream ([A-Za-z0-9_-],
	// 1..64, default "ADHOST"): hosts with the same prefix on the same
	// servers share state.
	BucketPrefix string `toml:"bucket_prefix"`
}

// URLList is a string or an array of strings in host.toml.
type URLList []string

// UnmarshalTOML accepts "nats://a,nats://b" as well as ["nats://a", …].
func (u *URLList) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		*u = nil
		for _, s := range strings.Split(x, ",") {
			*u = append(*u, strings.TrimSpace(s))
		}
	case []any:
		*u = nil
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want strings, found %T", e)
			}
			*u = append(*u, s)
		}
	default:
		return fmt.Errorf("want a string or an array of strings, found %T", v)
	}
	return nil
}

// Defaults of [store.jetstream].
const (
	DefaultBucketPrefix = "ADHOST"
	DefaultReplicas     = 1
)

var bucketPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// StoreBackend is the backend of the durable features: "badger" unless
// [store] backend says "jetstream".
func (f *File) StoreBackend() string {
	if f.Store.Backend == "" {
		return BackendBadger
	}
	return f.Store.Backend
}

// validateStore checks [store] backend and [store.jetstream], fills the
// defaults and resolves the credentials path. A [store.jetstream] table
// the backend would not use is an error rather than silently ignored.
func (f *File) validateStore(p *problems) {
	switch f.Store.Backend {
	case "", BackendBadger, BackendJetStream:
	default:
		p.add("store.backend", "%q: want %q or %q", f.Store.Backend, BackendBadger, BackendJetStream)
		return
	}
	j := f.Store.JetStream
	if f.StoreBackend() != BackendJetStream {
		if j != nil {
			p.add("store.jetstream", "set, but store.backend is %q (set backend = %q to use it)", f.StoreBackend(), BackendJetStream)
		}
		return
	}
	if j == nil || len(j.URL) == 0 {
		p.add("store.jetstream.url", "required when store.backend = %q (e.g. \"nats://127.0.0.1:4222\")", BackendJetStream)
		return
	}
	for _, s := range j.URL {
		if err := checkNATSURL(s); err != nil {
			p.add("store.jetstream.url", "%v", err)
		}
	}
	set := func(k string) bool { _, ok := f.pos["store.jetstream."+k]; return ok }
	switch {
	case !set("replicas") && j.Replicas == 0:
		j.Replicas = DefaultReplicas
	case j.Replicas != 1 && j.Replicas != 3 && j.Replicas != 5:
		p.add("store.jetstream.replicas", "%d: want 1, 3 or 5", j.Replicas)
	}
	switch {
	case !set("bucket_prefix") && j.BucketPrefix == "":
		j.BucketPrefix = DefaultBucketPrefix
	case !bucketPrefixPattern.MatchString(j.BucketPrefix):
		p.add("store.jetstream.bucket_prefix", "%q does not match %s", j.BucketPrefix, bucketPrefixPattern)
	}
	if set("credentials") && j.Credentials == "" {
		p.add("store.jetstream.credentials", "empty: remove the key for no credentials")
	}
	if j.Credentials != "" && !filepath.IsAbs(j.Credentials) && f.Dir != "" {
		j.Credentials = filepath.Join(f.Dir, j.Credentials)
	}
}

// checkNATSURL accepts nats:// and tls:// URLs with a host, and keeps any
// password out of the message.
func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return fmt.Errorf("%q is not a URL", redactURL(s))
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return fmt.Errorf("%q: scheme %q, want nats:// or tls://", redactURL(s), u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q: no host", redactURL(s))
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return fmt.Errorf("%q: a server URL has no path or query", redactURL(s))
	}
	return nil
}

func redactURL(s string) string {
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			return s[:i+3] + "***" + s[at:]
		}
	}
	return s
}
