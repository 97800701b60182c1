package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime/protocol"
	"adhost/runtime/sessions"
)

// cliSessions opens conversation-sessions on the host's store when
// [sessions] is enabled: the turns and endpoints for ServerOptions.Sessions,
// the feature to advertise, and the closer of its expiry timer. Off: nil,
// nil and a no-op.
func cliSessions(ctx context.Context, cfg *config.File, h *cliHost, log *slog.Logger) (SessionTurns, []string, func(), error) {
	if !cfg.SessionsOn() {
		return nil, nil, func() {}, nil
	}
	s := cfg.Sessions
	if cfg.Usage.HostID == "" {
		log.Warn("sessions are enabled but usage.host_id is not set: no provider has an explicit account, so every create is SESSION_ACCOUNT_REQUIRED")
	}
	m, err := sessions.New(ctx, h.durable, sessions.Config{
		Retention:      time.Duration(s.RetentionMs) * time.Millisecond,
		MaxEntries:     s.MaxEntries,
		MaxMessages:    s.MaxMessages,
		MaxRecordBytes: s.MaxRecordBytes,
		HostID:         cfg.Usage.HostID,
		Source:         h.engine, // a reload changes the instances in place
		Logger:         log,
		Presence:       h.presence,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return m, []string{"conversation-sessions"}, m.Close, nil
}

func init() {
	cliHelp["sessions"] = `usage: adhost sessions create|read|delete [flags]

Thin clients of a running host's conversation sessions (wire-extensions §3),
with --url, --token-file or ADHOST_TOKEN as for adhost run; each prints the
answer as one JSON line. Continue a session with adhost run --session ID
"message": each call is one turn.`
	cliHelp["sessions create"] = `usage: adhost sessions create --provider P --model M [--mode native|history] [--instructions TEXT]

Creates a session bound to the provider instance and model (and the token's
subject) and prints its snapshot.`
	cliHelp["sessions read"] = `usage: adhost sessions read ID

Prints the session's snapshot: its state, revision and visible messages.`
	cliHelp["sessions delete"] = `usage: adhost sessions delete ID

Deletes the session; a turn of it still running ends with SESSION_DELETED.`
}

// cliSessionsCmd is `adhost sessions create|read|delete`: thin clients of
// the session endpoints.
func cliSessionsCmd(ctx context.Context, env *cliEnv, args []string) int {
	sub := ""
	if len(args) > 0 && (args[0] == "create" || args[0] == "read" || args[0] == "delete") {
		sub, args = args[0], args[1:]
	}
	cmd := strings.TrimSpace("sessions " + sub)
	fs := cliFlags(env, cmd)
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	var provider, model, mode, instructions *string
	if sub == "create" {
		provider = fs.String("provider", "", "provider instance id (required)")
		model = fs.String("model", "", "model id (required)")
		mode = fs.String("mode", client.SessionModeNative, "native or history")
		instructions = fs.String("instructions", "", "instructions the session keeps")
	}
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	switch {
	case sub == "":
		if len(pos) > 0 {
			return cliUsageError(env, cmd, "unknown subcommand %q (create, read or delete)", pos[0])
		}
		return cliUsageError(env, cmd, "want a subcommand: create, read or delete")
	case sub == "create" && *provider == "":
		return cliUsageError(env, cmd, "--provider is required")
	case sub == "create" && *model == "":
		return cliUsageError(env, cmd, "--model is required")
	case sub == "create" && len(pos) != 0:
		return cliUsageError(env, cmd, "unexpected argument %q", pos[0])
	case sub != "create" && len(pos) != 1:
		return cliUsageError(env, cmd, "want exactly one session id, got %d arguments", len(pos))
	}
	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail(cmd, err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	var out any
	switch sub {
	case "create":
		req := &client.SessionCreate{Provider: *provider, Model: *model, Mode: *mode}
		if *instructions != "" {
			req.Instructions = instructions
		}
		var s *client.SessionSnapshot
		if s, err = c.CreateSession(ctx, req); err == nil {
			out = cliSnapshotJSON(s)
		}
	case "read":
		var s *client.SessionSnapshot
		if s, err = c.ReadSession(ctx, pos[0]); err == nil {
			out = cliSnapshotJSON(s)
		}
	case "delete":
		if err = c.DeleteSession(ctx, pos[0]); err == nil {
			out = map[string]any{"id": pos[0], "deleted": true}
		}
	}
	if err != nil {
		return cliClientFailed(env, cmd, url, err)
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(env.stdout, "%s\n", b)
	return cliExitOK
}

// cliSnapshotJSON renders a snapshot in its wire shape.
func cliSnapshotJSON(s *client.SessionSnapshot) any {
	in := s.Session
	info := map[string]any{
		"id": in.ID, "revision": in.Revision, "provider": in.Provider, "model": in.Model,
		"mode": in.Mode, "state": in.State,
		"createdAt": in.CreatedAt.UTC().Format(timeLayoutMs), "updatedAt": in.UpdatedAt.UTC().Format(timeLayoutMs),
	}
	if in.ExpiresAt != nil {
		info["expiresAt"] = in.ExpiresAt.UTC().Format(timeLayoutMs)
	}
	history := s.History
	if history == nil {
		history = []protocol.HistoryItem{}
	}
	out := map[string]any{"session": info, "history": history}
	if s.Instructions != nil {
		out["instructions"] = *s.Instructions
	}
	return out
}

const timeLayoutMs = "2006-01-02T15:04:05.000Z"

// cliRunSession points req at the current revision of session id for
// `adhost run --session ID`: the provider and model default to the
// session's, and the turn continues whatever revision the session is at
// now (a conversation from the terminal: one call, one turn).
func cliRunSession(ctx context.Context, c *client.Client, id string, req *protocol.RunRequest) error {
	s, err := c.ReadSession(ctx, id)
	if err != nil {
		return err
	}
	if req.Provider == "" {
		req.Provider = s.Session.Provider
	}
	if req.Model == "" {
		req.Model = s.Session.Model
	}
	req.Session = client.SessionRef(id, s.Session.Revision)
	return nil
}
