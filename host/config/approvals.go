package config

// Approvals is [approvals]: interactive-approvals (wire-extensions §4.1,
// §9 approvals{interactive, allowIdlePause, maxPending} in snake case).
// Absent, or enabled = false: the feature is off and not advertised, and a
// run carrying `approvals` is APPROVAL_UNAVAILABLE. The keys are checked
// either way.
type Approvals struct {
	Enabled bool `toml:"enabled"`
	// AllowIdlePause admits idlePolicy "pause" (the run's idle clock
	// stops while a decision is awaited); false: APPROVAL_POLICY.
	// Default true.
	AllowIdlePause *bool `toml:"allow_idle_pause"`
	// MaxPending bounds the outstanding approvals host-wide:
	// 1..1,000,000, default 1000 (APPROVAL_CAPACITY beyond it).
	MaxPending int `toml:"max_pending"`
}

// AppTools is [application_tools]: application-tools (wire-extensions
// §5, §9 applicationTools{enabled, requireApproval, maxPending}).
// Absent, or enabled = false: off, and a run carrying applicationTools is
// APPLICATION_TOOLS_UNAVAILABLE.
type AppTools struct {
	Enabled bool `toml:"enabled"`
	// RequireApproval is the host default of the review requirement of an
	// application tool call (§5.2); default true. Automatic execution
	// needs false here and requires_approval = false in the executor's
	// grant.
	RequireApproval *bool `toml:"require_approval"`
	// MaxPending bounds the outstanding tool executions host-wide:
	// 1..1,000,000, default 1000 (TOOL_EXECUTOR_CAPACITY beyond it).
	MaxPending int `toml:"max_pending"`
}

// Bounds and defaults of [approvals] and [application_tools].
const (
	DefaultMaxPendingApprovals  = 1000
	DefaultMaxPendingExecutions = 1000
	MaxPendingLimit             = 1_000_000
)

// AppToolReview maps each application_tools grant to whether its calls
// still need review (requires_approval, default true).
func (g Grants) AppToolReview() map[string]bool {
	out := make(map[string]bool, len(g.ApplicationTools))
	for _, a := range g.ApplicationTools {
		out[a.Name] = a.RequiresApproval == nil || *a.RequiresApproval
	}
	return out
}

// ApprovalsOn reports whether interactive-approvals are configured.
func (f *File) ApprovalsOn() bool { return f.Approvals != nil && f.Approvals.Enabled }

// AppToolsOn reports whether application-tools are configured.
func (f *File) AppToolsOn() bool { return f.AppTools != nil && f.AppTools.Enabled }

// IdlePauseAllowed is allow_idle_pause with its default.
func (a *Approvals) IdlePauseAllowed() bool { return a.AllowIdlePause == nil || *a.AllowIdlePause }

// ReviewByDefault is require_approval with its default.
func (a *AppTools) ReviewByDefault() bool { return a.RequireApproval == nil || *a.RequireApproval }

// validateReviews checks [approvals] and [application_tools] and fills
// their defaults: a bound that is written is checked as written.
func (f *File) validateReviews(p *problems) {
	pending := func(table string, v *int, def int) {
		if _, set := f.pos[table+".max_pending"]; (set || *v != 0) && (*v < 1 || *v > MaxPendingLimit) {
			p.add(table+".max_pending", "%d out of range 1..%d", *v, MaxPendingLimit)
		}
		if *v == 0 {
			*v = def
		}
	}
	if a := f.Approvals; a != nil {
		pending("approvals", &a.MaxPending, DefaultMaxPendingApprovals)
	}
	if a := f.AppTools; a != nil {
		pending("application_tools", &a.MaxPending, DefaultMaxPendingExecutions)
	}
}
