package host

// toolExecutionRoute is POST /v1/tool-executions/progress (progress true)
// or /results; nil (an unknown path) when application tools are off.
func (s *Server) toolExecutionRoute(progress bool) endpoint {
	if s.executions == nil {
		return nil
	}
	if progress {
		return s.bodyRoute(s.executions.Progress)
	}
	return s.bodyRoute(s.executions.Result)
}
