package jetstream

import (
	"strings"
	"testing"

	"adhost/runtime/durable"
)

func TestKeyEncoding(t *testing.T) {
	for _, k := range []string{"a", "a/b", "a.b", "a=b", "/a", "a/", "a//b", "=d", "=e.", "jobs/v1/job/0f-x_y", "/"} {
		enc := encodeKey(k)
		if strings.HasPrefix(enc, ".") || strings.HasSuffix(enc, ".") || strings.Contains(enc, "..") {
			t.Errorf("%q → %q: not a JetStream key", k, enc)
		}
		if got, err := decodeKey(enc); err != nil || got != k {
			t.Errorf("%q → %q → %q %v", k, enc, got, err)
		}
	}
	// "a.b" and "a/b" are different durable keys.
	if encodeKey("a.b") == encodeKey("a/b") {
		t.Fatal("a.b and a/b collide")
	}
}

func TestListFilter(t *testing.T) {
	for prefix, want := range map[string]string{"": ">", "jobs": ">", "jobs/": "jobs.>", "jobs/v1/jo": "jobs.v1.>", "a.b/": "a=db.>"} {
		if got := listFilter(prefix); got != want {
			t.Errorf("listFilter(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func FuzzKeyEncoding(f *testing.F) {
	for _, k := range []string{"a/b", "a.b", "=", "//", "a=d"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if durable.CheckKey(k) != nil {
			return
		}
		enc := encodeKey(k)
		if strings.HasPrefix(enc, ".") || strings.HasSuffix(enc, ".") || strings.Contains(enc, "..") {
			t.Fatalf("%q → %q: empty token", k, enc)
		}
		got, err := decodeKey(enc)
		if err != nil || got != k {
			t.Fatalf("%q → %q → %q %v", k, enc, got, err)
		}
	})
}
