package e2e_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"adhost/client"
	"adhost/runtime/protocol"
)

// sessionSite is the dev site with [sessions] on and the dev token holding
// every session grant.
func sessionSite(t *testing.T) *site {
	t.Helper()
	s := newSite(t)
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(doc), "version = 1\n", "version = 1\n\n[sessions]\nenabled = true\nretention_ms = 3600000\n", 1)
	// The dev token is the document's last table.
	text += "\n[tokens.grants]\nsessions = [\"create\", \"read\", \"continue\", \"delete\"]\n"
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func sessionTurn(input, id string, rev int64) *protocol.RunRequest {
	return &protocol.RunRequest{Provider: fixtureProvider, Model: fixtureModel, Input: input, Session: client.SessionRef(id, rev)}
}

// killHard ends the host with SIGKILL: no shutdown, no flush.
func killHard(t *testing.T, srv *server) {
	t.Helper()
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.done
}

// pendingTurn streams req (a conformance:cancel turn) and returns once
// the fixture reported progress, i.e. its model call is pending: ended
// receives the stream's outcome, and *last is then the last event type.
func pendingTurn(ctx context.Context, t *testing.T, c *client.Client, req *protocol.RunRequest) (ended chan error, last *string) {
	t.Helper()
	progressed := make(chan struct{})
	ended, last = make(chan error, 1), new(string)
	go func() {
		_, err := c.Stream(ctx, req, func(ev client.Event) error {
			*last = ev.Type
			if ev.Type == client.EventRunProgress {
				select {
				case <-progressed:
				default:
					close(progressed)
				}
			}
			return nil
		})
		ended <- err
	}()
	select {
	case <-progressed:
	case err := <-ended:
		t.Fatalf("the pending turn ended early: %v", err)
	}
	return ended, last
}

// TestSessionsSurviveKill drives a native session of the real fixture
// through the real binary across two kill -9 restarts: a committed turn
// keeps its revision and native state (the follow-up after the restart is
// given the private state back), a turn running when the host dies is
// interrupted at the next start, the revision never goes backwards, and
// the private state never reaches a client or the log.
func TestSessionsSurviveKill(t *testing.T) {
	s := sessionSite(t)
	srv := startServer(t, s)
	c, err := client.New(srv.URL, client.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if info, err := c.Protocol(ctx); err != nil || !info.HasFeature("conversation-sessions") {
		t.Fatalf("protocol: %+v %v", info, err)
	}
	snap, err := c.CreateSession(ctx, &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
	if err != nil {
		t.Fatal(err)
	}
	id := snap.Session.ID
	res, err := c.Run(ctx, sessionTurn("conformance:native", id, 0))
	if err != nil || res.Text != "first visible reply" || strings.Contains(string(res.Session), stateMarker) {
		t.Fatalf("turn 1: %+v %v", res, err)
	}

	// 1. kill -9 after a committed turn.
	killHard(t, srv)
	srv = startServer(t, s)
	c, _ = client.New(srv.URL, client.WithToken(s.token))
	got, err := c.ReadSession(ctx, id)
	if err != nil || got.Session.Revision != 1 || got.Session.State != client.SessionReady || len(got.History) != 2 {
		t.Fatalf("after the first restart: %+v %v", got, err)
	}
	// The native state survived: the fixture confirms it came back.
	var types []string
	res, err = c.Stream(ctx, sessionTurn("conformance:native-followup", id, 1), func(ev client.Event) error {
		types = append(types, ev.Type)
		return nil
	})
	if err != nil || res.Text != "native state received" {
		t.Fatalf("follow-up after the restart: %+v %v", res, err)
	}

	// 2. kill -9 during a turn: conformance:cancel stays pending after
	// its first progress report.
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended, _ := pendingTurn(streamCtx, t, c, sessionTurn("conformance:cancel", id, 2))
	if got, err := c.ReadSession(ctx, id); err != nil || got.Session.State != client.SessionRunning || got.Session.ExpiresAt != nil {
		t.Fatalf("during the turn: %+v %v", got, err)
	}
	log1 := srv.stderr.settled()
	killHard(t, srv)
	<-ended
	srv = startServer(t, s)
	c, _ = client.New(srv.URL, client.WithToken(s.token))
	got, err = c.ReadSession(ctx, id)
	if err != nil || got.Session.State != client.SessionInterrupted || got.Session.Revision != 2 || len(got.History) != 4 {
		t.Fatalf("after the second restart: %+v %v", got, err)
	}
	if _, err := c.Run(ctx, sessionTurn("again", id, 2)); client.CodeOf(err) != protocol.CodeSessionInterrupted {
		t.Fatalf("a turn on the interrupted session: %v", err)
	}

	// 3. Deleting a session during its turn ends the turn with
	// run.cancelled SESSION_DELETED.
	other, err := c.CreateSession(ctx, &client.SessionCreate{Provider: fixtureProvider, Model: fixtureModel, Mode: client.SessionModeNative})
	if err != nil {
		t.Fatal(err)
	}
	ended, last := pendingTurn(ctx, t, c, sessionTurn("conformance:cancel", other.Session.ID, 0))
	if err := c.DeleteSession(ctx, other.Session.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; client.CodeOf(err) != protocol.CodeSessionDeleted || *last != "run.cancelled" {
		t.Fatalf("the deleted turn: %v (last event %s), want run.cancelled SESSION_DELETED", err, *last)
	}

	for what, text := range map[string]string{"log before the kill": log1, "log": srv.stderr.settled()} {
		if strings.Contains(text, stateMarker) {
			t.Errorf("the native state is in the %s", what)
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d:\n%s", code, srv.stderr)
	}
}
