package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

const (
	jobID  = "5b2e0c1a-8d4f-4e7b-9a31-0c6d2f8e4b17"
	jobRun = "c41f9a70-2b3e-4d58-8e6a-91b0d7c3f245"
)

func jobInfoJSON(state string, cursor int) string {
	exp := ""
	if state != "queued" && state != "running" {
		exp = `,"expiresAt":"2026-10-02T09:00:00.000Z"`
	}
	return `{"id":"` + jobID + `","runId":"` + jobRun + `","provider":"work-api","model":"model-x","state":"` + state +
		`","cursor":` + itoa(cursor) + `,"cancelRequested":false,"createdAt":"2026-10-01T09:00:00.000Z","updatedAt":"2026-10-01T09:00:02.125Z"` + exp + `}`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func jobEvent(typ string, seq int, extra string) string {
	return `{"type":"` + typ + `","runId":"` + jobRun + `","sequence":` + itoa(seq) + `,"timestamp":"2026-10-01T09:00:00.000Z"` + extra + `}`
}

// The job calls send the wire bodies and accept a log read in pages: the
// pages continue each other and the last one ends with the terminal event.
func TestJobCalls(t *testing.T) {
	events := []string{
		jobEvent("run.started", 1, `,"provider":"work-api","model":"model-x"`),
		jobEvent("step.started", 2, `,"step":1`),
		jobEvent("text.delta", 3, `,"text":"hi"`),
		jobEvent("run.completed", 4, `,"result":{"runId":"`+jobRun+`","provider":"work-api","model":"model-x","text":"hi","usage":{},"steps":1,"finishReason":"stop"}`),
	}
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.URL.Path+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		var args struct {
			ID    string
			After int
			Limit int
		}
		json.Unmarshal(b, &args)
		switch r.URL.Path {
		case "/v1/jobs/submit", "/v1/jobs/read":
			w.Write([]byte(jobInfoJSON("completed", 4)))
		case "/v1/jobs/cancel":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"JOB_NOT_FOUND","message":"The job does not exist.","retryable":false}}`))
		case "/v1/jobs/events":
			end := min(args.After+2, 4)
			page := `{"job":` + jobInfoJSON("completed", 4) + `,"events":[` + strings.Join(events[args.After:end], ",") +
				`],"nextCursor":` + itoa(end) + `,"hasMore":` + map[bool]string{true: "true", false: "false"}[end < 4] + `}`
			w.Write([]byte(page))
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithToken("job-client-token-0123456789abcdef0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	info, err := c.SubmitJob(ctx, "k1", &protocol.RunRequest{Provider: "work-api", Model: "model-x", Input: "hi"})
	if err != nil || info.ID != jobID || !info.Terminal() || info.ExpiresAt == nil {
		t.Fatalf("submit: %+v %v", info, err)
	}
	if _, err := c.SubmitJob(ctx, "k1", &protocol.RunRequest{Provider: "work-api", Model: "other", Input: "hi"}); client.CodeOf(err) != protocol.CodeInvalidResponse {
		t.Fatalf("submit answered for another model: %v", err)
	}
	if _, err := c.ReadJob(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelJob(ctx, jobID); client.CodeOf(err) != protocol.CodeJobNotFound {
		t.Fatalf("cancel: %v", err)
	}
	var got []string
	after := int64(0)
	for {
		p, err := c.JobEvents(ctx, jobID, after, 2)
		if err != nil {
			t.Fatalf("page after %d: %v", after, err)
		}
		for _, ev := range p.Events {
			got = append(got, ev.Type)
		}
		after = p.NextCursor
		if !p.HasMore {
			break
		}
	}
	if strings.Join(got, ",") != "run.started,step.started,text.delta,run.completed" {
		t.Fatalf("events %v", got)
	}
	want := []string{
		`/v1/jobs/submit {"key":"k1","request":{"provider":"work-api","model":"model-x","input":"hi"}}`,
		`/v1/jobs/submit {"key":"k1","request":{"provider":"work-api","model":"other","input":"hi"}}`,
		`/v1/jobs/read {"id":"` + jobID + `"}`,
	}
	for i, w := range want {
		if bodies[i] != w {
			t.Errorf("body %d = %s, want %s", i, bodies[i], w)
		}
	}
	if !strings.Contains(strings.Join(bodies, "\n"), `/v1/jobs/events {"after":2,"id":"`+jobID+`","limit":2}`) {
		t.Errorf("events bodies: %v", bodies)
	}
}
