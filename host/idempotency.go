package host

import (
	"log/slog"
	"net/http"

	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/idempotency"
	"adhost/runtime/protocol"
)

// serveKeyedRun is POST /v1/runs for a request carrying idempotencyKey on
// a host with an operation store (wire-core §15, wire-extensions §8), from
// step 13 on. The order is the spec's:
//
//  1. Validation and provider/tool authorization (Engine.Validate), before
//     the key is looked at: a request the host refuses claims nothing. A
//     session turn is validated without its `session` member, which the
//     sessions step checks (on a replay: SessionTurns.CheckReplay).
//  2. The key (idempotency.Keys.Begin): a conflict or a run still going in
//     this process answers at once; a new key is claimed, committed,
//     before the engine starts anything.
//  3. A new key runs as any run does (startRun, with the claim as event
//     log and completion hook); a run refused before run.started (BUSY
//     among others) gives its key back.
//  4. A replay first passes what its run would have to pass now: the
//     session's replay check and synchronous admission
//     (Engine.Admissible): the host's, the subject's and the provider
//     account's caps and the queue bounds — BUSY without a queue, QUEUE_FULL
//     when the run would have to wait and the queue is full, nothing when
//     it would start or wait (a replay never waits). The extensions'
//     instance caps are not asked: a replay calls no extension. The replay
//     then takes no slot, calls no provider or tool and creates no usage
//     record: it writes the record.
func (s *Server) serveKeyedRun(w http.ResponseWriter, r *http.Request, p *runtime.Principal, req *protocol.RunRequest, mode runtime.Mode) {
	vreq := req
	if len(req.Session) > 0 && s.sessions != nil {
		c := *req
		c.Session = nil
		vreq = &c
	}
	if err := s.engine.Validate(p, vreq); err != nil {
		s.writeError(w, r, err)
		return
	}
	claim, replay, err := s.idem.Begin(r.Context(), p.Subject, req, mode)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if claim != nil {
		// Deferred: a stream handler may end by aborting the connection.
		// The answer is flushed first: Finish writes the claim's summary,
		// which no client waits for.
		defer func() {
			_ = http.NewResponseController(w).Flush()
			claim.Finish()
		}()
		s.startRun(w, r, p, req, mode, runtime.StartOptions{Log: claim, Complete: claim.Complete})
		return
	}
	if len(req.Session) > 0 {
		if err := s.sessions.CheckReplay(r.Context(), p, req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if err := s.replayEvidence(r.Context(), p, req, replay); err != nil { // runfeatures.go
		s.writeError(w, r, err)
		return
	}
	if err := s.engine.Admissible(p.Subject, req.Provider); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.streams.add()
	defer s.streams.done()
	if s.writeReplay(w, r, replay, mode) {
		noteReplayed(w)
	}
}

// writeReplay sends a recorded outcome: in JSON mode the stored result or
// the stored error with its status; as an event stream the compact log,
// framed as a live run's events are (appendFrame), in one flush. The
// stored event JSON is written as it was recorded, only its sequence
// renumbered. It reports whether the recorded outcome was written whole
// (the request's outcome is then "replayed").
func (s *Server) writeReplay(w http.ResponseWriter, r *http.Request, rp *idempotency.Replay, mode runtime.Mode) bool {
	if mode == runtime.ModeJSON {
		if rp.Err != nil {
			s.writeError(w, r, rp.Err)
			return true
		}
		s.writeJSON(w, http.StatusOK, rp.Result)
		return true
	}
	size := 0
	for _, ev := range rp.Events {
		if err := checkFrame(ev); err != nil {
			s.writeError(w, r, err)
			return false
		}
		size += frameLineBytes(ev) + 8
	}
	h := w.Header()
	h["Content-Type"] = valEventStream
	h["X-Accel-Buffering"] = valNo
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, min(size, batchBytes+MaxFrameBytes))
	for _, ev := range rp.Events {
		buf = appendFrame(buf, ev)
		if len(buf) >= batchBytes {
			if _, err := w.Write(buf); err != nil {
				return false // the client is gone; nothing runs that it could stop
			}
			buf = buf[:0]
		}
	}
	if _, err := w.Write(buf); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

// cliIdempotency opens idempotency keys on the host's store when
// [idempotency] is enabled: the keys for ServerOptions.Idempotency and the
// feature to advertise. Off: nil, nil (keys stay IDEMPOTENCY_UNAVAILABLE).
// The engine must have been built with Options.IdempotencyKeys set alike
// (cfg.IdempotencyOn).
func cliIdempotency(cfg *config.File, h *cliHost, log *slog.Logger) (*idempotency.Keys, []string, error) {
	if !cfg.IdempotencyOn() {
		return nil, nil, nil
	}
	k, err := idempotency.New(h.durable, idempotency.Options{MaxRecordBytes: cfg.Idempotency.MaxRecordBytes, Logger: log, Presence: h.presence})
	if err != nil {
		return nil, nil, err
	}
	return k, []string{"idempotency"}, nil
}
