package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const validProvider = `
id = "fixture"
name = "Fixture provider"
version = "1.0.0"
kind = "provider"
contractVersion = "1.0"
vendor = "adhost"
authMode = "api-key"
usageSource = "adapter-report"
inspect = true

[capabilities]
tools = true
textStreaming = true

[network]
origins = ["https://api.example.com", "http://127.0.0.1:8080"]
endpointSetting = "endpoint"
headers = { "anthropic-version" = "2023-06-01" }

[[credentials]]
name = "api_key"
header = "Authorization"
prefix = "Bearer "

[settings]
schema = '''{"type":"object","properties":{"endpoint":{"type":"string"}},"additionalProperties":false}'''

[limits]
memoryMiB = 128
computeMs = 500
poolSize = 2
`

const minimalTool = `
id = "calc"
name = "Calculator"
version = "0.1.0-rc.1+b5"
kind = "tool"
contractVersion = "1.0"
`

func TestParseValid(t *testing.T) {
	m, err := Parse([]byte(validProvider))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if m.ID != "fixture" || m.Version != "1.0.0" || m.Kind != "provider" || !m.Inspect {
		t.Errorf("decoded %+v", m)
	}
	if got := m.Origins(); len(got) != 2 || got[0] != "https://api.example.com:443" || got[1] != "http://127.0.0.1:8080" {
		t.Errorf("Origins() = %v", got)
	}
	if m.EndpointSetting() != "endpoint" || !m.HasNetwork() || !m.Capability("tools") {
		t.Errorf("network/capabilities not decoded: %+v", m.Network)
	}
	if m.Limits != (Limits{MemoryMiB: 128, ComputeMs: 500, PoolSize: 2}) {
		t.Errorf("Limits = %+v", m.Limits)
	}
	if len(m.Credentials) != 1 || m.Credentials[0].Prefix != "Bearer " {
		t.Errorf("Credentials = %+v", m.Credentials)
	}
}

func TestDefaults(t *testing.T) {
	m, err := Parse([]byte(minimalTool))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Limits{MemoryMiB: DefaultMemoryMiB, ComputeMs: DefaultComputeMs, PoolSize: DefaultPoolSize}
	if m.Limits != want {
		t.Errorf("Limits = %+v, want %+v", m.Limits, want)
	}
	if m.HasNetwork() {
		t.Error("HasNetwork() = true without [network]")
	}
	// No settings schema: only {} is valid.
	if err := m.ValidateSettings(nil); err != nil {
		t.Errorf("ValidateSettings(nil) = %v", err)
	}
	if err := m.ValidateSettings(json.RawMessage(`{"x":1}`)); err == nil {
		t.Error("ValidateSettings accepted a setting the extension does not declare")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(string) string
		wantSub string
	}{
		{"unknown key", func(s string) string { return s + "\nbogus = 1\n" }, `line 34: unknown key "limits.bogus"`},
		{"unknown nested key", func(s string) string { return strings.Replace(s, "poolSize = 2", "poolSize = 2\nthreads = 3", 1) }, `unknown key "limits.threads"`},
		{"syntax error has line", func(s string) string { return strings.Replace(s, `kind = "provider"`, `kind = `, 1) }, "line 5"},
		{"wrong type", func(s string) string { return strings.Replace(s, "tools = true", `tools = "yes"`, 1) }, "line"},
		{"bad id", func(s string) string { return strings.Replace(s, `id = "fixture"`, `id = "-bad"`, 1) }, "manifest: id:"},
		{"long id", func(s string) string {
			return strings.Replace(s, `id = "fixture"`, `id = "`+strings.Repeat("a", 81)+`"`, 1)
		}, "manifest: id:"},
		{"empty name", func(s string) string { return strings.Replace(s, `name = "Fixture provider"`, `name = ""`, 1) }, "manifest: name:"},
		{"bad semver", func(s string) string { return strings.Replace(s, `version = "1.0.0"`, `version = "1.0"`, 1) }, "manifest: version:"},
		{"leading zero semver", func(s string) string { return strings.Replace(s, `version = "1.0.0"`, `version = "01.0.0"`, 1) }, "manifest: version:"},
		{"bad kind", func(s string) string { return strings.Replace(s, `kind = "provider"`, `kind = "model"`, 1) }, "manifest: kind:"},
		{"contract", func(s string) string {
			return strings.Replace(s, `contractVersion = "1.0"`, `contractVersion = "2.0"`, 1)
		}, "manifest: contractVersion:"},
		{"vendor", func(s string) string { return strings.Replace(s, `vendor = "adhost"`, `vendor = ""`, 1) }, "manifest: vendor:"},
		{"authMode", func(s string) string { return strings.Replace(s, `authMode = "api-key"`, `authMode = "oauth"`, 1) }, "manifest: authMode:"},
		{"usageSource", func(s string) string {
			return strings.Replace(s, `usageSource = "adapter-report"`, `usageSource = "guess"`, 1)
		}, "manifest: usageSource:"},
		{"missing textStreaming", func(s string) string { return strings.Replace(s, "textStreaming = true\n", "", 1) }, "capabilities.textStreaming"},
		{"missing tools", func(s string) string { return strings.Replace(s, "tools = true\n", "", 1) }, "capabilities.tools"},
		{"http non-loopback", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "http://api.example.com", 1)
		}, "network.origins[0]"},
		{"origin with path", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://api.example.com/v1", 1)
		}, "network.origins[0]"},
		{"origin with slash", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://api.example.com/", 1)
		}, "network.origins[0]"},
		{"origin with query", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://api.example.com?a", 1)
		}, "network.origins[0]"},
		{"origin with user", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://u:p@api.example.com", 1)
		}, "network.origins[0]"},
		{"origin upper case", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://API.example.com", 1)
		}, "network.origins[0]"},
		{"origin ftp", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "ftp://api.example.com", 1)
		}, "network.origins[0]"},
		{"origin bad port", func(s string) string {
			return strings.Replace(s, "https://api.example.com", "https://api.example.com:99999", 1)
		}, "network.origins[0]"},
		{"duplicate origin", func(s string) string {
			return strings.Replace(s, `"http://127.0.0.1:8080"`, `"https://api.example.com:443"`, 1)
		}, "duplicate origin"},
		{"static auth header", func(s string) string {
			return strings.Replace(s, `"anthropic-version" = "2023-06-01"`, `"Authorization" = "x"`, 1)
		}, "managed by the host"},
		{"bad header value", func(s string) string { return strings.Replace(s, `"2023-06-01"`, `"a\nb"`, 1) }, "invalid header value"},
		{"bad credential header", func(s string) string {
			return strings.Replace(s, `header = "Authorization"`, `header = "Bad Header"`, 1)
		}, "credentials[0].header"},
		{"duplicate slot", func(s string) string {
			return s + "\n[[credentials]]\nname = \"api_key\"\nheader = \"x-other\"\n"
		}, "duplicate slot"},
		{"duplicate credential header", func(s string) string {
			return s + "\n[[credentials]]\nname = \"other\"\nheader = \"authorization\"\n"
		}, "duplicate header"},
		{"credentials without network", func(s string) string {
			i := strings.Index(s, "[network]")
			j := strings.Index(s, "[[credentials]]")
			return s[:i] + s[j:]
		}, "credentials need a [network]"},
		{"schema not object", func(s string) string {
			return strings.Replace(s, `'''{"type":"object","properties":{"endpoint":{"type":"string"}},"additionalProperties":false}'''`, `'[1]'`, 1)
		}, "must be a JSON object"},
		{"schema invalid", func(s string) string {
			return strings.Replace(s, `'''{"type":"object","properties":{"endpoint":{"type":"string"}},"additionalProperties":false}'''`, `'{"type":12}'`, 1)
		}, "not a valid JSON Schema"},
		{"schema external ref", func(s string) string {
			return strings.Replace(s, `'''{"type":"object","properties":{"endpoint":{"type":"string"}},"additionalProperties":false}'''`, `'{"$ref":"file:///etc/passwd"}'`, 1)
		}, "external $ref refused"},
		{"schema http ref", func(s string) string {
			return strings.Replace(s, `'''{"type":"object","properties":{"endpoint":{"type":"string"}},"additionalProperties":false}'''`, `'{"$ref":"https://example.com/s.json"}'`, 1)
		}, "external $ref refused"},
		{"schema old draft", func(s string) string {
			return strings.Replace(s, `'''{"type":"object",`, `'''{"$schema":"http://json-schema.org/draft-04/schema#","type":"object",`, 1)
		}, "not draft-07 or 2020-12"},
		{"memory too big", func(s string) string { return strings.Replace(s, "memoryMiB = 128", "memoryMiB = 2048", 1) }, "limits.memoryMiB"},
		{"memory negative", func(s string) string { return strings.Replace(s, "memoryMiB = 128", "memoryMiB = -1", 1) }, "limits.memoryMiB"},
		{"pool too big", func(s string) string { return strings.Replace(s, "poolSize = 2", "poolSize = 65", 1) }, "limits.poolSize"},
		{"compute negative", func(s string) string { return strings.Replace(s, "computeMs = 500", "computeMs = -5", 1) }, "limits.computeMs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.edit(validProvider)))
			if err == nil {
				t.Fatal("Parse succeeded, want error")
			}
			if !strings.Contains(err.Error(), tc.wantSub) {
				t.Errorf("Parse error = %q, want it to contain %q", err, tc.wantSub)
			}
		})
	}
}

func TestToolWithProviderFields(t *testing.T) {
	_, err := Parse([]byte(minimalTool + "inspect = true\n"))
	if err == nil || !strings.Contains(err.Error(), "inspect") {
		t.Errorf("tool with inspect: err = %v", err)
	}
}

func TestValidateSettings(t *testing.T) {
	m, err := Parse([]byte(validProvider))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{``, true},
		{`{"endpoint":"https://x"}`, true},
		{`{"endpoint":1}`, false},
		{`{"other":"secret-value"}`, false},
		{`[]`, false},
		{`{`, false},
	} {
		err := m.ValidateSettings(json.RawMessage(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSettings(%s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("error echoes a setting value: %v", err)
		}
	}
}

func TestCanonicalOrigin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://a.example", "https://a.example:443"},
		{"https://a.example:8443", "https://a.example:8443"},
		{"http://localhost:11434", "http://localhost:11434"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://127.0.0.2", "http://127.0.0.2:80"},
		{"http://example.com", ""},
		{"https://a.example/path", ""},
		{"https://", ""},
		{"https://a.example:", ""},
		{"https://a.example:0", ""},
		{"//a.example", ""},
	} {
		got, err := CanonicalOrigin(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("CanonicalOrigin(%q) = %q, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// module is a minimal valid wasm module: header, a type section and a
// foreign custom section.
func module() []byte {
	m := append([]byte{}, wasmHeader...)
	m = append(m, 1, 4, 1, 0x60, 0, 0)              // type section: one () -> ()
	m = append(m, 0, 6, 5, 'o', 't', 'h', 'e', 'r') // custom "other", empty
	return m
}

func TestEmbedExtract(t *testing.T) {
	toml := []byte(validProvider)
	out, err := Embed(module(), toml)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	again, _ := Embed(module(), toml)
	if !bytes.Equal(out, again) {
		t.Error("Embed is not deterministic")
	}
	got, err := Extract(out)
	if err != nil || !bytes.Equal(got, toml) {
		t.Fatalf("Extract = %q, %v", got, err)
	}
	if _, err := Embed(out, toml); !errors.Is(err, ErrAlreadyEmbedded) {
		t.Errorf("Embed twice: %v, want ErrAlreadyEmbedded", err)
	}
	// Large manifests need multi-byte LEB128 sizes.
	big := bytes.Repeat([]byte("#"), 300000)
	out2, err := Embed(module(), big)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Extract(out2); err != nil || !bytes.Equal(got, big) {
		t.Errorf("Extract(big) len=%d err=%v", len(got), err)
	}
	// Two manifest sections are ambiguous.
	dup := append(append([]byte{}, out...), out[len(module()):]...)
	if _, err := Extract(dup); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Extract(dup) = %v, want ErrDuplicate", err)
	}
}

func TestExtractErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrNotWasm},
		{"bad magic", []byte("\x00asn\x01\x00\x00\x00"), ErrNotWasm},
		{"bad version", []byte("\x00asm\x02\x00\x00\x00"), ErrNotWasm},
		{"no manifest", module(), ErrNoManifest},
		{"truncated size", append(append([]byte{}, wasmHeader...), 1, 0x80), ErrMalformedModule},
		{"overrun", append(append([]byte{}, wasmHeader...), 1, 10, 0), ErrMalformedModule},
		{"overlong leb", append(append([]byte{}, wasmHeader...), 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0), ErrMalformedModule},
		{"leb overflow", append(append([]byte{}, wasmHeader...), 1, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrMalformedModule},
		{"name overrun", append(append([]byte{}, wasmHeader...), 0, 2, 9, 'a'), ErrMalformedModule},
		{"unknown section", append(append([]byte{}, wasmHeader...), 99, 0), ErrMalformedModule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Extract(tc.in); !errors.Is(err, tc.want) {
				t.Errorf("Extract = %v, want %v", err, tc.want)
			}
			if tc.want != ErrNoManifest {
				if _, err := Embed(tc.in, []byte("x")); err == nil {
					t.Error("Embed accepted a malformed module")
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(validProvider))
	f.Add([]byte(minimalTool))
	f.Add([]byte("id = 1\n[limits]\nmemoryMiB = 99999999999"))
	f.Add([]byte(`[settings]` + "\n" + `schema = '{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/a"}}}'`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		// A valid manifest re-validates and keeps its limits in bounds.
		if err := m.Validate(); err != nil {
			t.Fatalf("re-Validate: %v", err)
		}
		if m.Limits.MemoryMiB < 1 || m.Limits.MemoryMiB > MaxMemoryMiB || m.Limits.PoolSize < 1 || m.Limits.PoolSize > MaxPoolSize {
			t.Fatalf("limits out of bounds: %+v", m.Limits)
		}
		_ = m.ValidateSettings(json.RawMessage(`{}`))
	})
}

func FuzzExtract(f *testing.F) {
	f.Add(module())
	emb, _ := Embed(module(), []byte(minimalTool))
	f.Add(emb)
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		content, err := Extract(data)
		if err != nil {
			return
		}
		// Whatever Extract found is a sub-slice of the input.
		if len(content) > len(data) {
			t.Fatal("content longer than input")
		}
		// Re-embedding after extraction is refused (already embedded).
		if _, err := Embed(data, content); !errors.Is(err, ErrAlreadyEmbedded) {
			t.Fatalf("Embed on a module with a manifest: %v", err)
		}
	})
}
