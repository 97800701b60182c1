// Command gemini-cli is the local Gemini CLI adapter: one model turn is
// one headless run, `gemini --output-format stream-json`, whose JSONL
// events it reads. The host runs the binary the provider instance is
// bound to, in the instance's account directory (~/.gemini, with the
// CLI's login, lives there); the adapter builds the command line and reads
// the events.
//
// The prompt goes on stdin, not in -p: headless mode is what the CLI runs
// when stdin is not a terminal, and -p's value would sit in the argument
// vector, readable by every user of the machine.
package main

import (
	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/cliturn"
)

func main() {}

// version must equal manifests/gemini-cli.toml.
const version = "1.0.0"

const (
	vendor = "gemini-cli"
	binary = "gemini"
)

func init() {
	sdk.SetInfo("gemini-cli", version)
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
		Args:   []string{"--output-format", "stream-json", "--model", in.Model},
		Stdin:  []byte(cliturn.Prompt(in)),
	}, &turn{c: c, text: cliturn.NewText(c, !in.Buffered)})
}
