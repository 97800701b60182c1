// Package cliturn runs one model turn of a local CLI adapter: it starts the
// binary the provider instance is bound to (through the host's process
// capability), hands the prompt over on stdin, feeds each stdout line to
// the adapter's parser, and maps what can go wrong — a refused start, an
// oversized or malformed output, an error the CLI reports, a non-zero exit
// — to stable provider codes. The CLI's own words (its error messages, its
// stderr) go into private messages only; the host never shows those to a
// client.
//
// The prompt travels on stdin rather than in the argument vector, where
// every user of the machine could read it (ps) and its size is bounded by
// the kernel.
package cliturn

import (
	"errors"
	"io"
	"strconv"
	"strings"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// Parser is one CLI's reading of its JSONL output.
type Parser interface {
	// Line handles one non-empty stdout line. An error stops the turn: the
	// process is closed and the error returned (an *sdk.Error keeps its
	// code).
	Line(line []byte) error
	// Finish returns the turn's output once stdout ended and the process
	// exited with code exit; stderr is what it wrote there (for the
	// adapter's classification only).
	Finish(exit int, stderr []byte) (*abi.CompleteOutput, error)
}

// Spec is the command of one turn.
type Spec struct {
	// Vendor prefixes private messages ("claude-code: …").
	Vendor string
	// Binary is the binary id of the manifest's process.binaries.
	Binary string
	Args   []string
	Stdin  []byte
}

// Run starts spec's process and drives p until the turn ends.
func Run(c *sdk.Call, spec Spec, p Parser) (*abi.CompleteOutput, error) {
	proc, err := c.StartProcess(spec.Binary, spec.Args, spec.Stdin)
	if err != nil {
		return nil, processError(spec.Vendor, err, false)
	}
	defer proc.Close()
	for {
		line, err := proc.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, processError(spec.Vendor, err, true)
		}
		if len(trimSpace(line)) == 0 {
			continue
		}
		if err := p.Line(line); err != nil {
			if c.Cancelled() {
				return nil, sdk.ErrCancelled
			}
			return nil, err
		}
	}
	exit, err := proc.Wait()
	if err != nil {
		return nil, processError(spec.Vendor, err, true)
	}
	return p.Finish(exit, proc.Stderr())
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// processError maps a failed process operation. A refused start is the
// host's verdict on the binding (an unbound name, a binary that no longer
// matches its pin: the host reports the latter itself); a bound hit while
// reading is RESPONSE_TOO_LARGE.
func processError(vendor string, err error, started bool) error {
	if errors.Is(err, sdk.ErrCancelled) {
		return sdk.ErrCancelled
	}
	var pe *sdk.ProcessError
	if errors.As(err, &pe) {
		switch pe.Errno {
		case abi.ErrLimit:
			if started {
				return sdk.Errorf(sdk.CodeResponseTooLarge, "%s: CLI output exceeds the host's bound", vendor)
			}
			return sdk.Errorf(sdk.CodeProviderFailed, "%s: too many processes", vendor)
		case abi.ErrDenied:
			return sdk.Errorf(sdk.CodeProviderFailed, "%s: the host refused to start the CLI", vendor)
		}
	}
	if started {
		return sdk.Errorf(sdk.CodeIncompleteStream, "%s: reading the CLI's output failed", vendor)
	}
	return sdk.Errorf(sdk.CodeProviderFailed, "%s: the CLI did not start", vendor)
}

// Prompt renders a turn's input as the single prompt a headless CLI
// takes: the instructions, then the conversation. A lone user message is
// passed as it is; a longer conversation is written out with role labels,
// ending with the request to answer as the assistant.
func Prompt(in *abi.CompleteInput) string {
	var b strings.Builder
	if s := strings.TrimSpace(in.Instructions); s != "" {
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	if len(in.Messages) == 1 && in.Messages[0].Role == abi.RoleUser {
		b.WriteString(in.Messages[0].Content)
		return b.String()
	}
	if len(in.Messages) > 0 {
		b.WriteString("The conversation so far:\n\n")
	}
	for _, m := range in.Messages {
		switch m.Role {
		case abi.RoleUser:
			b.WriteString("User: ")
		case abi.RoleAssistant:
			b.WriteString("Assistant: ")
		case abi.RoleTool:
			b.WriteString("Tool result (" + m.Name + "): ")
		default:
			continue
		}
		b.WriteString(m.Content)
		b.WriteString("\n\n")
	}
	if len(in.Messages) > 0 {
		b.WriteString("Reply as the assistant to the last message.")
	}
	return b.String()
}

// SafeModel reports whether a model id can go into the argument vector:
// the host checked it against the provider's allowlist, and this keeps an
// id that would read as a flag out anyway.
func SafeModel(m string) bool {
	if m == "" || len(m) > 200 || m[0] == '-' {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// Text accumulates a turn's visible text and streams it as it arrives,
// so the final text always equals what was streamed (the host checks).
type Text struct {
	c      *sdk.Call
	stream bool
	b      strings.Builder
}

// NewText streams through c when stream is set (the manifest declares
// textStreaming and the turn is not buffered).
func NewText(c *sdk.Call, stream bool) *Text { return &Text{c: c, stream: stream} }

// Add appends a delta; it returns sdk.ErrCancelled once the run is
// cancelled.
func (t *Text) Add(s string) error {
	if s == "" {
		return nil
	}
	t.b.WriteString(s)
	if t.stream && t.c.EmitText(s) {
		return sdk.ErrCancelled
	}
	return nil
}

// Len is the length of the text so far.
func (t *Text) Len() int { return t.b.Len() }

// String is the text so far.
func (t *Text) String() string { return t.b.String() }

// Classify maps a CLI's error text to a provider code: authentication
// problems (a CLI that is not logged in, a rejected key) are
// PROVIDER_AUTH, quota and rate limits RATE_LIMITED, anything else
// PROVIDER_ERROR. The text only chooses the code; it never becomes public.
func Classify(vendor, kind, msg string) *sdk.Error {
	l := strings.ToLower(msg)
	code := sdk.CodeProviderError
	switch {
	case containsAny(l, "rate limit", "rate_limit", "ratelimit", "429", "quota", "usage limit", "resource_exhausted", "too many requests"):
		code = sdk.CodeRateLimited
	case containsAny(l, "not logged in", "login", "log in", "unauthorized", "unauthenticated", "authentication", "401", "403", "api key", "api_key", "invalid_api_key", "credentials", "permission_denied"):
		code = sdk.CodeProviderAuth
	}
	e := sdk.Errorf(code, "%s: %s", vendor, kind)
	return e
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ExitError is the error of a CLI that exited with a non-zero code
// without reporting an error of its own.
func ExitError(vendor string, exit int, stderr []byte) *sdk.Error {
	e := Classify(vendor, "exited with code "+strconv.Itoa(exit), string(stderr))
	if e.Code == sdk.CodeProviderError {
		e.Code = sdk.CodeProviderFailed
	}
	e.Retryable = false
	return e
}

// Malformed is the error of an output line that is not the JSON event the
// CLI documents.
func Malformed(vendor string) *sdk.Error {
	return sdk.Errorf(sdk.CodeInvalidProviderResponse, "%s: malformed output line", vendor)
}

// Int64 returns a pointer to v (for abi.Usage).
func Int64(v int64) *int64 { return &v }

// Float64 returns a pointer to v.
func Float64(v float64) *float64 { return &v }
