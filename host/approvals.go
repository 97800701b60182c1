package host

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"adhost/client"
	"adhost/host/config"
	"adhost/runtime"
	"adhost/runtime/approvals"
	"adhost/runtime/apptools"
	"adhost/runtime/durable"
)

// Decider serves POST /v1/approvals/decisions (interactive-approvals,
// wire-extensions §4.3); runtime/approvals implements it.
type Decider interface {
	Decide(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
}

// ExecutionResults serves POST /v1/tool-executions/progress and /results
// (application-tools, §5.4); runtime/apptools implements it.
type ExecutionResults interface {
	Progress(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
	Result(ctx context.Context, p *runtime.Principal, body []byte) ([]byte, error)
}

// bodyRoute is an extension endpoint whose whole work is one call on the
// request body: steps 9–11 (readPOST), then call, then its JSON answer.
// It takes no run slot (§1.5): a full host can still settle its runs.
func (s *Server) bodyRoute(call func(context.Context, *runtime.Principal, []byte) ([]byte, error)) endpoint {
	return func(w http.ResponseWriter, r *http.Request, p *runtime.Principal) {
		body, ok := s.readPOST(w, r)
		if !ok {
			return
		}
		out, err := call(r.Context(), p, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, out)
	}
}

// approvalRoute is POST /v1/approvals/decisions; nil (an unknown path)
// when approvals are off.
func (s *Server) approvalRoute() endpoint {
	if s.decider == nil {
		return nil
	}
	return s.bodyRoute(s.decider.Decide)
}

// cliReviews builds the services of [approvals] and [application_tools]
// (nil when off) and their /v1/protocol features in upstream order. The
// approvals audit goes to audit (the store's logs).
func cliReviews(cfg *config.File, audit durable.Logs, log *slog.Logger) (*approvals.Service, *apptools.Service, []string) {
	var (
		rv       *approvals.Service
		apps     *apptools.Service
		features []string
	)
	if cfg.AppToolsOn() {
		a := cfg.AppTools
		apps = apptools.New(apptools.Config{RequireApproval: a.ReviewByDefault(), MaxPending: a.MaxPending})
		features = append(features, "application-tools")
	}
	if cfg.ApprovalsOn() {
		a := cfg.Approvals
		rv = approvals.New(approvals.Config{
			AllowIdlePause: a.IdlePauseAllowed(), MaxPending: a.MaxPending, Audit: audit, Logger: log,
		})
		features = append(features, "interactive-approvals")
	}
	return rv, apps, features
}

// The services as the engine's and the server's interfaces: nil stays a
// nil interface, so a feature that is off is off everywhere.
func (h *cliHost) reviewer() runtime.Reviewer {
	if h.reviews == nil {
		return nil
	}
	return h.reviews
}

func (h *cliHost) decider() Decider {
	if h.reviews == nil {
		return nil
	}
	return h.reviews
}

func (h *cliHost) appTools() runtime.ApplicationTools {
	if h.apps == nil {
		return nil
	}
	return h.apps
}

func (h *cliHost) executions() ExecutionResults {
	if h.apps == nil {
		return nil
	}
	return h.apps
}

// cliApprover answers the approval requests of `adhost run --approve` on
// the terminal: the tool and its arguments (compact JSON, so a control
// character in them cannot reach the terminal raw) on out, one y/n line
// from stdin. Anything but y or yes — an empty line, end of input — is a
// denial: the prompt fails closed like the rest of the feature.
type cliApprover struct {
	c     *client.Client
	out   io.Writer
	lines chan string // stdin, line by line; closed at its end
}

func newCLIApprover(c *client.Client, out io.Writer) *cliApprover {
	a := &cliApprover{c: c, out: out, lines: make(chan string)}
	go func() {
		// Reads stay on one goroutine for the command's life, so a
		// cancelled prompt never loses the next answer.
		defer close(a.lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
	}()
	return a
}

func (a *cliApprover) answer(ctx context.Context, req *client.ApprovalRequest) error {
	fmt.Fprintf(a.out, "\nadhost run: the model calls %s with %s\nadhost run: approve? [y/N] ", req.Call.Name, req.Call.Arguments)
	var line string
	select {
	case line = <-a.lines:
	case <-ctx.Done():
		return ctx.Err()
	}
	decision := client.DecisionDeny
	if v := strings.ToLower(strings.TrimSpace(line)); v == "y" || v == "yes" {
		decision = client.DecisionApprove
	}
	res, err := a.c.DecideApproval(ctx, req, decision)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "adhost run: %s\n", res.Outcome)
	return nil
}
