package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// retrievalSite is the dev site with the local-hashing embedder and a
// docs corpus the dev token may search, index and delete.
func retrievalSite(t *testing.T, model string, dims int) *site {
	t.Helper()
	s := newSite(t)
	lh := copyPlugin(t, s.dir, "local-hashing", "1.0.0")
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`
[tokens.grants]
%s

%s`, retrievalGrants, docsCorpus(lh, model, dims))
	if err := os.WriteFile(s.config, append(doc, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// docsCorpus is the host.toml tables of a docs corpus on the local-hashing
// plugin lh (copied into the site) with model and dims.
func docsCorpus(lh plugin, model string, dims int) string {
	return fmt.Sprintf(`
[[extensions]]
id = "local-hashing"
version = "1.0.0"
module = %q
sha256 = %q

[[retrieval.embedders]]
id = "local-hashing"
extension = "local-hashing@1.0.0"
account_id = "local"

[retrieval.corpora.docs]
embedder = "local-hashing"
model = %q
dimensions = %d
version = "docs-v1"
`, filepath.Base(lh.path), lh.digest, model, dims)
}

// retrievalGrants is the dev token's retrieval grant in retrievalSite.
const retrievalGrants = `retrieval = { search = ["docs"], index = ["docs"], delete = ["docs"] }`

// retrievalSiteWith is retrievalSite with table put first in host.toml
// and grants added to the dev token's (either may be empty).
func retrievalSiteWith(t *testing.T, table, grants string) *site {
	t.Helper()
	s := retrievalSite(t, "hash-ngram-256", 256)
	if table != "" {
		editSiteConfig(t, s, "version = 1\n", "version = 1\n\n"+table)
	}
	if grants != "" {
		editSiteConfig(t, s, retrievalGrants, retrievalGrants+"\n"+grants)
	}
	return s
}

// subjectScopedSite is retrievalSite with scope = "subject" on docs (a
// source is visible to the subject that indexed it) and a second token,
// of subject other-user, that may search and index docs as well; it
// returns the site and that token.
func subjectScopedSite(t *testing.T) (*site, string) {
	t.Helper()
	s := retrievalSite(t, "hash-ngram-256", 256)
	editSiteConfig(t, s, `version = "docs-v1"`, "version = \"docs-v1\"\nscope = \"subject\"")
	other := addSiteToken(t, s, "other", "other-user", []string{"fixture"}, nil)
	appendSiteConfig(t, s, "[tokens.grants]\nretrieval = { search = [\"docs\"], index = [\"docs\"] }\n")
	return s, other
}

// protocolBody is the GET /v1/protocol answer for token.
func protocolBody(t *testing.T, srv *server, token string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/protocol", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// ingestText ingests a text/plain document over HTTP; a refusal fails the
// test.
func ingestText(t *testing.T, srv *server, token, id, rev, text string) {
	t.Helper()
	tb, _ := json.Marshal(text)
	if st, body := retrievalPost(t, srv, token, "/v1/retrieval/ingest",
		`{"corpus":"docs","document":{"type":"text","source":{"id":"`+id+`","revision":"`+rev+`"},"mediaType":"text/plain","text":`+string(tb)+`}}`); st != 200 {
		t.Fatalf("ingest %s@%s: %d %s", id, rev, st, body)
	}
}

func retrievalPost(t *testing.T, srv *server, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRetrievalEndToEnd: the real binary with the local-hashing wasm
// embedder and Badger: the features, adhost ingest of Markdown and text,
// an email thread over HTTP, search with provenance, the same answers
// after a restart (the matrix is rebuilt from the store), and a start
// with another embedding model refused as INDEX_INCOMPATIBLE.
func TestRetrievalEndToEnd(t *testing.T) {
	s := retrievalSite(t, "hash-ngram-256", 256)
	srv := startServer(t, s)
	b := protocolBody(t, srv, s.token)
	if !strings.Contains(b, `"scoped-retrieval","retrieval-indexing","document-ingestion"`) {
		t.Errorf("features: %s", b)
	}
	md := filepath.Join(s.dir, "guide.md")
	os.WriteFile(md, []byte("# Battery\nThe cell lasted 812 hours.\n\n# Charging\nTwo hours at room temperature.\n"), 0o600)
	txt := filepath.Join(s.dir, "notes.txt")
	os.WriteFile(txt, []byte("Line one about revenue.\nLine two about Europe.\n"), 0o600)
	tok := filepath.Join(s.dir, "data", "dev.token")
	code, stdout, stderr := adhost(t, "ingest", "--config", s.config, "--url", srv.URL, "--token-file", tok, "--corpus", "docs", md, txt)
	if code != 0 || strings.Count(stdout, `"status":"indexed"`) != 2 {
		t.Fatalf("adhost ingest: %d %s %s", code, stdout, stderr)
	}
	st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", `{"corpus":"docs","document":{"type":"email","source":{"id":"mail","revision":"r1"},"threadId":"th-1","messages":[{"id":"m-1","text":"Did the battery pass?"},{"id":"m-2","text":"Yes, 812 hours."}]}}`)
	if st != 200 {
		t.Fatalf("ingest email: %d %s", st, body)
	}
	search := func() []map[string]any {
		st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery 812 hours","limit":16}`)
		var r struct{ Hits []map[string]any }
		if st != 200 || json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("search: %d %s", st, body)
		}
		return r.Hits
	}
	before := search()
	prov := map[string]bool{}
	for _, h := range before {
		src := h["source"].(map[string]any)
		loc := src["location"].(map[string]any)
		if src["revision"] == nil || loc["startLine"] == nil || loc["endLine"] == nil || loc["documentId"] != src["id"] {
			t.Errorf("hit without provenance: %v", h)
		}
		key := fmt.Sprint(src["id"], "/", loc["section"], loc["messageId"])
		prov[key] = true
	}
	for _, want := range []string{"guide.md/Battery<nil>", "guide.md/Charging<nil>", "mail/<nil>m-1", "mail/<nil>m-2", "notes.txt/<nil> <nil>"} {
		if !prov[want] {
			t.Errorf("no hit from %s in %v", want, prov)
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	srv = startServer(t, s)
	after := search()
	a, _ := json.Marshal(before)
	c, _ := json.Marshal(after)
	if string(a) != string(c) {
		t.Errorf("after a restart:\n%s\nbefore:\n%s", c, a)
	}
	srv.stop(t, syscall.SIGTERM)

	// Another model under the same corpus: refused before anything is embedded.
	cfg, _ := os.ReadFile(s.config)
	cfg = []byte(strings.NewReplacer(`model = "hash-ngram-256"`, `model = "hash-ngram-128"`, `dimensions = 256`, `dimensions = 128`).Replace(string(cfg)))
	os.WriteFile(s.config, cfg, 0o644)
	code, _, stderr = adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "INDEX_INCOMPATIBLE") {
		t.Errorf("serve with another model: %d %s", code, stderr)
	}
}

// TestRetrievalRunEndToEnd: runs with the `retrieval` option over HTTP
// against the real binary, the local-hashing embedder and the fixture
// provider. The fixture echoes what it was given of every passage; each
// must match a hit of result.retrieval and its result.sources entry —
// chunk id, the document's revision and id, its lines or message, and the
// SHA-256 of exactly the passage text, computed here. Then the stream's
// context phase, and the refusals a client sees: the attachment budget,
// the corpus grant, another subject's source under subject scope (the same
// answer as a missing one), no evidence.
func TestRetrievalRunEndToEnd(t *testing.T) {
	t.Parallel()
	s, other := subjectScopedSite(t)
	srv := startServer(t, s)
	guide := "# Battery\nThe cell lasted 812 hours.\nIt was kept at 20 C.\n\n# Charging\nTwo hours at room temperature.\n"
	gb, _ := json.Marshal(guide)
	for _, body := range []string{
		`{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"g1","title":"Guide"},"mediaType":"text/markdown","text":` + string(gb) + `}}`,
		`{"corpus":"docs","document":{"type":"email","source":{"id":"mail","revision":"m1"},"threadId":"th-1","messages":[{"id":"m-1","text":"Did the battery pass?"},{"id":"m-2","text":"Yes, the battery lasted 812 hours."}]}}`,
	} {
		if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", body); st != 200 {
			t.Fatalf("ingest: %d %s", st, b)
		}
	}
	run := func(token, option, attachments string) (int, map[string]any) {
		body := `{"provider":"fixture","model":"fixture-model","input":"echo:evidence battery 812 hours","retrieval":` + option + attachments + `}`
		return postRun(t, srv, token, body)
	}
	st, ans := run(s.token, `{"corpus":"docs","limit":4}`, "")
	if st != 200 {
		t.Fatalf("run: %d %v", st, ans)
	}
	var res struct {
		Text      string
		Retrieval struct {
			Corpus string
			Hits   []struct {
				ChunkID string
				Text    string
				Source  struct {
					ID, Revision string
					Location     map[string]any
				}
				DocumentSha256 string
			}
		}
		Sources []struct {
			ID, Revision, Sha256, Origin, MediaType string
			Bytes                                   int
			Location                                map[string]any
		}
	}
	raw, _ := json.Marshal(ans)
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	hits := res.Retrieval.Hits
	if res.Retrieval.Corpus != "docs" || len(hits) == 0 || len(hits) > 4 || len(res.Sources) != len(hits) {
		t.Fatalf("result %s", raw)
	}
	seen := map[string]bool{}
	lines := strings.Split(res.Text, "\n")
	if len(lines) != len(hits)+1 || lines[len(lines)-1] != "directive: yes" {
		t.Fatalf("the model saw %q for %d hits", res.Text, len(hits))
	}
	for i, h := range hits {
		loc, src := h.Source.Location, res.Sources[i]
		sum := sha256.Sum256([]byte(h.Text))
		digest := hex.EncodeToString(sum[:])
		doc, _ := loc["documentId"].(string)
		if doc != h.Source.ID || loc["startLine"] == nil || loc["endLine"] == nil || len(h.DocumentSha256) != 64 {
			t.Errorf("hit %d without provenance: %+v", i, h)
		}
		wantRev := map[string]string{"guide": "g1", "mail": "m1"}[doc]
		if h.Source.Revision != wantRev {
			t.Errorf("hit %d revision %q, want %q", i, h.Source.Revision, wantRev)
		}
		if doc == "guide" && loc["section"] == nil || doc == "mail" && (loc["threadId"] != "th-1" || loc["messageId"] == nil) {
			t.Errorf("hit %d location %v", i, loc)
		}
		if !strings.Contains(guide, h.Text) && !strings.Contains(h.Text, "battery") {
			t.Errorf("hit %d text %q is no passage of the documents", i, h.Text)
		}
		if src.ID != h.ChunkID || src.Revision != wantRev || src.Origin != "retrieval" || src.MediaType != "text/plain" ||
			src.Bytes != len(h.Text) || src.Sha256 != digest || src.Location["documentId"] != doc {
			t.Errorf("source %d %+v for hit %+v", i, src, h)
		}
		want := fmt.Sprintf("%s rev=%s doc=%s page=0 lines=%v-%v sha256=%s", h.ChunkID, wantRev, doc, loc["startLine"], loc["endLine"], digest)
		if lines[i] != want {
			t.Errorf("the model saw %q, want %q", lines[i], want)
		}
		seen[doc] = true
	}
	if !seen["guide"] || !seen["mail"] {
		t.Errorf("hits from %v", seen)
	}

	// The stream: run.progress phase context after run.started, before
	// the first step.
	h := http.Header{"Authorization": {"Bearer " + s.token}, "Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	_, body := callRaw(t, http.MethodPost, srv.URL+"/v1/runs", h, `{"provider":"fixture","model":"fixture-model","input":"battery","retrieval":{"corpus":"docs","sourceIds":["guide"]}}`)
	b := string(body)
	if i, j, k := strings.Index(b, "event: run.started"), strings.Index(b, `"phase":"context"`), strings.Index(b, "event: step.started"); i < 0 || j < i || k < j || !strings.Contains(b, "event: run.completed") {
		t.Errorf("stream %s", b)
	}

	// The Go client checks the real answer as it checks the fixtures':
	// result.retrieval against the option, a source entry per passage with
	// the passage's digest, both as JSON and as a stream.
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	creq := &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "battery 812 hours",
		Retrieval: json.RawMessage(`{"corpus":"docs","limit":3,"sourceIds":["guide","mail"]}`)}
	if res, err := cl.Run(t.Context(), creq); err != nil || len(res.Retrieval) == 0 || len(res.Sources) == 0 {
		t.Errorf("client.Run: %v %+v", err, res)
	}
	sawContext := false
	if _, err := cl.Stream(t.Context(), creq, func(ev client.Event) error {
		sawContext = sawContext || (ev.Type == "run.progress" && ev.Phase == "context")
		return nil
	}); err != nil || !sawContext {
		t.Errorf("client.Stream: %v, context progress %v", err, sawContext)
	}

	// Attachments and passages together: the context list is the
	// attachments as sent, then the hits in rank order — what the model
	// was given, result.sources and the artifact's sourceIds all agree.
	st, ans = run(s.token, `{"corpus":"docs","limit":2}`, `,"attachments":[`+textItem("brief", "Summarise the battery results.")+`],"outputArtifact":{"name":"review.md","mediaType":"text/markdown"}`)
	if st != 200 {
		t.Fatalf("run with an attachment: %d %v", st, ans)
	}
	raw, _ = json.Marshal(ans)
	var mixed struct {
		Text      string
		Retrieval struct{ Hits []struct{ ChunkID string } }
		Sources   []struct{ ID, Origin string }
		Artifacts []struct {
			SourceIDs []string
			Content   string
			Sha256    string
		}
	}
	if err := json.Unmarshal(raw, &mixed); err != nil {
		t.Fatal(err)
	}
	want := []string{"brief"}
	for _, h := range mixed.Retrieval.Hits {
		want = append(want, h.ChunkID)
	}
	var got, origins []string
	for _, src := range mixed.Sources {
		got, origins = append(got, src.ID), append(origins, src.Origin)
	}
	if len(want) != 3 || fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(origins) != "[inline retrieval retrieval]" ||
		len(mixed.Artifacts) != 1 || fmt.Sprint(mixed.Artifacts[0].SourceIDs) != fmt.Sprint(want) ||
		mixed.Artifacts[0].Content != mixed.Text || mixed.Artifacts[0].Sha256 != sha([]byte(mixed.Text)) {
		t.Errorf("attachments then passages: want %v, got %s", want, raw)
	}
	if first := strings.SplitN(mixed.Text, "\n", 2)[0]; !strings.HasPrefix(first, "brief rev=r1 ") {
		t.Errorf("the model saw %q first, want the attachment", first)
	}

	items := make([]string, 9)
	for i := range items {
		items[i] = textItem(fmt.Sprint("a", i), "x")
	}
	for _, tc := range []struct {
		name, token, option, attachments string
		status                           int
		code                             string
	}{
		{"9 attachments + 8", s.token, `{"corpus":"docs"}`, `,"attachments":[` + strings.Join(items, ",") + `]`, 400, "INVALID_RETRIEVAL"},
		{"8 attachments + 8", s.token, `{"corpus":"docs","query":"battery"}`, `,"attachments":[` + strings.Join(items[:8], ",") + `]`, 200, ""},
		{"schema", s.token, `{"corpus":"docs","limit":0}`, "", 400, "INVALID_RETRIEVAL"},
		{"no grant", s.token, `{"corpus":"elsewhere"}`, "", 403, "FORBIDDEN"},
		{"another subject's source", other, `{"corpus":"docs","sourceIds":["guide"]}`, "", 502, "CONTEXT_NOT_FOUND"},
		{"a missing source", other, `{"corpus":"docs","sourceIds":["absent"]}`, "", 502, "CONTEXT_NOT_FOUND"},
		{"nothing visible", other, `{"corpus":"docs"}`, "", 400, "NO_RETRIEVAL_EVIDENCE"},
		{"no evidence", s.token, `{"corpus":"docs","minScore":1}`, "", 400, "NO_RETRIEVAL_EVIDENCE"},
	} {
		if st, ans := run(tc.token, tc.option, tc.attachments); st != tc.status || errCode(ans) != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, st, ans, tc.status, tc.code)
		}
	}
}

// TestRetrievalChangedMidRun: the evidence is re-authorized before every
// model step, over HTTP. The fixture calls an application tool, and while
// the run waits for its result the test — as the application — replaces
// the cited document with a new revision, then answers: the next step
// never starts, the run fails CONTEXT_CHANGED. Deleting it instead fails
// the run CONTEXT_NOT_FOUND.
func TestRetrievalChangedMidRun(t *testing.T) {
	t.Parallel()
	s := retrievalSiteWith(t, "[application_tools]\nenabled = true\nrequire_approval = false\n",
		`application_tools = [{ name = "lookup_ticket", requires_approval = false }]`)
	srv := startServer(t, s)
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(rev string) {
		ingestText(t, srv, s.token, "guide", rev, "Ticket T-1 is about the battery ("+rev+").")
	}
	for _, tc := range []struct {
		name   string
		change func()
		code   protocol.Code
	}{
		{"nothing changes", func() {}, ""},
		{"a new revision", func() { ingest("r2") }, "CONTEXT_CHANGED"},
		{"deleted", func() {
			if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"guide","revision":"r1"}`); st != 200 {
				t.Fatalf("delete: %d %s", st, b)
			}
		}, "CONTEXT_NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ingest("r1")
			req := &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: `tool:lookup_ticket:{"id":"T-1"}`,
				Tools:            []string{"lookup_ticket"},
				ApplicationTools: json.RawMessage(`[{"name":"lookup_ticket","description":"Looks a ticket up.","inputSchema":{"type":"object"}}]`),
				Retrieval:        json.RawMessage(`{"corpus":"docs","query":"ticket battery","sourceIds":["guide"]}`)}
			steps := 0
			_, err := cl.Stream(t.Context(), req, func(ev client.Event) error {
				if ev.Type == "step.started" {
					steps++
				}
				if ev.Execution == nil {
					return nil
				}
				tc.change()
				return cl.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"status":"open"}`))
			})
			if got := client.CodeOf(err); got != tc.code || (tc.code != "" && steps != 1) || (tc.code == "" && steps != 2) {
				t.Errorf("%d steps, %v; want %q", steps, err, tc.code)
			}
		})
	}
}
