package qualify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ReportSchema names the JSON shape of Report.
const ReportSchema = "adhost.qualification.v1"

// Modes of a Report.
const (
	ModeSimulate = "simulate"
	ModeLive     = "live"
)

// Statuses of a ScenarioResult.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// Report is one qualification of one extension digest. Its JSON is the
// stored form; Markdown renders it for people.
type Report struct {
	Schema    string        `json:"schema"`
	Extension ExtensionInfo `json:"extension"`
	// Endpoint is the origin the instance talked to (the simulator's
	// loopback origin when simulating).
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	Mode     string `json:"mode"`
	// Passed is true when no scenario failed.
	Passed     bool             `json:"passed"`
	Summary    Summary          `json:"summary"`
	StartedAt  time.Time        `json:"startedAt"`
	FinishedAt time.Time        `json:"finishedAt"`
	Scenarios  []ScenarioResult `json:"scenarios"`
}

// ExtensionInfo identifies the qualified module.
type ExtensionInfo struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Vendor  string `json:"vendor"`
}

// Summary counts scenarios by status.
type Summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// ScenarioResult is one scenario's outcome.
type ScenarioResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Reason says why it failed or was skipped (fixed texts, codes and
	// counts; never upstream bodies).
	Reason     string          `json:"reason,omitempty"`
	DurationMs int64           `json:"durationMs"`
	Events     []ObservedEvent `json:"events,omitempty"`
}

// ObservedEvent summarizes one event a scenario saw.
type ObservedEvent struct {
	Sequence int64  `json:"sequence,omitempty"`
	Type     string `json:"type"`
	Detail   string `json:"detail,omitempty"`
	// AtMs is the time since the scenario started.
	AtMs int64 `json:"atMs"`
}

// finish fills Passed and Summary from the scenarios.
func (r *Report) finish() {
	r.Summary = Summary{}
	for _, s := range r.Scenarios {
		switch s.Status {
		case StatusPassed:
			r.Summary.Passed++
		case StatusFailed:
			r.Summary.Failed++
		case StatusSkipped:
			r.Summary.Skipped++
		}
	}
	r.Passed = r.Summary.Failed == 0 && r.Summary.Passed > 0
}

// AddScenario appends a result (callers add checks of their own, like
// Simulate's credential check) and updates Passed and Summary.
func (r *Report) AddScenario(s ScenarioResult) {
	r.Scenarios = append(r.Scenarios, s)
	r.finish()
}

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Markdown renders the report for people.
func (r *Report) Markdown() []byte {
	var b bytes.Buffer
	result := "PASSED"
	if !r.Passed {
		result = "FAILED"
	}
	fmt.Fprintf(&b, "# Qualification of %s@%s: %s\n\n", r.Extension.ID, r.Extension.Version, result)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| Extension | `%s@%s` (vendor `%s`) |\n", r.Extension.ID, r.Extension.Version, r.Extension.Vendor)
	fmt.Fprintf(&b, "| sha256 | `%s` |\n", r.Extension.SHA256)
	fmt.Fprintf(&b, "| Endpoint | %s |\n", mdEscape(r.Endpoint))
	fmt.Fprintf(&b, "| Model | `%s` |\n", mdEscape(r.Model))
	fmt.Fprintf(&b, "| Mode | %s |\n", r.Mode)
	fmt.Fprintf(&b, "| Date | %s (%d ms) |\n", r.StartedAt.Format(time.RFC3339), r.FinishedAt.Sub(r.StartedAt).Milliseconds())
	fmt.Fprintf(&b, "| Summary | %d passed, %d failed, %d skipped |\n\n", r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped)
	fmt.Fprintf(&b, "| Scenario | Result | Time | Notes |\n|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "| %s | %s | %d ms | %s |\n", s.Name, s.Status, s.DurationMs, mdEscape(s.Reason))
	}
	for _, s := range r.Scenarios {
		if len(s.Events) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", s.Name)
		for _, e := range s.Events {
			fmt.Fprintf(&b, "- %d ms", e.AtMs)
			if e.Sequence > 0 {
				fmt.Fprintf(&b, " #%d", e.Sequence)
			}
			fmt.Fprintf(&b, " `%s`", e.Type)
			if e.Detail != "" {
				fmt.Fprintf(&b, " %s", mdEscape(e.Detail))
			}
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// mdEscape keeps table cells and list items on one line and literal.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ", "`", "'", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}
