// Command codex is the local Codex CLI adapter: one model turn is one
// `codex exec --json` run, whose JSONL thread events it reads. The host
// runs the binary the provider instance is bound to, in the instance's
// account directory (CODEX_HOME defaults to ~/.codex, so the CLI's login
// lives there); the adapter builds the command line and reads the events.
package main

import (
	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

func main() {}

// version must equal manifests/codex.toml.
const version = "1.0.0"

const (
	vendor = "codex"
	binary = "codex"
)

func init() {
	sdk.SetInfo("codex", version)
	sdk.RegisterProvider(provider{})
}

type provider struct{}

func (provider) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	if !cliturn.SafeModel(in.Model) {
		return nil, sdk.Errorf(sdk.CodeInternalError, "%s: model id not usable as an argument", vendor)
	}
	return cliturn.Run(c, cliturn.Spec{
		Vendor: vendor,
		Binary: binary,
		Args:   args(in.Model),
		Stdin:  []byte(cliturn.Prompt(in)),
	}, &turn{c: c})
}

// args is the command line of one turn: JSONL events on stdout, no git
// repository required (the account directory is none), no session files
// kept (--ephemeral), the CLI's own sandbox read-only, the prompt from
// stdin ("-").
func args(model string) []string {
	return []string{"exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only", "--model", model, "-"}
}
