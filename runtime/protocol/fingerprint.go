package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Fingerprint is the request fingerprint of durable jobs (wire-extensions
// §2.2) and idempotency keys (wire-core §15.1): the SHA-256, in lowercase
// hex, of a canonical JSON form of the validated request. Canonical means:
// object members sorted by key at every depth (so a client's key order
// never matters), absent fields dropped, array order kept, strings and
// numbers as their JSON values (a number keeps its literal spelling:
// "1.0" and "1" are different requests, which errs on the side of a
// conflict rather than a wrong replay). Every field counts — provider,
// model, input, metadata, retry, the key itself — so any changed value
// makes a different fingerprint.
func Fingerprint(req *RunRequest) (string, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	canon, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Canonical returns the canonical JSON form of one JSON value (see
// Fingerprint): objects with sorted keys, no insignificant whitespace,
// numbers as written.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical json: trailing data")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted, and json.Number as written.
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
