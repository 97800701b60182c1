package manifest

import (
	"bytes"
	"errors"
	"fmt"

	"adhost/abi"
)

// Errors of Embed and Extract.
var (
	ErrNotWasm         = errors.New("manifest: not a wasm module (bad header)")
	ErrMalformedModule = errors.New("manifest: malformed wasm section structure")
	ErrNoManifest      = errors.New("manifest: module has no " + abi.CustomSectionManifest + " section")
	ErrDuplicate       = errors.New("manifest: module has more than one " + abi.CustomSectionManifest + " section")
	ErrAlreadyEmbedded = errors.New("manifest: module already has an " + abi.CustomSectionManifest + " section")
)

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Embed returns wasm with manifestTOML appended as the custom section
// abi.CustomSectionManifest. It refuses a module that is not wasm, is
// structurally malformed, or already has the section. The output is a
// deterministic function of the inputs.
func Embed(wasm, manifestTOML []byte) ([]byte, error) {
	if _, found, err := scan(wasm); err != nil {
		return nil, err
	} else if found {
		return nil, ErrAlreadyEmbedded
	}
	name := abi.CustomSectionManifest
	var payload []byte
	payload = appendULEB(payload, uint64(len(name)))
	payload = append(payload, name...)
	payload = append(payload, manifestTOML...)
	if uint64(len(payload)) > 0xffffffff {
		return nil, errors.New("manifest: too large")
	}
	out := make([]byte, 0, len(wasm)+len(payload)+6)
	out = append(out, wasm...)
	out = append(out, 0) // custom section id
	out = appendULEB(out, uint64(len(payload)))
	return append(out, payload...), nil
}

// Extract returns the content of the module's abi.CustomSectionManifest
// section. It walks the sections of untrusted input safely: any truncation,
// overlong LEB128 or out-of-range length is ErrMalformedModule, and two
// manifest sections are ErrDuplicate (which one would count is ambiguous).
func Extract(wasm []byte) ([]byte, error) {
	content, found, err := scan(wasm)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNoManifest
	}
	return content, nil
}

// scan validates the header and the section framing and returns the
// manifest section's content when present.
func scan(wasm []byte) (content []byte, found bool, err error) {
	if len(wasm) < len(wasmHeader) || !bytes.Equal(wasm[:len(wasmHeader)], wasmHeader) {
		return nil, false, ErrNotWasm
	}
	p := wasm[len(wasmHeader):]
	for len(p) > 0 {
		id := p[0]
		p = p[1:]
		size, n, err := readULEB32(p)
		if err != nil {
			return nil, false, err
		}
		p = p[n:]
		if uint64(size) > uint64(len(p)) {
			return nil, false, fmt.Errorf("%w: section %d overruns the module", ErrMalformedModule, id)
		}
		sec := p[:size]
		p = p[size:]
		if id != 0 {
			if id > 13 {
				return nil, false, fmt.Errorf("%w: unknown section id %d", ErrMalformedModule, id)
			}
			continue
		}
		nameLen, n, err := readULEB32(sec)
		if err != nil {
			return nil, false, err
		}
		sec = sec[n:]
		if uint64(nameLen) > uint64(len(sec)) {
			return nil, false, fmt.Errorf("%w: custom section name overruns its section", ErrMalformedModule)
		}
		if string(sec[:nameLen]) != abi.CustomSectionManifest {
			continue
		}
		if found {
			return nil, false, ErrDuplicate
		}
		found = true
		content = sec[nameLen:]
	}
	return content, found, nil
}

// readULEB32 decodes an unsigned LEB128 value of at most 32 bits (5 bytes),
// refusing overlong encodings and truncation.
func readULEB32(p []byte) (uint32, int, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		if i >= len(p) {
			return 0, 0, fmt.Errorf("%w: truncated LEB128", ErrMalformedModule)
		}
		b := p[i]
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if i == 4 && b > 0x0f {
				return 0, 0, fmt.Errorf("%w: LEB128 overflows 32 bits", ErrMalformedModule)
			}
			return uint32(v), i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: LEB128 longer than 5 bytes", ErrMalformedModule)
}

func appendULEB(dst []byte, v uint64) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			dst = append(dst, b|0x80)
			continue
		}
		return append(dst, b)
	}
}
