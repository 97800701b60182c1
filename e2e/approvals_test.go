package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adhost/client"
	"adhost/runtime/protocol"
)

// approvalSite is the test site with both features on, conformance_lookup
// requiring approval, the dev token holding approve_tools and an
// application tool grant, and "mallory", another subject with the same
// grants.
func approvalSite(t *testing.T) (s *site, mallory string) {
	t.Helper()
	s = newSite(t)
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(doc), "version = 1\n", `version = 1

[approvals]
enabled = true
max_pending = 2

[application_tools]
enabled = true
require_approval = false
`, 1)
	text = strings.Replace(text, `names = ["conformance_lookup"]`+"\n", `names = ["conformance_lookup"]`+"\nrequires_approval = [\"conformance_lookup\"]\n", 1)
	grants := "[tokens.grants]\napprove_tools = [\"conformance_lookup\"]\napplication_tools = [{ name = \"lookup_ticket\", requires_approval = false }]\n"
	// The dev token is the document's last table.
	if err := os.WriteFile(s.config, []byte(text+"\n"+grants), 0o644); err != nil {
		t.Fatal(err)
	}
	mallory = addSiteToken(t, s, "mallory", "mallory", []string{"fixture"}, []string{lookupTool})
	appendSiteConfig(t, s, grants)
	return s, mallory
}

func gatedLookup(approvals json.RawMessage) *protocol.RunRequest {
	req := toolRun(lookupTool, `{"value":7}`)
	req.Approvals = approvals
	return req
}

// TestApprovalsOverTheWire drives both features through the real binary
// and the fixture's tool: input: discovery, approve, deny, another
// subject's decision, fail-closed without a policy, and an application
// tool answered by the test as the application.
func TestApprovalsOverTheWire(t *testing.T) {
	t.Parallel()
	s, mallory := approvalSite(t)
	srv := startServer(t, s)
	dev, other := newRunClient(t, srv, s.token), newRunClient(t, srv, mallory)

	info, err := dev.Protocol(t.Context())
	if err != nil || !info.HasFeature("interactive-approvals") || !info.HasFeature("application-tools") {
		t.Fatalf("protocol: %+v, %v", info, err)
	}

	decide := func(decision string) (*protocol.RunResult, []string, error) {
		var types []string
		res, err := dev.Stream(t.Context(), gatedLookup(client.Approvals("pause", 0)), func(ev client.Event) error {
			types = append(types, ev.Type)
			if ev.Approval == nil {
				return nil
			}
			if _, err := other.DecideApproval(t.Context(), ev.Approval, client.DecisionApprove); client.CodeOf(err) != protocol.CodeApprovalNotFound {
				t.Errorf("another subject's decision: %v", err)
			}
			_, err := dev.DecideApproval(t.Context(), ev.Approval, decision)
			return err
		})
		return res, types, err
	}
	res, types, err := decide(client.DecisionApprove)
	if err != nil || !strings.Contains(strings.Join(types, " "), "tool.called approval.requested approval.resolved tool.completed") {
		t.Fatalf("approve: %v, events %v", err, types)
	}
	if !strings.Contains(res.Text, "7") {
		t.Errorf("approve: text %q", res.Text)
	}
	if _, types, err = decide(client.DecisionDeny); client.CodeOf(err) != protocol.CodeApprovalDenied || strings.Contains(strings.Join(types, " "), "tool.completed") {
		t.Errorf("deny: %v, events %v", err, types)
	}
	if _, err := dev.Stream(t.Context(), gatedLookup(nil), func(client.Event) error { return nil }); client.CodeOf(err) != protocol.CodeApprovalRequired {
		t.Errorf("no approvals option: %v", err)
	}

	app := runRequest(`tool:lookup_ticket:{"id":"T-1"}`)
	app.Tools = []string{"lookup_ticket"}
	app.ApplicationTools = json.RawMessage(`[{"name":"lookup_ticket","description":"Looks a ticket up.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}]`)
	res, err = dev.Stream(t.Context(), app, func(ev client.Event) error {
		if ev.Execution == nil {
			return nil
		}
		if err := other.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{}`)); client.CodeOf(err) != protocol.CodeToolExecutionNotFound {
			t.Errorf("another subject's result: %v", err)
		}
		if err := dev.ReportToolProgress(t.Context(), ev.Execution.Identity()); err != nil {
			return err
		}
		return dev.SubmitToolResult(t.Context(), ev.Execution.Identity(), json.RawMessage(`{"status":"open","id":"T-1"}`))
	})
	if err != nil || !strings.Contains(res.Text, `"status":"open"`) {
		t.Errorf("application tool: %+v, %v", res, err)
	}
}

// TestCLIRunApprove: `adhost run --approve` shows the tool and its
// arguments and asks; y runs the tool, n (or end of input) denies it.
func TestCLIRunApprove(t *testing.T) {
	t.Parallel()
	s, _ := approvalSite(t)
	srv := startServer(t, s)
	tokenFile := filepath.Join(s.dir, "data", "dev.token")
	run := func(answer string) (int, string, string) {
		needBinary(t)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, adhostBin, "run", "--url", srv.URL, "--token-file", tokenFile,
			"--provider", fixtureProvider, "--model", fixtureModel, "--tool", lookupTool, "--approve",
			`tool:conformance_lookup:{"value":7}`)
		cmd.Stdin = strings.NewReader(answer)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	code, stdout, stderr := run("y\n")
	if code != 0 || !strings.Contains(stderr, `conformance_lookup with {"value":7}`) || !strings.Contains(stderr, "approve? [y/N]") ||
		!strings.Contains(stderr, "approved") || !strings.Contains(stdout, "7") {
		t.Errorf("y: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	for _, answer := range []string{"n\n", ""} {
		code, _, stderr = run(answer)
		if code == 0 || !strings.Contains(stderr, "APPROVAL_DENIED") {
			t.Errorf("%q: exit %d, stderr %q", answer, code, stderr)
		}
	}
}
