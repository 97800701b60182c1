package attachments

import (
	"bytes"
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"adhost/runtime/attachments/sourceuri"
	"adhost/runtime/protocol"
)

// Codes of wire-context §10 (not retryable; statuses fall through to 502
// in runtime/protocol, as upstream's do).
const (
	CodeInvalidContext      protocol.Code = "INVALID_CONTEXT"
	CodeContextTooLarge     protocol.Code = "CONTEXT_TOO_LARGE"
	CodeContextUnavailable  protocol.Code = "CONTEXT_UNAVAILABLE"
	CodeUnsupportedModality protocol.Code = "UNSUPPORTED_MODALITY"
	CodeInvalidArtifact     protocol.Code = "INVALID_ARTIFACT"
	CodeArtifactTooLarge    protocol.Code = "ARTIFACT_TOO_LARGE"
	CodeContextNotFound     protocol.Code = "CONTEXT_NOT_FOUND"
	CodeContextChanged      protocol.Code = "CONTEXT_CHANGED"
	CodeContextExpired      protocol.Code = "CONTEXT_EXPIRED"
)

// messages are the fixed public messages of the codes above.
var messages = map[protocol.Code]string{
	CodeInvalidContext:      "An attachment is invalid: duplicate source id, inconsistent location, bad URI, encoding or file signature.",
	CodeContextTooLarge:     "The attached context exceeds its byte budget.",
	CodeContextUnavailable:  "Referenced context cannot be resolved by this host.",
	CodeUnsupportedModality: "An attachment's media type is not enabled for the selected model.",
	CodeInvalidArtifact:     "The output artifact request is invalid.",
	CodeArtifactTooLarge:    "The draft artifact exceeds 262,144 bytes.",
	CodeContextNotFound:     "Referenced context was not found.",
	CodeContextChanged:      "Referenced context changed since it was referenced.",
	CodeContextExpired:      "Referenced context has expired.",
}

// fail is the public error of code; the context codes are never retryable.
func fail(code protocol.Code) *protocol.Error {
	return &protocol.Error{Code: code, Message: messages[code]}
}

// Inline budgets of wire-context §3.2.
const (
	MaxInlineItemBytes  = 262_144
	MaxInlineTotalBytes = 524_288
	// MaxArtifactBytes bounds a draft artifact's UTF-8 content (§9).
	MaxArtifactBytes = 262_144
)

// Preflight is the inline preflight of wire-context §3.2 over the whole
// list: unique ids, location and URI rules, and the per-item and total
// budgets of inline content with its base64 and signature checks. It
// returns the decoded binaries by item index (nil for text and references).
func Preflight(items []Item) ([][]byte, error) {
	seen := make(map[string]bool, len(items))
	bins := make([][]byte, len(items))
	total := 0
	for i := range items {
		it := &items[i]
		id := it.ID
		if it.Type != "reference" {
			id = it.Source.ID
		}
		if seen[id] {
			return nil, fail(CodeInvalidContext)
		}
		seen[id] = true
		if it.Type == "reference" {
			continue
		}
		if err := checkSource(&it.Source); err != nil {
			return nil, err
		}
		n, bin, err := content(it, MaxInlineItemBytes)
		if err != nil {
			return nil, err
		}
		bins[i] = bin
		total += n
		if total > MaxInlineTotalBytes {
			return nil, fail(CodeContextTooLarge)
		}
	}
	return bins, nil
}

// content checks one inline item's content against limit L and returns
// its decoded size (and bytes, for binaries).
func content(it *Item, limit int) (int, []byte, error) {
	if it.Type == "text" {
		if len(it.Text) > limit {
			return 0, nil, fail(CodeContextTooLarge)
		}
		return len(it.Text), nil, nil
	}
	bin, err := DecodeBase64(it.Data, limit)
	if err != nil {
		return 0, nil, err
	}
	if !Signed(it.MediaType, bin) {
		return 0, nil, fail(CodeInvalidContext)
	}
	return len(bin), bin, nil
}

// checkSource is steps 3–4 of §3.2: location consistency and URI rules.
func checkSource(s *Source) error {
	if l := s.Location; l != nil {
		if l.PageEnd != nil && (l.Page == nil || *l.PageEnd < *l.Page) {
			return fail(CodeInvalidContext)
		}
		if l.EndLine != nil && (l.StartLine == nil || *l.EndLine < *l.StartLine) {
			return fail(CodeInvalidContext)
		}
	}
	if s.URI != nil && !sourceuri.Plain(*s.URI) {
		return fail(CodeInvalidContext)
	}
	return nil
}

// DecodeBase64 decodes data by the rules of wire-context §3.3 with limit
// L: a length bound first, then canonical framing (standard alphabet,
// padding only at the end, no whitespace — encoding/base64 alone would
// skip line breaks), then the decoded bound, then canonical padding bits.
func DecodeBase64(data string, limit int) ([]byte, error) {
	if len(data) > (limit+2)/3*4 {
		return nil, fail(CodeContextTooLarge)
	}
	if len(data)%4 != 0 {
		return nil, fail(CodeInvalidContext)
	}
	pad := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			if pad > 0 {
				return nil, fail(CodeInvalidContext)
			}
		case c == '=' && i >= len(data)-2:
			pad++
		default:
			return nil, fail(CodeInvalidContext)
		}
	}
	if len(data) > 0 && (len(data)/4*3-pad) > limit {
		return nil, fail(CodeContextTooLarge)
	}
	bin, err := base64.StdEncoding.Strict().DecodeString(data)
	if err != nil || len(bin) == 0 || base64.StdEncoding.EncodeToString(bin) != data {
		return nil, fail(CodeInvalidContext)
	}
	return bin, nil
}

// Signed reports whether bin starts with the signature of mediaType
// (wire-context §3.3.1). Nothing beyond the prefix is examined.
func Signed(mediaType string, bin []byte) bool {
	switch mediaType {
	case TypePNG:
		return bytes.HasPrefix(bin, []byte("\x89PNG\r\n\x1a\n"))
	case TypeJPEG:
		return bytes.HasPrefix(bin, []byte{0xFF, 0xD8, 0xFF})
	case TypeWEBP:
		return len(bin) >= 12 && string(bin[:4]) == "RIFF" && string(bin[8:12]) == "WEBP"
	case TypePDF:
		return bytes.HasPrefix(bin, []byte("%PDF-"))
	}
	return false
}

// Sniff names the media type of file content by its signature, text for
// valid UTF-8 and "" otherwise (the CLI's --attach: content, not name).
func Sniff(b []byte) string {
	for _, t := range []string{TypePNG, TypeJPEG, TypeWEBP, TypePDF} {
		if Signed(t, b) {
			return t
		}
	}
	if len(b) > 0 && utf8.Valid(b) {
		return TypePlain
	}
	return ""
}

// Enabled is the modality rule of §3.4: text is always accepted, any
// other type only when the model's inputMediaTypes entry lists it.
func Enabled(mediaType string, modelTypes []string) bool {
	if strings.HasPrefix(mediaType, "text/") {
		return true
	}
	for _, t := range modelTypes {
		if t == mediaType {
			return true
		}
	}
	return false
}
