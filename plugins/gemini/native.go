package main

import (
	"encoding/json"
)

// nativeDoc is the adapter's private continuation state
// (CompleteOutput.Native): the thought signatures Gemini attached to the
// function calls of earlier turns, by call id. Thinking models need them back
// on those calls (https://ai.google.dev/gemini-api/docs/thought-signatures);
// applications never see this state. When a host does not hand it back, the
// adapter falls back to the documented placeholder signature.
type nativeDoc struct {
	ThoughtSignatures map[string]string `json:"thoughtSignatures,omitempty"`
}

// Bounds of the native state, so a long run cannot grow it without limit
// (the whole turn result is bounded to 2,000,000 bytes).
const (
	maxNativeSignatures = 256
	maxNativeBytes      = 512 << 10
)

// readNative returns the signatures of an input's native state (none when
// absent or not this adapter's shape).
func readNative(raw json.RawMessage) map[string]string {
	if len(raw) == 0 {
		return nil
	}
	var d nativeDoc
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return d.ThoughtSignatures
}

// nativeState renders the signatures as native state, or nil when there are
// none or they exceed the bounds (then the placeholder is used instead).
func nativeState(sigs map[string]string) json.RawMessage {
	if len(sigs) == 0 || len(sigs) > maxNativeSignatures {
		return nil
	}
	b, err := json.Marshal(nativeDoc{ThoughtSignatures: sigs})
	if err != nil || len(b) > maxNativeBytes {
		return nil
	}
	return b
}
