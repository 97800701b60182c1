// Package sourceuri holds the rules of a context source's uri
// (wire-context §2.1, §3.2 step 4, §12) in one place, for the host's
// attachments and retrieval and for the Go client, which checks the same
// rules on result.sources. It uses the standard library only, so the
// client can import it without the host.
package sourceuri

import (
	"net/url"
	"strings"
)

// IsJSSpace is JavaScript's \s, which is also the set String.prototype.trim
// removes: the ASCII whitespace, NBSP, the Unicode space separators, the
// line and paragraph separators and the BOM. Go's unicode.IsSpace differs
// (it has U+0085 and lacks U+FEFF), and a regexp's \s is ASCII only.
func IsJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// Schema is the schema pattern ^(https|app)://[^\s]+$ with JavaScript's
// \s: a failure is a schema error (INVALID_REQUEST for an attachment).
func Schema(s string) bool {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "app://"); !ok {
			return false
		}
	}
	return rest != "" && strings.IndexFunc(rest, IsJSSpace) < 0
}

// Plain is §3.2 step 4: the uri parses as an absolute URL and names no
// user or password (https://@host has neither and passes). A failure is
// semantic (INVALID_CONTEXT for an attachment).
func Plain(s string) bool {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return false
	}
	if u.User != nil {
		if pw, _ := u.User.Password(); u.User.Username() != "" || pw != "" {
			return false
		}
	}
	return true
}
