package host

import (
	"context"
	"net/http"

	"adhost/runtime"
)

// SessionService is the whole conversation-sessions feature
// (wire-extensions §3; runtime/sessions.Manager implements it): the turns
// of runs carrying `session`, and the three session endpoints. When
// ServerOptions.Sessions implements it, the server routes
// /v1/sessions/create|read|delete; otherwise those paths are unknown.
//
// Each endpoint method takes the raw request body (steps 9–11 done) and
// returns the 200 body, or an error whose *protocol.Error code and status
// the server sends.
type SessionService interface {
	SessionTurns
	Create(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Read(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Delete(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
}

// sessionRoute returns the endpoint serving op of the session service, or
// nil (no route) when sessions are off. The endpoints never take a run
// slot (wire-extensions §1.5): they only touch the store, so a host whose
// slots are all taken can still delete the session of a stuck turn.
func (s *Server) sessionRoute(op func(SessionService) func(context.Context, *runtime.Principal, []byte) ([]byte, error)) endpoint {
	svc, ok := s.sessions.(SessionService)
	if !ok {
		return nil
	}
	call := op(svc)
	return func(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
		body, ok := s.readPOST(w, r)
		if !ok {
			return
		}
		out, err := call(r.Context(), p, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, out)
	}
}

func sessionCreate(svc SessionService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Create
}

func sessionRead(svc SessionService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Read
}

func sessionDelete(svc SessionService) func(context.Context, *runtime.Principal, []byte) ([]byte, error) {
	return svc.Delete
}
