package retrieval

import (
	"encoding/json"
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
