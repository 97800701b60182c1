package config

import (
	"strings"
	"testing"
)

// ctxDoc is a file with one provider (models m and n) and the given
// provider lines and trailing tables.
func ctxDoc(providerLines, tail string) string {
	return `version = 1

[[extensions]]
id = "fixture"
version = "1.0.0"
module = "fixture.wasm"
sha256 = "` + strings.Repeat("a", 64) + `"

[[providers]]
id = "p"
extension = "fixture@1.0.0"
account_id = "acct-1"
models = ["m", "n"]
` + providerLines + `

[[tokens]]
id = "t"
subject = "alice"
secret = { env = "T" }
providers = ["p"]
` + tail
}

func TestContextKeys(t *testing.T) {
	f, err := decodeValidate(t, ctxDoc("", ""))
	if err != nil {
		t.Fatal(err)
	}
	if b, tb := f.ContextBudgets(); b != DefaultContextMaxBytes || tb != DefaultContextMaxTextBytes {
		t.Errorf("defaults %d %d", b, tb)
	}
	f, err = decodeValidate(t, ctxDoc(`input_media_types = { "m" = ["image/png", "text/plain", "application/pdf", "image/jpeg", "image/webp", "text/markdown"] }`,
		"[context]\nmax_bytes = 33554432\nmax_text_bytes = 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, tb := f.ContextBudgets(); b != MaxContextMaxBytes || tb != 1 {
		t.Errorf("budgets %d %d", b, tb)
	}
	for _, tc := range []struct{ lines, tail, want string }{
		{"", "[context]\nmax_bytes = 33554433\n", "context.max_bytes: 33554433 out of range"},
		{"", "[context]\nmax_bytes = 0\n", "context.max_bytes: 0 out of range"},
		{"", "[context]\nmax_text_bytes = 1000001\n", "context.max_text_bytes"},
		{`input_media_types = { "x" = ["image/png"] }`, "", `input_media_types.x: "x" is not in providers[0].models`},
		{`input_media_types = { "m" = ["image/gif"] }`, "", `"image/gif" is not one of`},
		{`input_media_types = { "m" = ["image/png", "image/png"] }`, "", "listed twice"},
	} {
		_, err := decodeValidate(t, ctxDoc(tc.lines, tc.tail))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "host.toml:") {
			t.Errorf("%s %s: %v, want %q with a line", tc.lines, tc.tail, err, tc.want)
		}
	}
}
