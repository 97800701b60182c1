package host

import (
	"io"
	"log/slog"
	"net/http"

	"adhost/host/config"
)

// newLogger is the host's log of [log]: text (the default) or JSON lines
// at the configured level; -v lowers it to debug. What reaches it is an
// operator's view — access lines, run ends, failures — and never content
// (prompts, answers, tool data, credentials): the private cause of a
// failure is logged at debug level only.
func newLogger(w io.Writer, l *config.Log, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	format := "text"
	if l != nil {
		switch l.Level {
		case "debug":
			level = slog.LevelDebug
		case "warn":
			level = slog.LevelWarn
		case "error":
			level = slog.LevelError
		}
		if l.Format != "" {
			format = l.Format
		}
	}
	if verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// noteReplayed marks the request as an idempotent replay: its host record
// and access line report outcome "replayed" (wire-extensions §11.2), with
// the span status OK, whatever the recorded outcome it replays.
func noteReplayed(w http.ResponseWriter) {
	if o, ok := w.(*obsWriter); ok {
		o.replayed = true
	}
}
