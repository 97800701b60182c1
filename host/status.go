package host

import (
	"encoding/json"
	"net/http"

	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm"
)

// StatusPath is the operator status endpoint. It is adhost's own, outside
// the protocol's /v1 namespace so that no later protocol endpoint can
// collide with it; it goes through the whole request pipeline (a valid
// bearer token is required, like every non-health request).
const StatusPath = "/adhost/v1/status"

// HostStatus is the body of GET StatusPath.
type HostStatus struct {
	Runs       RunsStatus        `json:"runs"`
	Extensions []ExtensionStatus `json:"extensions"`
}

// RunsStatus is the engine's admission state.
type RunsStatus struct {
	Running       int `json:"running"`
	Subjects      int `json:"subjects"`
	MaxConcurrent int `json:"maxConcurrent"`
	MaxPerSubject int `json:"maxPerSubject"`
}

// ExtensionStatus is one loaded extension and its instances.
type ExtensionStatus struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// SHA256 is the pinned digest in use for new runs (a reload may have
	// changed it under the same version).
	SHA256 string `json:"sha256"`
	Kind   string `json:"kind"`
	// Live instances are idle, in use or being created.
	Live  int `json:"live"`
	Idle  int `json:"idle"`
	InUse int `json:"inUse"`
	// Warm is the idle count kept (the manifest's poolSize); idle
	// instances above it close after IdleMs.
	Warm   int   `json:"warm"`
	IdleMs int64 `json:"idleMs"`
	// Cap is the operator's max_instances, omitted when there is none;
	// Reserved are its units held by admitted runs.
	Cap      int `json:"cap,omitempty"`
	Reserved int `json:"reserved,omitempty"`
}

// Status is the host's status: admission and extension instances.
func (s *Server) Status() HostStatus {
	a := s.engine.Admission()
	st := HostStatus{
		Runs:       RunsStatus{Running: a.Running, Subjects: a.Subjects, MaxConcurrent: a.MaxConcurrent, MaxPerSubject: a.MaxPerSubject},
		Extensions: []ExtensionStatus{},
	}
	if f := s.live.Load().status; f != nil {
		st.Extensions = f()
	}
	return st
}

// StatusFunc reports the extensions' part of the status.
type StatusFunc func() []ExtensionStatus

// extensionStatus reports xs in configuration order.
func extensionStatus(xs []*wasm.Extension) StatusFunc {
	return func() []ExtensionStatus {
		out := make([]ExtensionStatus, 0, len(xs))
		for _, x := range xs {
			st, pin := x.Stats(), x.Pin()
			out = append(out, ExtensionStatus{
				ID: pin.ID, Version: pin.Version, SHA256: pin.SHA256, Kind: string(x.Manifest().Kind),
				Live: st.Live, Idle: st.Idle, InUse: st.InUse, Warm: st.Warm, IdleMs: st.IdleTTL.Milliseconds(),
				Cap: st.Cap, Reserved: st.Reserved,
			})
		}
		return out
	}
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, _ *runtime.Principal) {
	body, err := json.Marshal(s.Status())
	if err != nil {
		s.writeError(w, r, protocol.Wrap(protocol.CodeInternalError, err))
		return
	}
	s.writeJSON(w, http.StatusOK, body)
}
