package retrieval

import (
	"encoding/json"
	"strings"
	"testing"

	"adhost/runtime/protocol"
)

// FuzzDecodeRequests: the strict decoders of every retrieval body and of
// the run option never panic, and refuse only with their own code.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{"corpus":"docs","query":"battery","sourceIds":["a","b"],"limit":16,"maxContextBytes":1,"minScore":-1}`,
		`{"corpus":"docs"}`,
		`{"corpus":"docs","source":{"id":"s","revision":"r","location":{"page":2,"pageEnd":3}},"chunks":[{"id":"c","text":"x","location":{"startLine":1}}]}`,
		`{"corpus":"docs","sourceId":"s","revision":"r"}`,
		`{"corpus":"docs","document":{"type":"email","source":{"id":"m","revision":"1"},"threadId":"t","messages":[{"id":"a","text":"hi"}]},"chunking":{"maxBytes":128}}`,
		`{"corpus":"docs","query":"\u0000"}`, `[]`, `null`, `{"corpus":1}`,
	} {
		f.Add([]byte(s))
	}
	svc := &Service{corpora: map[string]*corpus{}}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return // the host refuses it before any decoder (INVALID_REQUEST)
		}
		check := func(what string, err error, code protocol.Code) {
			if err != nil && protocol.CodeOf(err) != code {
				t.Fatalf("%s: %v, want %s", what, err, code)
			}
		}
		_, err := DecodeSearch(body)
		check("search", err, CodeInvalidRetrieval)
		_, err = DecodeRunOption(body)
		check("run option", err, CodeInvalidRetrieval)
		if p, err := svc.Plan(body, "the run input"); err == nil && (p.Limit() < 1 || p.Limit() > MaxLimit || !IsID(p.Corpus())) {
			t.Fatalf("plan of %s: corpus %q limit %d", body, p.Corpus(), p.Limit())
		} else {
			check("plan", err, CodeInvalidRetrieval)
		}
		_, err = DecodeIndex(body)
		check("index", err, CodeInvalidRetrieval)
		_, err = DecodeDelete(body)
		check("delete", err, CodeInvalidRetrieval)
		_, err = DecodeIngest(body)
		check("ingest", err, CodeInvalidIngestion)
	})
}

// TestClipQuery: a default query is the run input within the query
// bounds, cut at a character boundary.
func TestClipQuery(t *testing.T) {
	long := make([]byte, 0, MaxQueryBytes+8)
	for len(long) < MaxQueryBytes-1 {
		long = append(long, 'a')
	}
	long = append(long, "é€"...) // 2 + 3 bytes across the bound
	got := clipQuery(string(long))
	if len(got) > MaxQueryBytes || len(got) != MaxQueryBytes-1 {
		t.Errorf("clipped to %d bytes", len(got))
	}
	if clipQuery("short") != "short" {
		t.Error("a short input changed")
	}
}

// TestNumbersAreJSONNumbers: every numeric member of the strict bodies is
// a JSON number; the same value quoted (which encoding/json's json.Number
// would take) is a schema error with the body's own code, beside the
// unquoted value that passes.
func TestNumbersAreJSONNumbers(t *testing.T) {
	for _, c := range []struct {
		name, ok, quoted string
		decode           func([]byte) error
		code             protocol.Code
	}{
		{"search limit", `{"corpus":"d","query":"q","limit":8}`, `{"corpus":"d","query":"q","limit":"8"}`,
			func(b []byte) error { _, err := DecodeSearch(b); return err }, CodeInvalidRetrieval},
		{"search maxContextBytes", `{"corpus":"d","query":"q","maxContextBytes":100}`, `{"corpus":"d","query":"q","maxContextBytes":"100"}`,
			func(b []byte) error { _, err := DecodeSearch(b); return err }, CodeInvalidRetrieval},
		{"run option minScore", `{"corpus":"d","minScore":0.5}`, `{"corpus":"d","minScore":"0.5"}`,
			func(b []byte) error { _, err := DecodeRunOption(b); return err }, CodeInvalidRetrieval},
		{"index location page", `{"corpus":"d","source":{"id":"s","revision":"r","location":{"page":2}},"chunks":[{"id":"c","text":"x"}]}`,
			`{"corpus":"d","source":{"id":"s","revision":"r","location":{"page":"2"}},"chunks":[{"id":"c","text":"x"}]}`,
			func(b []byte) error { _, err := DecodeIndex(b); return err }, CodeInvalidRetrieval},
		{"ingest chunking.maxBytes", `{"corpus":"d","chunking":{"maxBytes":128},"document":{"type":"text","source":{"id":"s","revision":"r"},"mediaType":"text/plain","text":"x"}}`,
			`{"corpus":"d","chunking":{"maxBytes":"128"},"document":{"type":"text","source":{"id":"s","revision":"r"},"mediaType":"text/plain","text":"x"}}`,
			func(b []byte) error { _, err := DecodeIngest(b); return err }, CodeInvalidIngestion},
		{"ingest idleTimeoutMs", `{"corpus":"d","idleTimeoutMs":10,"document":{"type":"text","source":{"id":"s","revision":"r"},"mediaType":"text/plain","text":"x"}}`,
			`{"corpus":"d","idleTimeoutMs":"10","document":{"type":"text","source":{"id":"s","revision":"r"},"mediaType":"text/plain","text":"x"}}`,
			func(b []byte) error { _, err := DecodeIngest(b); return err }, CodeInvalidIngestion},
	} {
		if err := c.decode([]byte(c.ok)); err != nil {
			t.Errorf("%s as a number: %v", c.name, err)
		}
		if err := c.decode([]byte(c.quoted)); protocol.CodeOf(err) != c.code {
			t.Errorf("%s quoted: %v, want %s", c.name, err, c.code)
		}
	}
}

// TestSourceURIWhitespace: a source uri is ^(https|app)://[^\s]+$ with
// JavaScript's \s, as for attachments (wire-context §12): the Unicode
// spaces a Go \S lets through are refused in index and ingest bodies alike,
// and so is a uri naming a user or password (it would make every run
// retrieving the passage fail INVALID_CONTEXT).
func TestSourceURIWhitespace(t *testing.T) {
	index := func(uri string) error {
		_, err := DecodeIndex([]byte(`{"corpus":"d","source":{"id":"s","revision":"r","uri":"` + uri + `"},"chunks":[{"id":"c","text":"x"}]}`))
		return err
	}
	ingestURI := func(uri string) error {
		_, err := DecodeIngest([]byte(`{"corpus":"d","document":{"type":"text","source":{"id":"s","revision":"r","uri":"` + uri + `"},"mediaType":"text/plain","text":"x"}}`))
		return err
	}
	for _, ok := range []string{`https://example.com/a`, `app://library/study-4`, `https://@host/x`, `https://example.com/\u00e9`} {
		if err := index(ok); err != nil {
			t.Errorf("index uri %s: %v", ok, err)
		}
		if err := ingestURI(ok); err != nil {
			t.Errorf("ingest uri %s: %v", ok, err)
		}
	}
	for _, bad := range []string{`https://name:secret@host/x`, `https://name@host/x`, `https://:pw@host/x`, `https://a b`, `https://a\u00a0b`, `https://a\u2003b`, `https://a\u2028b`, `https://a\u3000b`, `https://a\ufeffb`, `http://a`, `https://`} {
		if err := index(bad); protocol.CodeOf(err) != CodeInvalidRetrieval {
			t.Errorf("index uri %s: %v, want INVALID_RETRIEVAL", bad, err)
		}
		if err := ingestURI(bad); protocol.CodeOf(err) != CodeInvalidIngestion {
			t.Errorf("ingest uri %s: %v, want INVALID_INGESTION", bad, err)
		}
	}
}

// TestQueryTrim: "1..16384 characters after trim" is JavaScript's trim,
// over search bodies and the run option alike.
func TestQueryTrim(t *testing.T) {
	for _, c := range []struct {
		query string
		ok    bool
	}{
		{`x`, true}, {` \t x \n`, true}, {`\u0085`, true},
		{` `, false}, {`\ufeff`, false}, {`\u00a0\u2028\u3000`, false}, {`\u2003 \ufeff`, false},
	} {
		_, err := DecodeSearch([]byte(`{"corpus":"d","query":"` + c.query + `"}`))
		_, err2 := DecodeRunOption([]byte(`{"corpus":"d","query":"` + c.query + `"}`))
		for _, e := range []error{err, err2} {
			if c.ok && e != nil || !c.ok && protocol.CodeOf(e) != CodeInvalidRetrieval {
				t.Errorf("query %q: %v, want ok=%v", c.query, e, c.ok)
			}
		}
	}
}

// TestIndexManifest: an index body may carry the manifest an ingestion
// produced (§6.4), and it must describe the chunks exactly; it is read as
// strictly as the rest of the body — exact member names, no nulls, no
// missing counts, numbers as numbers, a lowercase digest.
func TestIndexManifest(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	manifest := `{"format":"text","inputSha256":"` + sum + `","inputBytes":5,"extractor":{"id":"plain-text","version":"1"},` +
		`"chunker":{"id":"source-lines-v1","maxBytes":2048},"extractedTextBytes":5,"indexedTextBytes":5,"chunks":1}`
	body := func(m string) []byte {
		return []byte(`{"corpus":"d","source":{"id":"s","revision":"r"},"chunks":[{"id":"c","text":"hello"}],"ingestion":` + m + `}`)
	}
	req, err := DecodeIndex(body(manifest))
	if err != nil || req.Ingestion == nil || req.Ingestion.Chunks != 1 || req.Ingestion.Extractor.ID != "plain-text" {
		t.Fatalf("a manifest describing the chunk: %+v %v", req, err)
	}
	pdf := strings.Replace(strings.Replace(manifest, `"format":"text"`, `"format":"pdf"`, 1), `"chunks":1}`, `"chunks":1,"pages":{"total":2,"ocr":[],"empty":[2]}}`, 1)
	if req, err := DecodeIndex(body(pdf)); err != nil || req.Ingestion.Pages == nil || len(req.Ingestion.Pages.Empty) != 1 {
		t.Errorf("a PDF manifest: %+v %v", req, err)
	}
	for name, m := range map[string]string{
		"a member name in another case": strings.Replace(manifest, `"chunks":1`, `"Chunks":1`, 1),
		"a null count":                  strings.Replace(manifest, `"extractedTextBytes":5`, `"extractedTextBytes":null`, 1),
		"a missing count":               strings.Replace(manifest, `"extractedTextBytes":5,`, ``, 1),
		"a quoted number":               strings.Replace(manifest, `"inputBytes":5`, `"inputBytes":"5"`, 1),
		"an upper-case digest":          strings.Replace(manifest, sum, strings.ToUpper(sum), 1),
		"an unknown member":             strings.Replace(manifest, `"chunks":1`, `"chunks":1,"extra":true`, 1),
		"an unknown extractor member":   strings.Replace(manifest, `"version":"1"`, `"version":"1","x":1`, 1),
		"another chunker":               strings.Replace(manifest, `source-lines-v1`, `words-v2`, 1),
		"a page number 0":               strings.Replace(pdf, `"empty":[2]`, `"empty":[0]`, 1),
		"pages without ocr":             strings.Replace(pdf, `"ocr":[],`, ``, 1),
		"two chunks for one":            strings.Replace(manifest, `"chunks":1`, `"chunks":2`, 1),
		"other indexed bytes":           strings.Replace(manifest, `"indexedTextBytes":5`, `"indexedTextBytes":4`, 1),
	} {
		if _, err := DecodeIndex(body(m)); protocol.CodeOf(err) != CodeInvalidRetrieval {
			t.Errorf("%s: %v, want INVALID_RETRIEVAL", name, err)
		}
	}
	// A chunk one byte over the manifest's chunker.maxBytes.
	over := strings.NewReplacer(`"maxBytes":2048`, `"maxBytes":128`, `"indexedTextBytes":5`, `"indexedTextBytes":129`).Replace(manifest)
	b := strings.Replace(string(body(over)), `"text":"hello"`, `"text":"`+strings.Repeat("x", 129)+`"`, 1)
	if _, err := DecodeIndex([]byte(b)); protocol.CodeOf(err) != CodeInvalidRetrieval {
		t.Errorf("a chunk over maxBytes: %v, want INVALID_RETRIEVAL", err)
	}
	if _, err := DecodeIndex([]byte(strings.Replace(b, strings.Repeat("x", 129), strings.Repeat("x", 128), 1))); err == nil {
		t.Errorf("a chunk of 128 bytes described as 129 was accepted")
	}
}
