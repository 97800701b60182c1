package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// TestSessionCalls: each session call posts its JSON body to its path and
// returns what a well-formed answer says.
func TestSessionCalls(t *testing.T) {
	const id = "12345678-1234-4234-8234-123456789abc"
	info := `{"id":"` + id + `","revision":0,"provider":"p","model":"m","mode":"native","state":"ready",` +
		`"createdAt":"2026-09-21T00:00:00.000Z","updatedAt":"2026-09-21T00:00:00.000Z","expiresAt":"2026-09-21T01:00:00.000Z"}`
	var paths, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		paths, bodies = append(paths, r.Method+" "+r.URL.Path), append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/sessions/delete":
			io.WriteString(w, `{"id":"`+id+`","deleted":true}`)
		default:
			io.WriteString(w, `{"session":`+info+`,"history":[{"role":"user","content":"hi"}],"instructions":"be brief"}`)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	in := "be brief"
	s, err := c.CreateSession(t.Context(), &client.SessionCreate{Provider: "p", Model: "m", Mode: "native",
		History: []protocol.HistoryItem{{Role: "user", Content: "hi"}}, Instructions: &in})
	if err != nil || s.Session.ID != id || s.Session.ExpiresAt == nil || len(s.History) != 1 {
		t.Fatalf("create: %+v %v", s, err)
	}
	// The same answer to a create asking for another mode is refused.
	if _, err := c.CreateSession(t.Context(), &client.SessionCreate{Provider: "p", Model: "m", Mode: "history",
		History: []protocol.HistoryItem{{Role: "user", Content: "hi"}}, Instructions: &in}); client.CodeOf(err) != protocol.CodeInvalidResponse {
		t.Fatalf("create with another mode: %v", err)
	}
	if s, err := c.ReadSession(t.Context(), id); err != nil || s.Session.Revision != 0 {
		t.Fatalf("read: %+v %v", s, err)
	}
	if _, err := c.ReadSession(t.Context(), "22345678-1234-4234-8234-123456789abc"); client.CodeOf(err) != protocol.CodeInvalidResponse {
		t.Fatalf("read answered for another id: %v", err)
	}
	if err := c.DeleteSession(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /v1/sessions/create", "POST /v1/sessions/create", "POST /v1/sessions/read", "POST /v1/sessions/read", "POST /v1/sessions/delete"}
	for i := range want {
		if paths[i] != want[i] {
			t.Fatalf("calls %v, want %v", paths, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(bodies[4]), &body); err != nil || body["id"] != id || len(body) != 1 {
		t.Fatalf("delete body %s", bodies[4])
	}
	if got := string(client.SessionRef(id, 7)); got != `{"id":"`+id+`","revision":7}` {
		t.Fatalf("SessionRef = %s", got)
	}
}
