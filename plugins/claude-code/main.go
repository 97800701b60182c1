// Command claude-code is the local Claude Code CLI adapter: one model turn
// is one headless run, `claude -p --output-format stream-json`, whose JSONL
// events it reads. The host runs the binary the provider instance is bound
// to, in the instance's account directory (the CLI's login lives there);
// the adapter only builds the command line and reads the output.
package main

import (
	"strconv"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

func main() {}

// version must equal manifests/claude-code.toml.
const version = "1.0.0"

// vendor prefixes private messages; binary is the manifest's binary id.
const (
	vendor = "claude-code"
	binary = "claude"
)

func init() {
	sdk.SetInfo("claude-code", version)
	sdk.RegisterProvider(provider{})
}

type provider struct{}

// settings are the instance's settings (manifests/claude-code.toml).
type settings struct {
	// MaxTurns bounds the CLI's own agentic turns (--max-turns).
	MaxTurns int `json:"maxTurns"`
}

func (provider) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	var s settings
	if err := c.DecodeConfig(&s); err != nil {
		return nil, sdk.Errorf(sdk.CodeInternalError, "%s: settings do not decode", vendor)
	}
	if !cliturn.SafeModel(in.Model) {
		return nil, sdk.Errorf(sdk.CodeInternalError, "%s: model id not usable as an argument", vendor)
	}
	stream := !in.Buffered
	return cliturn.Run(c, cliturn.Spec{
		Vendor: vendor,
		Binary: binary,
		Args:   args(in.Model, s, stream),
		Stdin:  []byte(cliturn.Prompt(in)),
	}, newTurn(c, stream))
}

// args is the command line of one turn. The prompt comes on stdin (-p
// without a value reads it there). stream-json needs --verbose in print
// mode; --include-partial-messages adds the token deltas (stream_event).
func args(model string, s settings, stream bool) []string {
	a := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", model}
	if stream {
		a = append(a, "--include-partial-messages")
	}
	if s.MaxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(s.MaxTurns))
	}
	return a
}
