package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// idemFrame is one SSE frame as sent.
type idemFrame struct {
	id, typ string
	data    []byte
}

// idemStream posts body as an event-stream run and calls each frame as it
// arrives; stop (returning false) leaves the response open, to be killed
// under it.
func idemStream(t *testing.T, ctx context.Context, srv *server, token, body string, each func(idemFrame) bool) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/runs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var f idemFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.typ != "" && !each(f) {
				return resp.StatusCode
			}
			f = idemFrame{}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = []byte(line[6:])
		}
	}
	return resp.StatusCode
}

func idemCollect(t *testing.T, srv *server, token, body string) []idemFrame {
	t.Helper()
	var out []idemFrame
	if st := idemStream(t, t.Context(), srv, token, body, func(f idemFrame) bool { out = append(out, f); return true }); st != http.StatusOK {
		t.Fatalf("%s: status %d", body, st)
	}
	return out
}

var idemSeq = regexp.MustCompile(`"sequence":\d+`)

// idemCompact is the replay of frames: the events a record keeps,
// renumbered from 1, every other byte unchanged.
func idemCompact(frames []idemFrame) []idemFrame {
	var out []idemFrame
	for _, f := range frames {
		if f.typ == "text.delta" || f.typ == "run.progress" {
			continue
		}
		n := strconv.Itoa(len(out) + 1)
		out = append(out, idemFrame{id: n, typ: f.typ, data: idemSeq.ReplaceAll(f.data, []byte(`"sequence":`+n))})
	}
	return out
}

func idemTypes(fs []idemFrame) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.typ)
	}
	return strings.Join(s, ",")
}

// Keys survive kill -9: a finished key replays its record after the
// restart, and a key whose run was killed mid-run replays the events it
// committed, then run.failed OPERATION_UNCERTAIN, without running again.
func TestIdempotencyAcrossKill9(t *testing.T) {
	s := newSite(t)
	f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n[idempotency]\nenabled = true\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv := startServer(t, s)

	c, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Protocol(t.Context())
	if err != nil || !strings.Contains(strings.Join(info.Features, ","), "idempotency") {
		t.Fatalf("/v1/protocol: %v %+v", err, info)
	}

	toolRun := `{"provider":"fixture","model":"fixture-model","input":"conformance:tools","tools":["conformance_lookup"],"idempotencyKey":"e2e-tools"}`
	done := idemCollect(t, srv, s.token, toolRun)
	if idemTypes(done) == "" || done[len(done)-1].typ != "run.completed" {
		t.Fatalf("tool run: %s", idemTypes(done))
	}
	key, jsonKey := "e2e-killed", "e2e-json"
	jsonRun := &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "conformance:text", IdempotencyKey: &jsonKey}
	jsonRes, err := c.Run(t.Context(), jsonRun)
	if err != nil {
		t.Fatalf("JSON run: %v", err)
	}

	// Kill -9 while conformance:cancel is pending (after its run.progress).
	pending := `{"provider":"fixture","model":"fixture-model","input":"conformance:cancel","idempotencyKey":"e2e-killed"}`
	var before []idemFrame
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	idemStream(t, ctx, srv, s.token, pending, func(f idemFrame) bool {
		before = append(before, f)
		if f.typ == "run.progress" {
			if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-srv.done
			return false
		}
		return true
	})
	cancel()
	if len(before) == 0 || before[len(before)-1].typ != "run.progress" {
		t.Fatalf("before the kill: %s", idemTypes(before))
	}

	srv = startServer(t, s)
	if c, err = client.New(srv.URL, client.WithToken(s.token)); err != nil {
		t.Fatal(err)
	}
	replay := idemCollect(t, srv, s.token, pending)
	want := idemCompact(before)
	if idemTypes(replay) != idemTypes(want)+",run.failed" {
		t.Fatalf("replay of the killed run: %s, want %s,run.failed", idemTypes(replay), idemTypes(want))
	}
	for i := range want {
		if !bytes.Equal(replay[i].data, want[i].data) || replay[i].id != want[i].id {
			t.Errorf("replayed event %d:\n got %s\nwant %s", i, replay[i].data, want[i].data)
		}
	}
	var term struct {
		RunID string `json:"runId"`
		Error protocol.ErrorInfo
	}
	if err := json.Unmarshal(replay[len(replay)-1].data, &term); err != nil {
		t.Fatal(err)
	}
	var first struct {
		RunID string `json:"runId"`
	}
	json.Unmarshal(before[0].data, &first)
	if term.Error.Code != protocol.CodeOperationUncertain || term.Error.Outcome != "uncertain" || term.Error.Retryable || term.RunID != first.RunID {
		t.Errorf("terminal %s; want OPERATION_UNCERTAIN, uncertain, not retryable, runId %s", replay[len(replay)-1].data, first.RunID)
	}
	// The fixture's conformance:cancel never ends by itself: an answer at
	// all means nothing ran. The status shows no run either.
	if st := fetchStatus(t, srv, s.token); st.Runs.Running != 0 {
		t.Errorf("running runs after the replay: %d", st.Runs.Running)
	}
	_, err = c.Run(t.Context(), &protocol.RunRequest{Provider: "fixture", Model: "fixture-model", Input: "conformance:cancel", IdempotencyKey: &key})
	checkClientError(t, err, protocol.CodeOperationUncertain, http.StatusConflict, false)

	// The finished keys replay from the store after the restart.
	again := idemCollect(t, srv, s.token, toolRun)
	wantDone := idemCompact(done)
	if idemTypes(again) != idemTypes(wantDone) {
		t.Fatalf("finished tool run after restart: %s, want %s", idemTypes(again), idemTypes(wantDone))
	}
	for i := range wantDone {
		if !bytes.Equal(again[i].data, wantDone[i].data) {
			t.Errorf("replayed event %d:\n got %s\nwant %s", i, again[i].data, wantDone[i].data)
		}
	}
	res, err := c.Run(t.Context(), jsonRun)
	if err != nil || res.RunID != jsonRes.RunID || res.Text != jsonRes.Text {
		t.Errorf("JSON replay after restart: %v %+v, want %+v", err, res, jsonRes)
	}
	// A changed request with a recorded key is still a conflict.
	changed := *jsonRun
	changed.Input = "conformance:text again"
	_, err = c.Run(t.Context(), &changed)
	checkClientError(t, err, protocol.CodeIdempotencyConflict, http.StatusConflict, false)
}
