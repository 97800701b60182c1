package config

import (
	"strings"
	"testing"
)

// TestToolSettings: the http_fetch allowlist is checked at load, each
// problem named by key path and line.
func TestToolSettings(t *testing.T) {
	doc := func(origins string) string {
		return `version = 1

[[extensions]]
id = "http-fetch"
version = "1.0.0"
module = "f.wasm"
sha256 = "` + strings.Repeat("a", 64) + `"

[[tools]]
extension = "http-fetch@1.0.0"
names = ["http_fetch"]
settings = { allow_origins = ` + origins + ` }
`
	}
	for _, ok := range []string{`[]`, `["https://example.com", "http://127.0.0.1:8080", "https://example.com:8443"]`} {
		f, err := Decode([]byte(doc(ok)), "/srv/host.toml")
		if err == nil {
			err = f.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for origins, want := range map[string]string{
		`"https://example.com"`:        "host.toml:12: tools[0].settings.allow_origins: must be a list",
		`["https://example.com/path"]`: "tools[0].settings.allow_origins[0]: \"https://example.com/path\"",
		`["http://example.com"]`:       "http is allowed only for loopback hosts",
		`["HTTPS://EXAMPLE.com"]`:      "must be written exactly",
		`[1]`:                          "tools[0].settings.allow_origins[0]: must be a string",
		`["https://a.example", "https://a.example:443"]`: `tools[0].settings.allow_origins[1]: duplicate origin "https://a.example:443"`,
	} {
		f, err := Decode([]byte(doc(origins)), "/srv/host.toml")
		if err == nil {
			err = f.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", origins, err, want)
		}
	}
}
