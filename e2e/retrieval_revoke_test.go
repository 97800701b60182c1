package e2e_test

import (
	"encoding/json"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestRetrievalGrantRevoked: the token layer of the retrieval authorizer is
// configuration, so revoking means a reload that takes the corpus out of
// the token's search grant. From then on the evidence it gave is no longer
// the caller's to see: a run in flight fails before its next model step,
// an idempotent replay of a completed run and a plain search are FORBIDDEN,
// while the index grant left in place still ingests. Restoring the grant
// restores the replay, verbatim (the evidence itself never changed).
func TestRetrievalGrantRevoked(t *testing.T) {
	t.Parallel()
	s := retrievalSiteWith(t, "[idempotency]\nenabled = true\n\n[application_tools]\nenabled = true\nrequire_approval = false\n",
		`application_tools = [{ name = "lookup_ticket", requires_approval = false }]`)
	srv := startServer(t, s)
	cl, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ingestText(t, srv, s.token, "guide", "r1", "Ticket T-1 is about the battery.\n")
	keyed := `{"provider":"fixture","model":"fixture-model","input":"echo:sources ticket","idempotencyKey":"k-revoke","retrieval":{"corpus":"docs","sourceIds":["guide"]}}`
	st, first := postRun(t, srv, s.token, keyed)
	if st != 200 {
		t.Fatalf("keyed run: %d %v", st, first)
	}

	const revoked = `retrieval = { index = ["docs"], delete = ["docs"] }`
	reload := func(from, to string) {
		t.Helper()
		editSiteConfig(t, s, from, to)
		if code, out, errOut := adhost(t, "reload", "--config", s.config); code != 0 {
			t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
		}
	}

	// In flight: the grant goes while the run waits for its tool result.
	req := &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: `tool:lookup_ticket:{"id":"T-1"}`,
		Tools:            []string{"lookup_ticket"},
		ApplicationTools: json.RawMessage(`[{"name":"lookup_ticket","description":"Looks a ticket up.","inputSchema":{"type":"object"}}]`),
		Retrieval:        json.RawMessage(`{"corpus":"docs","query":"ticket battery","sourceIds":["guide"]}`)}
	steps := 0
	_, err = cl.Stream(t.Context(), req, func(ev client.Event) error {
		if ev.Type == "step.started" {
			steps++
		}
		if ev.Execution == nil {
			return nil
		}
		reload(retrievalGrants, revoked)
		return cl.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"status":"open"}`))
	})
	if code := client.CodeOf(err); code != protocol.CodeForbidden || steps != 1 {
		t.Errorf("the run in flight: %d steps, %v; want FORBIDDEN after one step", steps, err)
	}

	if st, ans := postRun(t, srv, s.token, keyed); st != 403 || errCode(ans) != "FORBIDDEN" {
		t.Errorf("replay after the revocation: %d %v, want 403 FORBIDDEN", st, ans)
	}
	if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery"}`); st != 403 {
		t.Errorf("search after the revocation: %d %s", st, b)
	}
	ingestText(t, srv, s.token, "notes", "n1", "The index grant is still there.\n")

	reload(revoked, retrievalGrants)
	st, again := postRun(t, srv, s.token, keyed)
	if st != 200 || mustJSON(t, again) != mustJSON(t, first) {
		t.Errorf("replay with the grant back: %d %v, want %v", st, again, first)
	}
}
