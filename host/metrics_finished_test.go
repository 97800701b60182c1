package host

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// closingRecorder is a client that goes away the moment it has a run's
// terminal event: it cancels the request's context from inside the write
// that carries it, before the handler returns.
type closingRecorder struct {
	*recorder
	cancel context.CancelFunc
}

func (c *closingRecorder) Write(p []byte) (int, error) {
	n, err := c.recorder.Write(p)
	if strings.Contains(string(p), "event: run.completed") || strings.Contains(string(p), `"runId"`) && !strings.Contains(string(p), "event:") {
		c.cancel()
	}
	return n, err
}

// TestServedRunIsNotCancelled: a run whose answer was written whole — an
// SSE stream up to its terminal event, or a JSON result — is "completed"
// in the access line (and the metrics and host record that share its
// outcome) even when the client closes before the handler returns; only a
// response that never finished is "cancelled".
func TestServedRunIsNotCancelled(t *testing.T) {
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			var logs lockedBuffer
			e := newEnv(t, envOptions{logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, "POST", "/v1/runs", strings.NewReader(runBody("hi")))
			r.Header.Set("Authorization", "Bearer "+testToken)
			r.Header.Set("Content-Type", "application/json")
			if mode == "sse" {
				r.Header.Set("Accept", "text/event-stream")
			}
			w := &closingRecorder{recorder: newRecorder(), cancel: cancel}
			e.srv.ServeHTTP(w, r)
			if ctx.Err() == nil {
				t.Fatalf("the client never saw the answer:\n%s", w.recorder)
			}
			line := ""
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "msg=request") {
					line = l
				}
			}
			if !strings.Contains(line, "status=200") || !strings.Contains(line, "outcome=completed") {
				t.Fatalf("access line %q, want status 200 and outcome completed", line)
			}
		})
	}
}
