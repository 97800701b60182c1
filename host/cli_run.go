package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime/protocol"
)

// cliRun is `adhost run --provider P --model M [--stream] [--schema FILE]
// "input"`: a client of a running host. Text is printed as it streams
// (with --stream) or when the run ends, followed by the result JSON. On
// failure it prints the wire code and exits 1.
func cliRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := cliFlags(env, "run")
	cfgPath := fs.String("config", "host.toml", "configuration file (default URL and token)")
	provider := fs.String("provider", "", "provider instance id (required)")
	model := fs.String("model", "", "model id (required)")
	stream := fs.Bool("stream", false, "stream events (SSE) and print text as it arrives")
	schemaFile := fs.String("schema", "", "JSON Schema file for structured output")
	baseURL := fs.String("url", "", "host base URL (default: from the config's server.listen)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: $ADHOST_TOKEN, then the config's first file token)")
	var tools cliStrings
	fs.Var(&tools, "tool", "host tool to expose (repeatable)")
	pos, code, ok := cliParse(fs, args)
	if !ok {
		return code
	}
	if *provider == "" || *model == "" || len(pos) != 1 {
		fmt.Fprintln(env.stderr, `usage: adhost run --provider P --model M [--stream] [--schema FILE] [--tool NAME] "input" (or - for stdin)`)
		return cliExitUsage
	}
	input := pos[0]
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

	url, token, err := cliClientSettings(*cfgPath, *baseURL, *tokenFile)
	if err != nil {
		return env.fail("run", err)
	}
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return cliRunFailed(env, err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var res *protocol.RunResult
	if *stream {
		printed := false
		res, err = c.Stream(ctx, req, func(ev client.Event) error {
			if ev.Type == "text.delta" {
				io.WriteString(env.stdout, ev.Text)
				printed = true
			}
			return nil
		})
		if printed {
			fmt.Fprintln(env.stdout)
		}
	} else {
		res, err = c.Run(ctx, req)
		if err == nil {
			fmt.Fprintln(env.stdout, res.Text)
		}
	}
	if err != nil {
		return cliRunFailed(env, err)
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(env.stdout, "%s\n", b)
	return cliExitOK
}

func cliRunFailed(env *cliEnv, err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(env.stderr, "adhost run: %s: %s\n", ce.Code, ce.Message)
		return cliExitFail
	}
	return env.fail("run", err)
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
