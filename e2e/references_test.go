package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReferencesEndToEnd: context-references resolve against the
// documents retrieval ingestion stores (README "References"). A
// reference to an ingested source at its revision reaches the model and
// appears in result.sources with the SHA-256 of exactly the text that was
// ingested, computed here (the receipt's inputSha256 too); a revision or
// media type other than the stored one is CONTEXT_CHANGED; another
// subject's source (scope = "subject"), a deleted one and an unknown one
// are all CONTEXT_NOT_FOUND, the same answer.
func TestReferencesEndToEnd(t *testing.T) {
	s := retrievalSite(t, "hash-ngram-256", 256)
	editSiteConfig(t, s, `version = "docs-v1"`, "version = \"docs-v1\"\nscope = \"subject\"")
	other := addSiteToken(t, s, "other", "other-user", []string{"fixture"}, nil)
	appendSiteConfig(t, s, "[tokens.grants]\nretrieval = { search = [\"docs\"], index = [\"docs\"] }\n")
	srv := startServer(t, s)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"draft-artifacts","context-references","scoped-retrieval"`) {
		t.Errorf("features: %s", b)
	}

	// CRLF line ends: the reference gives back the text as it was sent,
	// not the normalised text the chunks were cut from.
	guide := "# Guide\r\nKeep the cell at 20 C.\r\n\r\n## Charging\r\nTwo hours.\r\n"
	ingest := func(token, id, rev, text string) map[string]any {
		t.Helper()
		tb, _ := json.Marshal(text)
		st, body := retrievalPost(t, srv, token, "/v1/retrieval/ingest",
			`{"corpus":"docs","document":{"type":"text","source":{"id":"`+id+`","revision":"`+rev+`","title":"The guide"},"mediaType":"text/markdown","text":`+string(tb)+`}}`)
		var out map[string]any
		if st != 200 || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("ingest %s@%s: %d %s", id, rev, st, body)
		}
		return out
	}
	receipt := ingest(s.token, "guide", "g1", guide)
	ingest(other, "private", "p1", "Only the other user may read this.")
	if st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest",
		`{"corpus":"docs","document":{"type":"email","source":{"id":"mail","revision":"m1"},"threadId":"th","messages":[{"id":"a","text":"First."},{"id":"b","text":"Second."}]}}`); st != 200 {
		t.Fatalf("ingest email: %d %s", st, body)
	}
	sum := sha256.Sum256([]byte(guide))
	digest := hex.EncodeToString(sum[:])
	if receipt["ingestion"].(map[string]any)["inputSha256"] != digest {
		t.Fatalf("receipt %v, want inputSha256 %s", receipt, digest)
	}

	ref := func(token, id, rev, media string) (int, map[string]any) {
		return postRun(t, srv, token, `{"provider":"fixture","model":"fixture-model","input":"echo:evidence",`+
			`"attachments":[{"type":"reference","id":"`+id+`","revision":"`+rev+`","mediaType":"`+media+`"}]}`)
	}
	st, ans := ref(s.token, "guide", "g1", "text/markdown")
	if st != 200 {
		t.Fatalf("reference: %d %v", st, ans)
	}
	srcs, _ := ans["sources"].([]any)
	if len(srcs) != 1 {
		t.Fatalf("sources %v", ans)
	}
	got := srcs[0].(map[string]any)
	if got["id"] != "guide" || got["revision"] != "g1" || got["origin"] != "reference" || got["mediaType"] != "text/markdown" ||
		got["title"] != "The guide" || got["bytes"] != float64(len(guide)) || got["sha256"] != digest {
		t.Errorf("source %v, want %d bytes with sha256 %s", got, len(guide), digest)
	}
	if text, _ := ans["text"].(string); !strings.HasPrefix(text, "guide rev=g1 ") || !strings.Contains(text, "sha256="+digest) || !strings.HasSuffix(text, "directive: yes") {
		t.Errorf("the model saw %q", text)
	}
	// An email thread has no original text here: its passages, in order.
	st, ans = ref(s.token, "mail", "m1", "text/plain")
	mail := "First.\n\nSecond."
	msum := sha256.Sum256([]byte(mail))
	if srcs, _ := ans["sources"].([]any); st != 200 || len(srcs) != 1 || srcs[0].(map[string]any)["sha256"] != hex.EncodeToString(msum[:]) {
		t.Errorf("email reference: %d %v", st, ans)
	}

	for _, tc := range []struct {
		name, token, id, rev, media, code string
	}{
		{"another revision", s.token, "guide", "g0", "text/markdown", "CONTEXT_CHANGED"},
		{"another media type", s.token, "guide", "g1", "text/plain", "CONTEXT_CHANGED"},
		{"another subject's source", s.token, "private", "p1", "text/markdown", "CONTEXT_NOT_FOUND"},
		{"an unknown source", s.token, "nothing", "n1", "text/markdown", "CONTEXT_NOT_FOUND"},
		{"another subject's view", other, "guide", "g1", "text/markdown", "CONTEXT_NOT_FOUND"},
	} {
		if st, ans := ref(tc.token, tc.id, tc.rev, tc.media); st != 502 || errCode(ans) != tc.code {
			t.Errorf("%s: %d %v, want 502 %s", tc.name, st, ans, tc.code)
		}
	}
	// A new revision replaces the old one: the old reference has changed.
	ingest(s.token, "guide", "g2", guide+"More.\r\n")
	if st, ans := ref(s.token, "guide", "g1", "text/markdown"); st != 502 || errCode(ans) != "CONTEXT_CHANGED" {
		t.Errorf("the replaced revision: %d %v", st, ans)
	}
	if st, ans := ref(s.token, "guide", "g2", "text/markdown"); st != 200 {
		t.Errorf("the new revision: %d %v", st, ans)
	}
	// Deleted: not found, like a source that never was.
	if st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"guide","revision":"g2"}`); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, ans := ref(s.token, "guide", "g2", "text/markdown"); st != 502 || errCode(ans) != "CONTEXT_NOT_FOUND" {
		t.Errorf("deleted: %d %v", st, ans)
	}
}
