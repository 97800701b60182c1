package host

import (
	"net/http"
	"strconv"
	"testing"
)

// TestAuthenticatePicksItsToken: among many tokens each secret yields its
// own principal, and a secret that is not registered, or differs in one
// character, yields none.
func TestAuthenticatePicksItsToken(t *testing.T) {
	var tokens []Token
	for i := range 20 {
		tokens = append(tokens, Token{ID: "t" + strconv.Itoa(i), Subject: "s" + strconv.Itoa(i), Secret: "secret-" + strconv.Itoa(i)})
	}
	s := NewServer(ServerOptions{Tokens: tokens})
	auth := func(secret string) string {
		r := &http.Request{Header: http.Header{"Authorization": {"Bearer " + secret}}}
		if p := s.authenticate(r); p != nil {
			return p.TokenID
		}
		return ""
	}
	for _, tok := range tokens {
		if got := auth(tok.Secret); got != tok.ID {
			t.Errorf("secret %q authenticates as %q, want %q", tok.Secret, got, tok.ID)
		}
	}
	for _, bad := range []string{"secret-20", "secret-1x", "Secret-1", "secret-"} {
		if got := auth(bad); got != "" {
			t.Errorf("secret %q authenticates as %q", bad, got)
		}
	}
}
