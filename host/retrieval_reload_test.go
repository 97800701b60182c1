package host

import (
	"strings"
	"testing"

	"adhost/host/config"
)

const reloadRetrievalDoc = `version = 1

[[extensions]]
id = "local-hashing"
version = "1.0.0"
module = "local-hashing.wasm"
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"

[[extensions]]
id = "notes"
version = "1.0.0"
module = "notes.wasm"
sha256 = "2222222222222222222222222222222222222222222222222222222222222222"

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

// TestRetrievalReloadCheck: a reload may change any other extension's pin,
// but not the pin of one an embedder uses (changed or removed), which the
// retrieval service opened at start still holds.
func TestRetrievalReloadCheck(t *testing.T) {
	decode := func(doc string) *config.File {
		f, err := config.Decode([]byte(doc), "")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	old := decode(reloadRetrievalDoc)
	for _, c := range []struct {
		name, doc string
		refused   bool
	}{
		{"unchanged", reloadRetrievalDoc, false},
		{"another extension's pin", strings.Replace(reloadRetrievalDoc, "2222", "3333", 1), false},
		{"the embedder's pin", strings.Replace(reloadRetrievalDoc, "1111", "4444", 1), true},
		{"the embedder's module path", strings.Replace(reloadRetrievalDoc, `"local-hashing.wasm"`, `"other.wasm"`, 1), true},
		{"the embedder's extension removed", "version = 1\n" + reloadRetrievalDoc[strings.Index(reloadRetrievalDoc, "[[extensions]]\nid = \"notes\""):], true},
	} {
		err := retrievalReloadCheck(old, decode(c.doc))
		if (err != nil) != c.refused {
			t.Errorf("%s: %v, refused %v", c.name, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), `local-hashing@1.0.0 serves retrieval.embedders[0] ("hash")`) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if err := retrievalReloadCheck(decode(`version = 1
[[extensions]]
id = "notes"
version = "1.0.0"
module = "notes.wasm"
sha256 = "2222222222222222222222222222222222222222222222222222222222222222"
`), old); err != nil {
		t.Errorf("no retrieval before: %v", err)
	}
}
