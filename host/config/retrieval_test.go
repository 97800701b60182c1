package config

import (
	"path/filepath"
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

// TestRetrievalPDFConfig: the PDF extractor's keys at each edge, named
// with their line; a bound set while pdf-ingestion is off is refused
// rather than silently ignored.
func TestRetrievalPDFConfig(t *testing.T) {
	for _, c := range []struct {
		add  string
		want string
	}{
		{"pdf = true\n", ""},
		{"pdf = true\npdf_max_pages = 1\npdf_workers = 1\npdf_memory_mib = 16\npdf_timeout_ms = 1\n", ""},
		{"pdf = true\npdf_max_pages = 1000\npdf_workers = 16\npdf_memory_mib = 2048\npdf_timeout_ms = 600000\n", ""},
		{"pdf = true\npdf_max_pages = 1001\n", "retrieval.pdf_max_pages: 1001 out of range 1..1000"},
		{"pdf = true\npdf_max_pages = 0\n", "retrieval.pdf_max_pages: 0 out of range 1..1000"},
		{"pdf = true\npdf_workers = 17\n", "retrieval.pdf_workers: 17 out of range 1..16"},
		{"pdf = true\npdf_memory_mib = 15\n", "retrieval.pdf_memory_mib: 15 out of range 16..2048"},
		{"pdf = true\npdf_timeout_ms = 600001\n", "retrieval.pdf_timeout_ms: 600001 out of range 1..600000"},
		{"pdf_max_pages = 100\n", "host.toml:" + itoa(strings.Count(retrievalDoc, "\n")+3) + ": retrieval.pdf_max_pages: set, but pdf-ingestion is off"},
		{"pdf = true\npdf_pages = 3\n", "retrieval.pdf_pages"},
		{"pdf = true\npdf_allow_empty_pages = true\n", ""},
		{"pdf_allow_empty_pages = false\n", "retrieval.pdf_allow_empty_pages: set, but pdf-ingestion is off"},
	} {
		doc := retrievalDoc + "\n[retrieval]\n" + c.add
		f, err := Decode([]byte(doc), "")
		if err == nil {
			err = f.Validate()
		}
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.add, err)
			} else if !f.Retrieval.PDF {
				t.Errorf("%q: pdf off", c.add)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.add, err, c.want)
		}
	}
	// pdf = true without a corpus would serve nothing.
	f, err := Decode([]byte(devDoc+"\n[retrieval]\npdf = true\n"), "")
	if err == nil {
		err = f.Validate()
	}
	if want := "host.toml:" + itoa(strings.Count(devDoc, "\n")+3) + ": retrieval.pdf: pdf-ingestion needs a corpus"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("pdf without corpora: %v, want %q", err, want)
	}
}

// An embedder's secret file is relative to host.toml's directory, like a
// provider's.
func TestRetrievalSecretFileRelative(t *testing.T) {
	doc := strings.Replace(retrievalDoc, "extension = \"local-hashing@1.0.0\"\naccount_id = \"local\"",
		"extension = \"local-hashing@1.0.0\"\naccount_id = \"local\"\nsecrets = { api_key = { file = \"keys/embed.key\" } }", 1)
	f, err := Decode([]byte(doc), filepath.Join("/etc/adhost", "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Retrieval.Embedders[0].Secrets["api_key"].File; got != filepath.Join("/etc/adhost", "keys", "embed.key") {
		t.Fatalf("secret file %q", got)
	}
}
