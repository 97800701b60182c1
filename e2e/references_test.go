package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
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
	t.Parallel()
	s, other := subjectScopedSite(t)
	srv := startServer(t, s)

	if b := protocolBody(t, srv, s.token); !strings.Contains(b, `"draft-artifacts","context-references","scoped-retrieval"`) {
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

// TestEvidenceReplay: an idempotent replay of a run with references or
// retrieval re-authorizes its evidence for the caller before anything is
// replayed (wire-context §11.3, wire-extensions §6.3): the same answer
// while nothing changed; CONTEXT_CHANGED once the document has a new
// revision, CONTEXT_NOT_FOUND once it is deleted — as HTTP errors in both
// modes; a keyed retrieval run that recorded no evidence is
// CONTEXT_REPLAY_UNAVAILABLE with outcome uncertain.
func TestEvidenceReplay(t *testing.T) {
	t.Parallel()
	s := retrievalSite(t, "hash-ngram-256", 256)
	appendSiteConfig(t, s, "[idempotency]\nenabled = true\n")
	srv := startServer(t, s)
	ingest := func(id, rev, text string) { t.Helper(); ingestText(t, srv, s.token, id, rev, text) }
	ingest("guide", "g1", "The cell lasted 812 hours.\n")
	ingest("notes", "n1", "Charging takes two hours.\n")
	refRun := `{"provider":"fixture","model":"fixture-model","input":"echo:sources","idempotencyKey":"k-ref",` +
		`"attachments":[{"type":"reference","id":"guide","revision":"g1","mediaType":"text/plain"}]}`
	retRun := `{"provider":"fixture","model":"fixture-model","input":"echo:sources charging","idempotencyKey":"k-ret","retrieval":{"corpus":"docs","sourceIds":["notes"]}}`
	emptyRun := `{"provider":"fixture","model":"fixture-model","input":"x","idempotencyKey":"k-none","retrieval":{"corpus":"docs","minScore":1}}`
	first := map[string]map[string]any{}
	for key, body := range map[string]string{"ref": refRun, "ret": retRun} {
		st, ans := postRun(t, srv, s.token, body)
		if st != 200 {
			t.Fatalf("%s: %d %v", key, st, ans)
		}
		first[key] = ans
		st, again := postRun(t, srv, s.token, body)
		a, _ := json.Marshal(ans)
		b, _ := json.Marshal(again)
		if st != 200 || string(a) != string(b) {
			t.Errorf("%s replay: %d %s, want %s", key, st, b, a)
		}
	}
	if st, ans := postRun(t, srv, s.token, emptyRun); st != 400 || errCode(ans) != "NO_RETRIEVAL_EVIDENCE" {
		t.Fatalf("empty run: %d %v", st, ans)
	}
	if st, ans := postRun(t, srv, s.token, emptyRun); st != 502 || errCode(ans) != "CONTEXT_REPLAY_UNAVAILABLE" || ans["error"].(map[string]any)["outcome"] != "uncertain" {
		t.Errorf("replay without a snapshot: %d %v", st, ans)
	}

	sse := http.Header{"Authorization": {"Bearer " + s.token}, "Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	check := func(what, body, code string) {
		t.Helper()
		if st, ans := postRun(t, srv, s.token, body); st != 502 || errCode(ans) != code {
			t.Errorf("%s, JSON: %d %v, want 502 %s", what, st, ans, code)
		}
		resp, b := callRaw(t, http.MethodPost, srv.URL+"/v1/runs", sse, body)
		if resp.StatusCode != 502 || !strings.Contains(string(b), `"code":"`+code+`"`) || strings.Contains(string(b), "event:") {
			t.Errorf("%s, SSE: %d %s, want an HTTP error %s", what, resp.StatusCode, b, code)
		}
	}
	ingest("guide", "g2", "The cell lasted 900 hours.\n")
	ingest("notes", "n2", "Charging takes three hours.\n")
	check("a reference after a new revision", refRun, "CONTEXT_CHANGED")
	check("retrieval after a new revision", retRun, "CONTEXT_CHANGED")
	for _, d := range []string{`{"corpus":"docs","sourceId":"guide","revision":"g2"}`, `{"corpus":"docs","sourceId":"notes","revision":"n2"}`} {
		if st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/delete", d); st != 200 {
			t.Fatalf("delete: %d %s", st, body)
		}
	}
	check("a reference after a delete", refRun, "CONTEXT_NOT_FOUND")
	check("retrieval after a delete", retRun, "CONTEXT_NOT_FOUND")
}

// TestJobReferences: a durable job's references are resolved when the job
// runs, for its stored subject, not when it is submitted (wire-context
// §11.2): submission validates without the resolver, so a job naming a
// revision the store does not hold is accepted and then fails; one naming
// the stored revision completes with the document's digest in its
// result.sources.
func TestJobReferences(t *testing.T) {
	t.Parallel()
	s := retrievalSiteWith(t, "[jobs]\nenabled = true\nretention_ms = 3600000\nworkers = 2\npoll_interval_ms = 20\n",
		`jobs = ["submit", "read", "cancel"]`)
	srv := startServer(t, s)
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	text := "Jobs read the guide when they run.\n"
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest",
		`{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"g1"},"mediaType":"text/plain","text":"Jobs read the guide when they run.\n"}}`); st != 200 {
		t.Fatalf("ingest: %d %s", st, b)
	}
	job := func(key, rev string) *client.JobInfo {
		t.Helper()
		info, err := cl.SubmitJob(t.Context(), key, &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "echo:sources",
			Attachments: json.RawMessage(`[{"type":"reference","id":"guide","revision":"` + rev + `","mediaType":"text/plain"}]`)})
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		return waitJob(t, cl, info.ID, (*client.JobInfo).Terminal)
	}
	if info := job("stale", "g0"); info.State != client.JobFailed {
		t.Errorf("a job naming another revision: %s, want failed", info.State)
	}
	info := job("current", "g1")
	if info.State != client.JobCompleted {
		t.Fatalf("a job naming the stored revision: %s", info.State)
	}
	page, err := cl.JobEvents(t.Context(), info.ID, 0, 0)
	if err != nil || len(page.Events) == 0 {
		t.Fatalf("events: %v %+v", err, page)
	}
	last := page.Events[len(page.Events)-1]
	sum := sha256.Sum256([]byte(text))
	if last.Result == nil || !strings.Contains(string(last.Result.Sources), `"id":"guide","revision":"g1"`) ||
		!strings.Contains(string(last.Result.Sources), hex.EncodeToString(sum[:])) || last.Result.Text != "sources: guide; files: " {
		t.Errorf("the job's result: %+v", last.Result)
	}
}

// TestSessionContextRefused: a session turn carries no selected context
// (wire-context §11.1): a reference or the retrieval option with `session`
// is SESSION_CONTEXT_UNSUPPORTED (400) before any model work, and the
// session is still at its revision; `attachments: []` is no context.
func TestSessionContextRefused(t *testing.T) {
	t.Parallel()
	s := retrievalSiteWith(t, "[sessions]\nenabled = true\nretention_ms = 3600000\n", `sessions = ["create", "read", "continue", "delete"]`)
	srv := startServer(t, s)
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := cl.CreateSession(t.Context(), &client.SessionCreate{Provider: "fixture", Model: "fixture-model", Mode: client.SessionModeNative})
	if err != nil {
		t.Fatal(err)
	}
	ref := string(client.SessionRef(snap.Session.ID, 0))
	for _, extra := range []string{
		`"attachments":[{"type":"reference","id":"guide","revision":"g1","mediaType":"text/plain"}]`,
		`"retrieval":{"corpus":"docs"}`,
	} {
		if st, ans := postRun(t, srv, s.token, `{"provider":"fixture","model":"fixture-model","input":"hi","session":`+ref+`,`+extra+`}`); st != 400 || errCode(ans) != "SESSION_CONTEXT_UNSUPPORTED" {
			t.Errorf("%s: %d %v", extra, st, ans)
		}
	}
	if st, ans := postRun(t, srv, s.token, `{"provider":"fixture","model":"fixture-model","input":"hi","session":`+ref+`,"attachments":[]}`); st != 200 {
		t.Errorf("attachments []: %d %v", st, ans)
	}
}
