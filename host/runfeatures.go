package host

import (
	"context"
	"encoding/json"
	"net/http"

	"adhost/runtime"
	"adhost/runtime/idempotency"
	"adhost/runtime/protocol"
)

// SessionTurns is the conversation-sessions part of POST /v1/runs
// (wire-extensions §3.2); runtime/sessions implements it. Nil in
// ServerOptions: sessions are off, and a run with `session` is
// SESSIONS_UNAVAILABLE (the engine says so).
type SessionTurns interface {
	// Begin runs the checks of §3.2 (1–5, all before run.started) for a
	// run carrying `session`, and marks the session's turn as begun. It
	// returns the request the engine runs — the session's history and
	// instructions in, the `session` field out — and the StartOptions that
	// carry the turn (native state in, the commit in Complete, an event
	// observer in Log). started must be called once after StartWith: with
	// the run (a delete cancels it), or with nil when the run did not
	// start, which gives the turn back.
	Begin(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest) (run *protocol.RunRequest, opts runtime.StartOptions, started func(*runtime.Run), err error)
	// CheckReplay is the session part of an idempotent replay (§3.5): the
	// current `continue` grant, access and provider/model match are
	// checked; the revision is not, and nothing changes.
	CheckReplay(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest) error
}

// startRun starts req and serves it: the session step when the run
// carries `session`, then the engine, then the event stream or the JSON
// answer. extra are the additions of a wrapper around this step (the
// idempotency log); ModeStream/ModeJSON is mode.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request, p *runtime.Principal, req *protocol.RunRequest, mode runtime.Mode, extra runtime.StartOptions) {
	// Counted from here so Shutdown waits for this handler to deliver the
	// run's terminal event.
	s.streams.add()
	defer s.streams.done()
	opts, started := extra, func(*runtime.Run) {}
	if len(req.Session) > 0 && s.sessions != nil {
		sreq, sopts, sstarted, err := s.sessions.Begin(r.Context(), p, req)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		req, opts, started = sreq, joinStartOptions(sopts, extra), sstarted
	}
	// 13–16. Validation, shutdown re-check, authorization, admission: a
	// foreground run may wait in the admission queue.
	opts.Queue = true
	trace := s.traceRun(w, r, &runtimeRequest{provider: req.Provider, model: req.Model}, &opts)
	run, err := s.engine.StartWith(r.Context(), p, req, mode, opts)
	s.endTrace(trace, err)
	started(run) // nil when it did not start
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteRunID(w, run.ID())
	// 17. Execute.
	if mode == runtime.ModeStream {
		s.stream(w, r, run)
		return
	}
	s.waitJSON(w, r, run)
}

// joinStartOptions combines the options of two wrappers: both logs (a's
// first), a's native state, both completions (a's first; the first error
// wins).
func joinStartOptions(a, b runtime.StartOptions) runtime.StartOptions {
	out := runtime.StartOptions{Log: runtime.JoinLogs(a.Log, b.Log), Native: a.Native}
	if out.Native == nil {
		out.Native = b.Native
	}
	switch {
	case a.Complete == nil:
		out.Complete = b.Complete
	case b.Complete == nil:
		out.Complete = a.Complete
	default:
		out.Complete = func(res *protocol.RunResult, native json.RawMessage) error {
			if err := a.Complete(res, native); err != nil {
				return err
			}
			return b.Complete(res, native)
		}
	}
	return out
}

// replayEvidence is the evidence step of an idempotent replay
// (wire-context §11.3, wire-extensions §6.3): a request carrying
// references or retrieval is re-authorized for the credential asking now
// — references resolved again and compared with the recorded digests,
// retrieval evidence checked without embedding — before anything recorded
// is sent. Other requests pass at once.
func (s *Server) replayEvidence(ctx context.Context, p *runtime.Principal, req *protocol.RunRequest, rp *idempotency.Replay) error {
	if !runtime.EvidenceBearing(req) {
		return nil
	}
	var runID string
	if len(rp.Events) > 0 {
		var head struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal(rp.Events[0].Data, &head)
		runID = head.RunID
	}
	var recorded *protocol.RunResult
	if rp.Result != nil {
		recorded = new(protocol.RunResult)
		if err := json.Unmarshal(rp.Result, recorded); err != nil {
			return protocol.Wrap(protocol.CodeInternalError, err)
		}
	}
	return s.engine.ReauthorizeEvidence(ctx, p, req, runID, recorded)
}
