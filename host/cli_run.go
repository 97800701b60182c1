package host

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime/protocol"
)

// Exit codes of an interrupted `adhost run`: 128 + the signal's number,
// as a shell reports a command the signal killed.
const (
	cliExitInterrupted = 130 // SIGINT (Ctrl-C), or the caller's context ended
	cliExitTerminated  = 143 // SIGTERM
)

const cliRunUsage = `usage: adhost run --provider P --model M [--stream] [--json] [--schema FILE] [--tool NAME] [--approve] [--attach FILE] [--artifact KIND] "input" (or - for stdin)

Calls a running host (wire-core POST /v1/runs) and prints the run:

  default   the text on stdout (as it streams with --stream), then a one-line
            summary (run id, finish reason, steps, tokens) on stderr
  --json    only the final RunResult, one JSON line, on stdout (for jq); with
            --stream the text still shows as it arrives, on stderr

A failed run prints "adhost run: CODE: message" on stderr and exits 1; a host
that cannot be reached is named with its URL. Ctrl-C cancels the run (the
host sees the disconnect), prints "interrupted" and exits 130; a second
Ctrl-C ends the command at once.

--session ID continues a conversation session (adhost sessions create): the
turn goes to the session's current revision, with its provider and model
unless given; each call is one turn.

--approve streams the run with interactive approvals: each tool call that
needs one shows the tool and its arguments on stderr and asks y/n on the
terminal (anything but y or yes denies; the run's idle clock pauses while
it asks).

--attach FILE attaches a file as selected context (repeatable): its media
type comes from its content — PNG, JPEG, WEBP, PDF, else UTF-8 text — never
its name. --artifact markdown|text|json asks for a draft artifact (json needs
--schema); its name, media type and SHA-256 follow the summary on stderr,
and a JSON artifact's content is printed on stdout.`

func init() { cliHelp["run"] = cliRunUsage }

// cliRun is `adhost run --provider P --model M [--stream] [--json]
// [--schema FILE] "input"`: a client of a running host (cliRunUsage says
// where each output goes and why).
func cliRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "run")
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	provider := fs.String("provider", "", "provider instance id (required)")
	model := fs.String("model", "", "model id (required)")
	stream := fs.Bool("stream", false, "stream events (SSE) and print text as it arrives")
	asJSON := fs.Bool("json", false, "print only the final RunResult as JSON on stdout")
	schemaFile := fs.String("schema", "", "JSON Schema file for structured output")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	var tools cliStrings
	fs.Var(&tools, "tool", "host tool to expose (repeatable)")
	session := fs.String("session", "", "continue this conversation session (provider and model default to its own)")
	approve := fs.Bool("approve", false, "answer approval requests on the terminal (y/n); implies --stream")
	var attach cliStrings
	fs.Var(&attach, "attach", "attach a file as context (repeatable; media type from its content)")
	artifact := fs.String("artifact", "", "ask for a draft artifact: markdown, text or json")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	switch {
	case *provider == "" && *session == "":
		return cliUsageError(env, "run", "--provider is required")
	case *model == "" && *session == "":
		return cliUsageError(env, "run", "--model is required")
	case len(pos) != 1:
		return cliUsageError(env, "run", "want exactly one input argument, got %d", len(pos))
	}
	input := pos[0]
	if input == "-" && *approve {
		return cliUsageError(env, "run", "--approve reads its answers from stdin: give the input as an argument")
	}
	if input == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		if err != nil {
			return env.fail("run", err)
		}
		input = string(b)
	}
	req := &protocol.RunRequest{Provider: *provider, Model: *model, Input: input, Tools: tools}
	if *schemaFile != "" {
		b, err := os.ReadFile(*schemaFile)
		if err != nil {
			return env.fail("run", err)
		}
		if !json.Valid(b) {
			return env.failf("run", "%s is not valid JSON", *schemaFile)
		}
		req.OutputSchema = b
	}
	var err error
	if req.OutputArtifact, err = client.OutputArtifact(*artifact); err != nil {
		return cliUsageError(env, "run", "--artifact: %v", err)
	}
	if req.Attachments, err = client.FileAttachments(attach, os.ReadFile); err != nil {
		return env.fail("run", err)
	}

	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail("run", err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliRunFailedAt(env, url, err)
	}
	ctx, caught, stop := cliInterruptContext(ctx)
	defer stop()
	if *session != "" {
		if err := cliRunSession(ctx, c, *session, req); err != nil {
			return cliRunFailedAt(env, url, err)
		}
	}

	// Text goes where the result does not: stdout by default, stderr
	// under --json so that stdout holds nothing but the JSON.
	text := env.stdout
	if *asJSON {
		text = env.stderr
	}
	var res *protocol.RunResult
	var approver *cliApprover
	if *approve {
		*stream, req.Approvals, approver = true, client.Approvals("pause", 0), newCLIApprover(c, env.stderr)
	}
	if *stream {
		printed := false
		res, err = c.Stream(ctx, req, func(ev client.Event) error {
			if ev.Approval != nil && approver != nil {
				return approver.answer(ctx, ev.Approval)
			}
			if ev.Type == "text.delta" {
				io.WriteString(text, ev.Text)
				printed = true
			}
			return nil
		})
		if printed {
			fmt.Fprintln(text) // also when interrupted: the prompt starts on a line of its own
		}
	} else {
		res, err = c.Run(ctx, req)
		if err == nil && !*asJSON {
			fmt.Fprintln(text, res.Text)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return cliRunInterrupted(env, caught())
		}
		return cliRunFailedAt(env, url, err)
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(env.stdout, "%s\n", b)
	} else {
		fmt.Fprintf(env.stderr, "adhost run: %s\n", cliRunSummary(res))
		arts, _ := client.ResultArtifacts(res)
		for _, a := range arts {
			fmt.Fprintf(env.stderr, "adhost run: artifact %s (%s) sha256 %s, sources [%s]\n", a.Name, a.MediaType, a.SHA256, strings.Join(a.SourceIDs, " "))
			if a.MediaType == "application/json" {
				fmt.Fprintln(env.stdout, a.Content)
			}
		}
	}
	return cliExitOK
}

// cliInterruptContext is ctx, also cancelled by the first SIGINT or
// SIGTERM; caught reports which one arrived (nil: none, or ctx itself
// ended). The first signal stops the capture, so a second one has its
// default effect and ends the process even if cancelling hangs.
func cliInterruptContext(ctx context.Context) (_ context.Context, caught func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			got.Store(sig)
			signal.Stop(sigs)
			cancel()
		case <-ctx.Done():
		}
	}()
	caught = func() os.Signal {
		sig, _ := got.Load().(os.Signal)
		return sig
	}
	stop = func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
	return ctx, caught, stop
}

// cliRunInterrupted reports a run the user stopped. Cancelling the request
// closed the connection, which cancels the run on the host (wire-core §13).
func cliRunInterrupted(env *cliEnv, sig os.Signal) int {
	if sig == syscall.SIGTERM {
		fmt.Fprintln(env.stderr, "adhost run: terminated")
		return cliExitTerminated
	}
	fmt.Fprintln(env.stderr, "adhost run: interrupted")
	return cliExitInterrupted
}

// cliRunSummary is the human line printed after the text: which run, how
// it finished, and the usage the host reported (unknown counts omitted).
func cliRunSummary(res *protocol.RunResult) string {
	steps := "steps"
	if res.Steps == 1 {
		steps = "step"
	}
	s := fmt.Sprintf("run %s: %s, %d %s", res.RunID, res.FinishReason, res.Steps, steps)
	if u := res.Usage; u.InputTokens != nil || u.OutputTokens != nil {
		tok := func(n *int64) string {
			if n == nil {
				return "?"
			}
			return strconv.FormatInt(*n, 10)
		}
		s += fmt.Sprintf(", %s in / %s out tokens", tok(u.InputTokens), tok(u.OutputTokens))
	}
	return s
}

// cliRunFailedAt prints why a client call of `adhost run` failed (see
// cliClientFailed).
func cliRunFailedAt(env *cliEnv, base string, err error) int {
	return cliClientFailed(env, "run", base, err)
}

// cliClientFailed prints why a client call of command cmd failed: the wire
// code and message of an answer, or — when no answer came — that the host
// at base could not be reached, and why (not the client's generic
// "HTTP_ERROR: the request failed"). An empty base is taken from the
// request URL in err.
func cliClientFailed(env *cliEnv, cmd, base string, err error) int {
	if what, reason, ok := cliTransportFailure(err); ok {
		var ue *neturl.Error
		if base == "" && errors.As(err, &ue) {
			base = ue.URL
		}
		return env.failf(cmd, "%s %s: %s", what, base, reason)
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(env.stderr, "adhost %s: %s: %s\n", cmd, ce.Code, ce.Message)
		return cliExitFail
	}
	return env.fail(cmd, err)
}

// cliTransportFailure recognises an error that is no answer from the host
// at all: what happened ("cannot reach" before a connection, "lost the
// connection to" after) and a short reason ("connection refused"). Errors
// from an answer — an error body, a redirect, a broken stream — are not
// transport failures and keep their wire code.
func cliTransportFailure(err error) (what, reason string, ok bool) {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 0 || ce.Code != protocol.CodeHTTPError {
		return "", "", false
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		return "cannot reach", "cannot resolve " + dnsErr.Name + ": " + dnsErr.Err, true
	case errors.As(err, &certErr):
		return "cannot reach", "TLS: " + certErr.Err.Error(), true
	case errors.As(err, &recErr):
		return "cannot reach", "TLS handshake failed (is it an http:// address?)", true
	case errors.As(err, &opErr):
		what = "lost the connection to"
		if opErr.Op == "dial" {
			what = "cannot reach"
		}
		var errno syscall.Errno
		switch {
		case opErr.Timeout():
			reason = "timed out"
		case errors.As(opErr.Err, &errno):
			reason = errno.Error()
		default:
			reason = opErr.Err.Error()
		}
		return what, reason, true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "lost the connection to", "it closed before answering", true
	}
	return "", "", false
}

// cliClientSettings finds the base URL and bearer token of the host a
// client command talks to: flags first, then ADHOST_TOKEN, then the
// configuration (its listen address, and its first token kept in a file —
// the dev token of `make run`).
func cliClientSettings(cfgPath, baseURL, tokenFile string) (url, token string, err error) {
	var cfg *config.File
	if b, rerr := os.ReadFile(cfgPath); rerr == nil {
		cfg, _ = config.Decode(b, cliAbs(cfgPath))
	}
	url = baseURL
	if url == "" {
		url = "http://" + config.DefaultListen
		if cfg != nil {
			scheme := "http"
			if cfg.Server.TLSCert != "" {
				scheme = "https"
			}
			url = scheme + "://" + cliDialAddr(cfg.Server.Listen)
		}
	}
	switch {
	case tokenFile != "":
		token, err = config.SecretRef{File: tokenFile}.Resolve()
	case os.Getenv("ADHOST_TOKEN") != "":
		token = strings.TrimSpace(os.Getenv("ADHOST_TOKEN"))
	case cfg != nil:
		for _, t := range cfg.Tokens {
			if t.Secret.File != "" {
				token, err = t.Secret.Resolve()
				break
			}
		}
		if token == "" && err == nil {
			err = errors.New("no token: use --token-file or ADHOST_TOKEN")
		}
	default:
		err = errors.New("no token: use --token-file or ADHOST_TOKEN")
	}
	return url, token, err
}

// cliDialAddr turns a listen address into one a client can dial: an
// unspecified host (":7433", "0.0.0.0:7433") becomes loopback.
func cliDialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

func cliAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// cliStrings is a repeatable string flag.
type cliStrings []string

func (s *cliStrings) String() string     { return strings.Join(*s, ",") }
func (s *cliStrings) Set(v string) error { *s = append(*s, v); return nil }
