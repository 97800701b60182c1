package config

import "net/url"

// Diagnostics tables (host-config §5): [metrics] for GET /metrics, [log]
// for the host's own log, [diagnostics] for OpenTelemetry export
// (wire-extensions §11.2). Each is optional; absent means off (metrics,
// diagnostics) or the defaults (log: text at info).

// Metrics is [metrics].
type Metrics struct {
	// Enabled serves GET /metrics on the main listener to tokens whose
	// grants hold metrics = true.
	Enabled bool `toml:"enabled"`
}

// Log is [log].
type Log struct {
	// Format is "text" (the default) or "json".
	Format string `toml:"format"`
	// Level is "debug", "info" (the default), "warn" or "error".
	Level string `toml:"level"`
}

// Diagnostics is [diagnostics]: OpenTelemetry spans and metrics over
// OTLP/HTTP (protobuf).
type Diagnostics struct {
	// OTLPEndpoint is the collector's base URL (http or https); traces
	// go to /v1/traces and metrics to /v1/metrics under it. Empty: off.
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// Level is "summary" (the default), "steps" or "progress".
	Level string `toml:"level"`
	// SampleRate is the share of runs whose spans are exported, 0..1;
	// absent: 1.
	SampleRate *float64 `toml:"sample_rate"`
	// IncludeNames adds provider, model and tool names to spans.
	IncludeNames bool `toml:"include_names"`
	// ExportIntervalMs is the metric export period, 1000..3600000,
	// default 60000.
	ExportIntervalMs int `toml:"export_interval_ms"`
}

// Bounds and defaults of [diagnostics].
const (
	DefaultExportIntervalMs = 60000
	MinExportIntervalMs     = 1000
	MaxExportIntervalMs     = 3600000
)

// MetricsOn reports whether GET /metrics is served.
func (f *File) MetricsOn() bool { return f.Metrics != nil && f.Metrics.Enabled }

// DiagnosticsOn reports whether OpenTelemetry export is configured.
func (f *File) DiagnosticsOn() bool { return f.Diagnostics != nil && f.Diagnostics.OTLPEndpoint != "" }

func (f *File) validateDiagnostics(p *problems) {
	if l := f.Log; l != nil {
		switch l.Format {
		case "", "text", "json":
		default:
			p.add("log.format", "%q is not \"text\" or \"json\"", l.Format)
		}
		switch l.Level {
		case "", "debug", "info", "warn", "error":
		default:
			p.add("log.level", "%q is not \"debug\", \"info\", \"warn\" or \"error\"", l.Level)
		}
	}
	d := f.Diagnostics
	if d == nil {
		return
	}
	if d.OTLPEndpoint != "" {
		u, err := url.Parse(d.OTLPEndpoint)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			p.add("diagnostics.otlp_endpoint", "%q is not an http or https URL", d.OTLPEndpoint)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			p.add("diagnostics.otlp_endpoint", "must be a base URL without credentials, query or fragment")
		}
	}
	switch d.Level {
	case "", "summary", "steps", "progress":
	default:
		p.add("diagnostics.level", "%q is not \"summary\", \"steps\" or \"progress\"", d.Level)
	}
	if r := d.SampleRate; r != nil && !(*r >= 0 && *r <= 1) {
		p.add("diagnostics.sample_rate", "%v out of range 0..1", *r)
	}
	if _, set := f.pos["diagnostics.export_interval_ms"]; set || d.ExportIntervalMs != 0 {
		if d.ExportIntervalMs < MinExportIntervalMs || d.ExportIntervalMs > MaxExportIntervalMs {
			p.add("diagnostics.export_interval_ms", "%d out of range %d..%d", d.ExportIntervalMs, MinExportIntervalMs, MaxExportIntervalMs)
		}
	}
	if d.ExportIntervalMs == 0 {
		d.ExportIntervalMs = DefaultExportIntervalMs
	}
}
