package config

import (
	"slices"
	"strings"
	"testing"
)

const retrievalDoc = devDoc + `
[[extensions]]
id = "local-hashing"
version = "1.0.0"
module = "build/plugins/local-hashing-1.0.0.wasm"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[[retrieval.embedders]]
id = "hash"
extension = "local-hashing@1.0.0"
account_id = "local"

[retrieval.corpora.docs]
embedder = "hash"
model = "hash-ngram-256"
dimensions = 256
version = "docs-v1"
`

// TestRetrievalConfig: the dev corpus validates; every bad key is named
// with its path and line, and each bound is checked at its edge.
func TestRetrievalConfig(t *testing.T) {
	f, err := Decode([]byte(retrievalDoc), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil || !f.RetrievalOn() {
		t.Fatalf("Validate: %v (on %v)", err, f.RetrievalOn())
	}
	for _, c := range []struct {
		add  string
		want []string
	}{
		{"chunk_bytes = 16384\nmax_chunks = 1000000\nbatch_texts = 256\nbatch_bytes = 1048576\nmax_payload_bytes = 1073741824\nscope = \"subject\"\nranking = \"vector\"\n", nil},
		{"chunk_bytes = 127\n", []string{"retrieval.corpora.docs.chunk_bytes: 127 out of range 128..16384"}},
		{"chunk_bytes = 16385\nmax_chunks = 1000001\nbatch_texts = 257\nbatch_bytes = 1048577\n", []string{
			"retrieval.corpora.docs.chunk_bytes", "retrieval.corpora.docs.max_chunks", "retrieval.corpora.docs.batch_texts", "retrieval.corpora.docs.batch_bytes"}},
		{"scope = \"world\"\nranking = \"semantic\"\n", []string{"retrieval.corpora.docs.scope", "retrieval.corpora.docs.ranking"}},
		{"max_chunks = 0\n", []string{"retrieval.corpora.docs.max_chunks: 0 out of range"}},
	} {
		f, err := Decode([]byte(retrievalDoc+c.add), "")
		if err != nil {
			t.Fatal(err)
		}
		err = f.Validate()
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%q: %v", c.add, err)
			}
			continue
		}
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v, want %q", c.add, err, w)
			}
		}
	}
	bad := strings.NewReplacer(`embedder = "hash"`, `embedder = "nope"`, `dimensions = 256`, `dimensions = 4097`,
		`version = "docs-v1"`, `version = ""`, `extension = "local-hashing@1.0.0"`, `extension = "local-hashing@2.0.0"`).Replace(retrievalDoc)
	f, _ = Decode([]byte(bad+"\n[[tokens]]\nid = \"r\"\nsubject = \"r\"\nsecret = { env = \"R\" }\n[tokens.grants]\nretrieval = { search = [\"docs\", \"other\"] }\n"), "")
	err = f.Validate()
	lines := strings.Split(bad, "\n")
	line := func(prefix string) string {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		return "host.toml:" + itoa(i+1) + ": "
	}
	for _, w := range []string{
		line(`embedder = "nope"`) + "retrieval.corpora.docs.embedder",
		line(`dimensions = 4097`) + "retrieval.corpora.docs.dimensions",
		"retrieval.corpora.docs.version",
		line(`extension = "local-hashing@2.0.0"`) + "retrieval.embedders[0].extension",
		`tokens[1].grants.retrieval.search[1]: "other" is not a configured corpus`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\ndoes not contain %q", err, w)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
