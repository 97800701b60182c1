package wasm

import (
	"context"
	"encoding/json"
	"fmt"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// Embedder is an embedder extension bound to one embedding instance
// (host.toml [[retrieval.embedders]]). It is safe for concurrent use;
// each call takes a pooled instance like a provider turn does.
//
// It returns the guest's vectors as they came: checking their count,
// dimensions and values against the corpus is the retrieval feature's
// job (runtime/retrieval), which knows the corpus's identity.
type Embedder struct{ *binding }

// codeEmbeddingFailed is the result-contract code of an embedder
// (wire-extensions §6.6): a result that does not decode.
const codeEmbeddingFailed protocol.Code = "EMBEDDING_FAILED"

// Embedder binds an embedder extension to an embedding instance.
func (x *Extension) Embedder(ic InstanceConfig) (*Embedder, error) {
	if x.m.Kind != abi.KindEmbedder {
		return nil, fmt.Errorf("extension %s: %w: kind is %s, not embedder", x.pin, ErrKindMismatch, x.m.Kind)
	}
	b, err := x.bind(ic)
	if err != nil {
		return nil, err
	}
	return &Embedder{b}, nil
}

// Embed runs one OpEmbed call. The error is a *protocol.Error with the
// provider codes of guestError (RATE_LIMITED, PROVIDER_AUTH, …), which
// the caller maps to its own vocabulary.
func (e *Embedder) Embed(ctx context.Context, model string, inputs []string) ([][]float32, *abi.Usage, error) {
	input, err := json.Marshal(abi.EmbedInput{Model: model, Inputs: inputs})
	if err != nil {
		return nil, nil, protocol.Wrap(protocol.CodeInternalError, err)
	}
	out, err := e.call(ctx, &callState{op: abi.OpEmbed, input: input}, codeEmbeddingFailed)
	if err != nil {
		return nil, nil, err
	}
	eo, err := decodeEmbedOutput(out)
	if err != nil {
		e.x.log.Warn("extension returned an invalid result", "instance", e.id, "op", abi.OpEmbed.String(), "reason", "embed output does not decode")
		return nil, nil, protocol.Wrap(codeEmbeddingFailed, fmt.Errorf("extension %s: op embed: output does not decode", e.x.pin))
	}
	return eo.Vectors, eo.Usage, nil
}
