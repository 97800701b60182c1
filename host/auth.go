package host

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"adhost/runtime"
)

// Token is one static bearer token (host.toml [[tokens]]) with its grants.
type Token struct {
	// ID names the token in logs and usage; it is not secret.
	ID string
	// Subject is the authenticated identity: admission limits and usage
	// records are per subject, and tokens may share one.
	Subject string
	// Secret is the bearer value. Only its SHA-256 digest is kept.
	Secret string
	// Providers and Tools are the granted provider instance ids and host
	// tool names; omitted grants deny.
	Providers, Tools []string
	// Ops are the feature operation grants, "feature.op"
	// (runtime.Principal.Ops): from [tokens.grants] sessions and jobs.
	Ops []string
	// ApproveTools and AppTools are [tokens.grants] approve_tools and
	// application_tools (runtime.Principal.ApproveTools and
	// .ApplicationTools: name → its calls still need review).
	ApproveTools []string
	AppTools     map[string]bool
}

// maxBearerLen bounds the presented bearer (wire-core §11.1, newer
// revisions: 1..4,096 characters).
const maxBearerLen = 4096

type tokenEntry struct {
	digest    [sha256.Size]byte
	principal *runtime.Principal
}

func newTokenEntries(tokens []Token) []tokenEntry {
	out := make([]tokenEntry, 0, len(tokens))
	for _, t := range tokens {
		d := sha256.Sum256([]byte(t.Secret))
		p := &runtime.Principal{
			TokenID:          t.ID,
			Subject:          t.Subject,
			Providers:        make(map[string]bool, len(t.Providers)),
			Tools:            make(map[string]bool, len(t.Tools)),
			Ops:              make(map[string]bool, len(t.Ops)),
			CredentialDigest: hex.EncodeToString(d[:]),
		}
		for _, op := range t.Ops {
			p.Ops[op] = true
		}
		p.ApproveTools = make(map[string]bool, len(t.ApproveTools))
		for _, name := range t.ApproveTools {
			p.ApproveTools[name] = true
		}
		p.ApplicationTools = make(map[string]bool, len(t.AppTools))
		for name, review := range t.AppTools {
			p.ApplicationTools[name] = review
		}
		for _, id := range t.Providers {
			p.Providers[id] = true
		}
		for _, name := range t.Tools {
			p.Tools[name] = true
		}
		out = append(out, tokenEntry{digest: d, principal: p})
	}
	return out
}

// authenticate returns the principal of the request's bearer token, or nil.
//
// The header must be exactly one "Bearer <token>" line: prefix
// case-sensitive with one space, token 1..4,096 bytes without whitespace or
// NUL. The presented token is hashed and compared with every registered
// digest in constant time, without stopping at a match, so neither the
// comparison nor the position of the matching entry leaks through timing.
func (s *Server) authenticate(r *http.Request) *runtime.Principal {
	vals := r.Header["Authorization"]
	if len(vals) != 1 {
		return nil
	}
	const prefix = "Bearer "
	v := vals[0]
	if !strings.HasPrefix(v, prefix) {
		return nil
	}
	tok := v[len(prefix):]
	if tok == "" || len(tok) > maxBearerLen || strings.ContainsAny(tok, " \t\r\n\v\f\x00\u0085\u00a0") {
		return nil
	}
	d := sha256.Sum256([]byte(tok))
	var found *runtime.Principal
	tokens := s.live.Load().tokens
	for i := range tokens {
		if subtle.ConstantTimeCompare(d[:], tokens[i].digest[:]) == 1 && found == nil {
			found = tokens[i].principal
		}
	}
	return found
}
