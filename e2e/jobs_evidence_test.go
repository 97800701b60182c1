package e2e_test

import (
	"encoding/json"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestJobEvidenceReads: /v1/jobs/events of a job with references or
// retrieval re-authorizes its evidence on every page (wire-context §11.2,
// wire-extensions §2.4): readable while nothing changed, CONTEXT_CHANGED
// once the document has a new revision, CONTEXT_NOT_FOUND once deleted;
// status still answers.
func TestJobEvidenceReads(t *testing.T) {
	t.Parallel()
	s := retrievalSiteWith(t, "[jobs]\nenabled = true\nretention_ms = 3600000\nworkers = 2\npoll_interval_ms = 20\n",
		`jobs = ["submit", "read", "cancel"]`)
	srv := startServer(t, s)
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(rev string) {
		t.Helper()
		if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest",
			`{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"`+rev+`"},"mediaType":"text/plain","text":"The guide, `+rev+`."}}`); st != 200 {
			t.Fatalf("ingest: %d %s", st, b)
		}
	}
	ingest("g1")
	submit := func(key string, req *protocol.RunRequest) string {
		t.Helper()
		info, err := cl.SubmitJob(t.Context(), key, req)
		if err != nil {
			t.Fatalf("submit %s: %v", key, err)
		}
		if got := waitJob(t, cl, info.ID, (*client.JobInfo).Terminal); got.State != client.JobCompleted {
			t.Fatalf("%s: %s", key, got.State)
		}
		return info.ID
	}
	ref := submit("ref", &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "echo:sources",
		Attachments: json.RawMessage(`[{"type":"reference","id":"guide","revision":"g1","mediaType":"text/plain"}]`)})
	ret := submit("ret", &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "guide",
		Retrieval: json.RawMessage(`{"corpus":"docs","sourceIds":["guide"]}`)})
	for _, id := range []string{ref, ret} {
		if page, err := cl.JobEvents(t.Context(), id, 0, 0); err != nil || len(page.Events) == 0 {
			t.Errorf("events of %s: %v", id, err)
		}
	}
	ingest("g2")
	for _, id := range []string{ref, ret} {
		if _, err := cl.JobEvents(t.Context(), id, 0, 0); client.CodeOf(err) != "CONTEXT_CHANGED" {
			t.Errorf("events of %s after a new revision: %v", id, err)
		}
		if _, err := cl.ReadJob(t.Context(), id); err != nil {
			t.Errorf("status of %s: %v", id, err)
		}
	}
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/delete", `{"corpus":"docs","sourceId":"guide","revision":"g2"}`); st != 200 {
		t.Fatalf("delete: %d %s", st, b)
	}
	for _, id := range []string{ref, ret} {
		if _, err := cl.JobEvents(t.Context(), id, 0, 0); client.CodeOf(err) != "CONTEXT_NOT_FOUND" {
			t.Errorf("events of %s after a delete: %v", id, err)
		}
	}
}
