package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const pinA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// devDoc is the dev default shape of host-config.md §4.
const devDoc = `# dev default
version = 1

[usage]
host_id = "local-dev"
jsonl = "data/usage.jsonl"

[[extensions]]
id = "fixture"
version = "1.0.0"
module = "build/plugins/fixture-1.0.0.wasm"
sha256 = "` + pinA + `" # pinned

[[extensions]]
id = "conformance-tools"
version = "1.0.0"
module = "build/plugins/conformance-tools-1.0.0.wasm"
sha256 = "` + pinA + `"

[[providers]]
id = "fixture"
extension = "fixture@1.0.0"
account_id = "local"
models = ["fixture-model"]
settings = {}

[[tools]]
extension = "conformance-tools@1.0.0"
names = ["conformance_lookup"]

[[tokens]]
id = "dev"
subject = "dev-user"
secret = { file = "data/dev.token" }
providers = ["fixture"]
tools = ["conformance_lookup"]
`

func TestDecodeDefaults(t *testing.T) {
	f, err := Decode([]byte("version = 1\n"), "/etc/adhost/host.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("minimal file invalid: %v", err)
	}
	if f.Server.Listen != DefaultListen {
		t.Errorf("listen = %q, want %q", f.Server.Listen, DefaultListen)
	}
	if want := filepath.FromSlash("/etc/adhost/data"); f.Store.Path != want {
		t.Errorf("store.path = %q, want %q", f.Store.Path, want)
	}
	want := Limits{MaxSteps: 64, MaxOutputTokens: 65536, MaxConcurrentRuns: 32, MaxConcurrentRunsPerSubject: 4}
	if !reflect.DeepEqual(f.Limits, want) {
		t.Errorf("limits = %+v, want %+v", f.Limits, want)
	}
	if f.Usage.JSONL != "" || f.Usage.HostID != "" {
		t.Errorf("usage = %+v, want sink off and no host id", f.Usage)
	}
	if len(f.Server.AllowedOrigins) != 0 || f.Server.TLSCert != "" {
		t.Errorf("server = %+v", f.Server)
	}
}

func TestDecodeDevDefault(t *testing.T) {
	f, err := Decode([]byte(devDoc), "/srv/host.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Tokens[0].Secret.File, filepath.FromSlash("/srv/data/dev.token"); got != want {
		t.Errorf("token file = %q, want %q", got, want)
	}
	if got, want := f.Extensions[0].Module, filepath.FromSlash("/srv/build/plugins/fixture-1.0.0.wasm"); got != want {
		t.Errorf("module = %q, want %q", got, want)
	}
	if got := f.Usage.JSONL; got != filepath.FromSlash("/srv/data/usage.jsonl") {
		t.Errorf("jsonl = %q", got)
	}
	if f.ExtensionByRef("fixture@1.0.0") == nil || f.ExtensionByRef("fixture@2.0.0") != nil {
		t.Error("ExtensionByRef")
	}
	if got := f.Line("providers[0].models"); got != 24 {
		t.Errorf("Line(providers[0].models) = %d, want 24", got)
	}
	if got := f.Line("tokens[0].secret.file"); got != 34 {
		t.Errorf("Line(tokens[0].secret.file) = %d, want 35", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"unknown top-level key", "version = 1\nbogus = 2\n", []string{"host.toml:2:", `unknown key "bogus"`}},
		{"unknown key in table", "version = 1\n[server]\nlisten = \"127.0.0.1:1\"\nlistn = \"x\"\n", []string{"host.toml:4:", `"server.listn"`}},
		{"unknown table reported once", "version = 1\n[serve]\na = 1\nb = 2\n", []string{"host.toml:2:", `unknown key "serve"`}},
		{"unknown key in array table", devDoc + "\n[[providers]]\nid = \"p2\"\nmodle = \"x\"\n", []string{"host.toml:40:", `"providers.modle"`}},
		{"unknown key in inline table", "version = 1\n[[tokens]]\nid = \"t\"\nsecret = { file = \"f\", mode = 1 }\n", []string{"host.toml:4:", `"tokens.secret.mode"`}},
		{"unknown grant", "version = 1\n[[tokens]]\nid = \"t\"\n[tokens.grants]\nadmin = true\n", []string{"host.toml:5:", `"tokens.grants.admin"`}},
		{"wrong type", "version = 1\n[limits]\nmax_steps = \"8\"\n", []string{"host.toml:3:", "limits.max_steps", "incompatible types"}},
		{"wrong type array", "version = 1\n[server]\nallowed_origins = \"x\"\n", []string{"host.toml:3:", "server.allowed_origins"}},
		{"syntax error", "version = 1\n[server\n", []string{"host.toml:3:", "table name"}},
		{"duplicate key", "version = 1\nversion = 2\n", []string{"host.toml:2:"}},
		{"missing version", "[server]\n", []string{"version: required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc), "")
			if err == nil {
				t.Fatal("Decode succeeded, want error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeUnknownKeysAllReported(t *testing.T) {
	_, err := Decode([]byte("version = 1\na = 1\n[store]\nb = 2\n"), "x.toml")
	if err == nil || !strings.Contains(err.Error(), `x.toml:2: unknown key "a"`) || !strings.Contains(err.Error(), `x.toml:4: unknown key "store.b"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestSettingsAreFreeForm(t *testing.T) {
	doc := strings.Replace(devDoc, "settings = {}", `settings = { endpoint = "https://x.example/v1/", nested = { deep = [1, 2] } }`, 1)
	f, err := Decode([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Providers[0].Settings["endpoint"] != "https://x.example/v1/" {
		t.Errorf("settings = %v", f.Providers[0].Settings)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(string) string
		want []string // substrings; empty = valid
	}{
		{"dev default", func(s string) string { return s }, nil},
		{"version", func(s string) string { return strings.Replace(s, "version = 1", "version = 2", 1) }, []string{"host.toml:2: version: unsupported version 2"}},
		{"non-loopback without TLS", add("[server]\nlisten = \"0.0.0.0:7433\"\n"), []string{"server.listen", "TLS_REQUIRED"}},
		{"all interfaces without TLS", add("[server]\nlisten = \":7433\"\n"), []string{"TLS_REQUIRED"}},
		{"non-loopback with TLS", add("[server]\nlisten = \"0.0.0.0:7433\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n"), nil},
		{"ipv6 loopback", add("[server]\nlisten = \"[::1]:0\"\n"), nil},
		{"localhost", add("[server]\nlisten = \"localhost:8080\"\n"), nil},
		{"cert without key", add("[server]\ntls_cert = \"c.pem\"\n"), []string{"server.tls_cert", "together"}},
		{"bad listen", add("[server]\nlisten = \"127.0.0.1\"\n"), []string{"server.listen", "host:port"}},
		{"bad port", add("[server]\nlisten = \"127.0.0.1:99999\"\n"), []string{"server.listen", "invalid port"}},
		{"origins", add("[server]\nallowed_origins = [\"https://app.example\", \"http://localhost:3000\"]\n"), nil},
		{"origin with path", add("[server]\nallowed_origins = [\"https://app.example/\"]\n"), []string{"server.allowed_origins[0]"}},
		{"origin wildcard", add("[server]\nallowed_origins = [\"https://ok.example\", \"*\"]\n"), []string{"server.allowed_origins[1]"}},
		{"origin duplicate", add("[server]\nallowed_origins = [\"https://a.example\", \"https://a.example\"]\n"), []string{"duplicate origin"}},
		{"empty store path", add("[store]\npath = \"\"\n"), []string{"store.path"}},
		{"max_steps 0", add("[limits]\nmax_steps = 0\n"), []string{"limits.max_steps", "1..64"}},
		{"max_steps raise", add("[limits]\nmax_steps = 65\n"), []string{"limits.max_steps"}},
		{"max_steps lower", add("[limits]\nmax_steps = 8\nmax_output_tokens = 1\n"), nil},
		{"max_output_tokens raise", add("[limits]\nmax_output_tokens = 65537\n"), []string{"limits.max_output_tokens"}},
		{"concurrency raise", add("[limits]\nmax_concurrent_runs = 33\nmax_concurrent_runs_per_subject = 33\n"), nil},
		{"concurrency at bound", add("[limits]\nmax_concurrent_runs = 10000\nmax_concurrent_runs_per_subject = 10000\n"), nil},
		{"concurrency above bound", add("[limits]\nmax_concurrent_runs = 10001\n"), []string{"limits.max_concurrent_runs: 10001 out of range 1..10000"}},
		{"concurrency 0", add("[limits]\nmax_concurrent_runs = 0\n"), []string{"limits.max_concurrent_runs"}},
		{"per subject equals total", add("[limits]\nmax_concurrent_runs = 2\nmax_concurrent_runs_per_subject = 2\n"), nil},
		{"per subject 1", add("[limits]\nmax_concurrent_runs_per_subject = 1\n"), nil},
		{"max_instances", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nmax_instances = 1\ninstance_idle_ms = 1\nturn_timeout_ms = 2147483647\n"), nil},
		{"max_instances negative", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nmax_instances = -1\n"), []string{"extensions[2].max_instances: -1 out of range"}},
		{"max_instances at the tool entries", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nmax_instances = 2\n\n[[tools]]\nextension = \"x@1.0.0\"\nnames = [\"a\"]\n\n[[tools]]\nextension = \"x@1.0.0\"\nnames = [\"b\"]\n"), nil},
		{"max_instances below the tool entries", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nmax_instances = 1\n\n[[tools]]\nextension = \"x@1.0.0\"\nnames = [\"a\"]\n\n[[tools]]\nextension = \"x@1.0.0\"\nnames = [\"b\"]\n"), []string{"extensions[2].max_instances: 1 is below the 2 [[tools]] entries bound to x@1.0.0"}},
		{"max_instances above bound", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nmax_instances = 10001\n"), []string{"extensions[2].max_instances"}},
		{"instance_idle_ms negative", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\ninstance_idle_ms = -1\n"), []string{"extensions[2].instance_idle_ms"}},
		{"turn_timeout_ms above", add("[[extensions]]\nid = \"x\"\nversion = \"1.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\nturn_timeout_ms = 2147483648\n"), []string{"extensions[2].turn_timeout_ms"}},
		{"per subject above total", add("[limits]\nmax_concurrent_runs = 2\nmax_concurrent_runs_per_subject = 3\n"), []string{"limits.max_concurrent_runs_per_subject"}},
		{"per subject 0", add("[limits]\nmax_concurrent_runs_per_subject = 0\n"), []string{"limits.max_concurrent_runs_per_subject"}},
		{"idle negative", add("[limits]\nidle_timeout_ms = -1\n"), []string{"limits.idle_timeout_ms"}},
		{"idle max", add("[limits]\nidle_timeout_ms = 2147483647\n"), nil},
		{"idle above max", add("[limits]\nidle_timeout_ms = 2147483648\n"), []string{"limits.idle_timeout_ms"}},
		{"bad host id", func(s string) string { return strings.Replace(s, `"local-dev"`, `"-x"`, 1) }, []string{"host.toml:5: usage.host_id"}},
		{"duplicate extension", add("[[extensions]]\nid = \"fixture\"\nversion = \"2.0.0\"\nmodule = \"m\"\nsha256 = \"" + pinA + "\"\n"), []string{"extensions[2].id", "duplicate extension id"}},
		{"bad sha", func(s string) string { return strings.Replace(s, pinA+`" # pinned`, `abc"`, 1) }, []string{"host.toml:12: extensions[0].sha256", "plugins pin fixture@1.0.0"}},
		{"uppercase sha", func(s string) string { return strings.Replace(s, pinA+`" # pinned`, strings.ToUpper(pinA)+`"`, 1) }, []string{"extensions[0].sha256"}},
		{"bad version", func(s string) string {
			return strings.Replace(s, "version = \"1.0.0\"\nmodule = \"build/plugins/fixture", "version = \"1.0\"\nmodule = \"build/plugins/fixture", 1)
		}, []string{"extensions[0].version", "providers[0].extension"}},
		{"missing module", func(s string) string {
			return strings.Replace(s, "module = \"build/plugins/fixture-1.0.0.wasm\"\n", "", 1)
		}, []string{"extensions[0].module: required"}},
		{"unpinned provider extension", func(s string) string {
			return strings.Replace(s, `extension = "fixture@1.0.0"`, `extension = "fixture@1.0.1"`, 1)
		}, []string{"host.toml:22: providers[0].extension", `"fixture@1.0.1" is not a pinned extension`}},
		{"missing provider extension", func(s string) string { return strings.Replace(s, "extension = \"fixture@1.0.0\"\n", "", 1) }, []string{"providers[0].extension: required"}},
		{"duplicate provider", add("[[providers]]\nid = \"fixture\"\nextension = \"fixture@1.0.0\"\nmodels = [\"m\"]\n"), []string{"providers[1].id", "duplicate provider id"}},
		{"bad provider id", func(s string) string {
			return strings.Replace(s, "id = \"fixture\"\nextension", "id = \"fix ture\"\nextension", 1)
		}, []string{"providers[0].id", "tokens[0].providers[0]", `unknown provider "fixture"`}},
		{"no models", func(s string) string { return strings.Replace(s, `models = ["fixture-model"]`, `models = []`, 1) }, []string{"providers[0].models: required"}},
		{"bad model", func(s string) string {
			return strings.Replace(s, `models = ["fixture-model"]`, `models = ["ok", " bad"]`, 1)
		}, []string{"providers[0].models[1]"}},
		{"duplicate model", func(s string) string {
			return strings.Replace(s, `models = ["fixture-model"]`, `models = ["a", "a"]`, 1)
		}, []string{"duplicate model"}},
		{"bad account", func(s string) string { return strings.Replace(s, `account_id = "local"`, `account_id = "a b"`, 1) }, []string{"providers[0].account_id"}},
		{"secret env and file", func(s string) string {
			return strings.Replace(s, "settings = {}", `secrets = { api_key = { env = "K", file = "f" } }`, 1)
		}, []string{"providers[0].secrets.api_key", "exactly one"}},
		{"secret env name", func(s string) string {
			return strings.Replace(s, "settings = {}", `secrets = { api_key = { env = "A-B" } }`, 1)
		}, []string{"providers[0].secrets.api_key.env"}},
		{"secret ok", func(s string) string {
			return strings.Replace(s, "settings = {}", `secrets = { api_key = { env = "OPENAI_API_KEY" } }`, 1)
		}, nil},
		{"tool extension unpinned", func(s string) string {
			return strings.Replace(s, `extension = "conformance-tools@1.0.0"`, `extension = "calc@1.0.0"`, 1)
		}, []string{"tools[0].extension"}},
		{"tool names empty", func(s string) string { return strings.Replace(s, `names = ["conformance_lookup"]`, `names = []`, 1) }, []string{"tools[0].names: required", "tokens[0].tools[0]"}},
		{"tool name invalid", func(s string) string {
			return strings.Replace(s, `names = ["conformance_lookup"]`, `names = ["conformance_lookup", "bad-name"]`, 1)
		}, []string{"tools[0].names[1]"}},
		{"tool twice", add("[[tools]]\nextension = \"conformance-tools@1.0.0\"\nnames = [\"conformance_lookup\"]\n"), []string{"tools[1].names[0]", "more than once"}},
		{"approval not in names", func(s string) string {
			return strings.Replace(s, `names = ["conformance_lookup"]`, "names = [\"conformance_lookup\"]\nrequires_approval = [\"other\"]", 1)
		}, []string{"tools[0].requires_approval[0]"}},
		{"approval subset", func(s string) string {
			return strings.Replace(s, `names = ["conformance_lookup"]`, "names = [\"conformance_lookup\"]\nrequires_approval = [\"conformance_lookup\"]", 1)
		}, nil},
		{"token unknown tool", func(s string) string {
			return strings.Replace(s, `tools = ["conformance_lookup"]`, `tools = ["calculate"]`, 1)
		}, []string{"tokens[0].tools[0]", `unknown tool "calculate"`}},
		{"token subject empty", func(s string) string { return strings.Replace(s, `subject = "dev-user"`, `subject = ""`, 1) }, []string{"tokens[0].subject"}},
		{"token subject long", func(s string) string {
			return strings.Replace(s, `subject = "dev-user"`, `subject = "`+strings.Repeat("s", 129)+`"`, 1)
		}, []string{"tokens[0].subject"}},
		{"token without secret", func(s string) string { return strings.Replace(s, "secret = { file = \"data/dev.token\" }\n", "", 1) }, []string{"tokens[0].secret: required"}},
		{"duplicate token", add("[[tokens]]\nid = \"dev\"\nsubject = \"x\"\nsecret = { env = \"T\" }\n"), []string{"tokens[1].id", "duplicate token id"}},
		{"grants ok", add("[tokens.grants]\nsessions = [\"create\", \"read\"]\njobs = [\"submit\"]\napprove_tools = [\"conformance_lookup\"]\napplication_tools = [{ name = \"lookup_ticket\", requires_approval = false }]\nretrieval = { search = [\"docs\"] }\n"), nil},
		{"grants bad", add("[tokens.grants]\nsessions = [\"create\", \"admin\"]\njobs = [\"submit\", \"submit\"]\napplication_tools = [{ name = \"a b\" }]\nretrieval = { index = [\"\"] }\n"), []string{
			"tokens[0].grants.sessions[1]", "tokens[0].grants.jobs[1]", "tokens[0].grants.application_tools[0].name", "tokens[0].grants.retrieval.index[0]",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Decode([]byte(tc.edit(devDoc)), "")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			err = f.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded, want error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// add appends a snippet to the document.
func add(snippet string) func(string) string {
	return func(s string) string { return s + "\n" + snippet }
}

func TestValidateReportsAllProblems(t *testing.T) {
	f, err := Decode([]byte("version = 1\n[limits]\nmax_steps = 0\nmax_output_tokens = 0\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	err = f.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Fatalf("want two problems, got %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host.toml")
	if err := os.WriteFile(path, []byte(devDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || f.Dir != dir {
		t.Errorf("Path, Dir = %q, %q", f.Path, f.Dir)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("version = 1\n[limits]\nmax_steps = 99\n"), 0o644)
	f, err = Load(bad)
	if f == nil || err == nil || !strings.Contains(err.Error(), bad+":3: limits.max_steps") {
		t.Errorf("Load(bad) = %v, %v", f, err)
	}
}

func TestResolveTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := strings.Repeat("a", 32)
	t.Setenv("ADHOST_TEST_TOKEN", strings.Repeat("b", 40))
	for _, tc := range []struct {
		name  string
		refs  []SecretRef
		want  string // substring; "" = ok
		value string // expected value of the first token when ok
	}{
		{"file ok with newline", []SecretRef{{File: write("ok", good+"\n", 0o600)}}, "", good},
		{"file ok crlf", []SecretRef{{File: write("crlf", good+"\r\n", 0o600)}}, "", good},
		{"env ok", []SecretRef{{Env: "ADHOST_TEST_TOKEN"}}, "", strings.Repeat("b", 40)},
		{"world readable", []SecretRef{{File: write("wr", good, 0o644)}}, "readable by group or others", ""},
		{"group readable", []SecretRef{{File: write("gr", good, 0o640)}}, filepath.Join(dir, "gr"), ""},
		{"missing file", []SecretRef{{File: filepath.Join(dir, "nope")}}, filepath.Join(dir, "nope"), ""},
		{"short", []SecretRef{{File: write("short", "abc\n", 0o600)}}, "need at least 32", ""},
		{"multi-line", []SecretRef{{File: write("ml", good+"\n"+good, 0o600)}}, "single line", ""},
		{"empty", []SecretRef{{File: write("empty", "\n", 0o600)}}, "is empty", ""},
		{"env unset", []SecretRef{{Env: "ADHOST_TEST_UNSET_XYZ"}}, "ADHOST_TEST_UNSET_XYZ is not set", ""},
		{"duplicate", []SecretRef{{File: write("d1", good, 0o600)}, {File: write("d2", good+"\n", 0o600)}}, "must be distinct", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &File{}
			for i, r := range tc.refs {
				f.Tokens = append(f.Tokens, Token{ID: "t" + string(rune('0'+i)), Subject: "s", Secret: r})
			}
			got, err := f.ResolveTokens()
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				if strings.Contains(err.Error(), good) {
					t.Errorf("error leaks the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Value != tc.value || got[0].Token != &f.Tokens[0] {
				t.Errorf("got %+v", got[0])
			}
		})
	}
}

func TestSetPin(t *testing.T) {
	pinB := strings.Repeat("b", 64)
	t.Run("replace keeps comments", func(t *testing.T) {
		out, err := SetPin([]byte(devDoc), "", "fixture", "1.0.0", "x.wasm", pinB)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(devDoc, pinA+`" # pinned`, pinB+`" # pinned`, 1)
		if string(out) != want {
			t.Errorf("got\n%s\nwant\n%s", out, want)
		}
	})
	t.Run("second entry", func(t *testing.T) {
		out, err := SetPin([]byte(devDoc), "", "conformance-tools", "1.0.0", "x.wasm", pinB)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := Decode(out, "")
		if f.Extensions[0].SHA256 != pinA || f.Extensions[1].SHA256 != pinB {
			t.Errorf("pins = %s, %s", f.Extensions[0].SHA256, f.Extensions[1].SHA256)
		}
	})
	t.Run("empty pin", func(t *testing.T) {
		doc := "version = 1\n[[extensions]]\nid = \"e\"\nversion = \"1.0.0\"\nmodule = \"m.wasm\"\nsha256 = \"\"  # fill with make pin\n"
		out, err := SetPin([]byte(doc), "", "e", "1.0.0", "m.wasm", pinB)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Replace(doc, `""`, `"`+pinB+`"`, 1); string(out) != want {
			t.Errorf("got %s", out)
		}
	})
	t.Run("missing sha256 key", func(t *testing.T) {
		doc := "version = 1\n[[extensions]]\nid = \"e\"\nversion = \"1.0.0\"\nmodule = \"m.wasm\"\n# tail\n"
		out, err := SetPin([]byte(doc), "", "e", "1.0.0", "m.wasm", pinB)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "module = \"m.wasm\"\nsha256 = \""+pinB+"\"\n# tail\n") {
			t.Errorf("got %s", out)
		}
	})
	t.Run("append new", func(t *testing.T) {
		dir := t.TempDir()
		out, err := SetPin([]byte("version = 1"), filepath.Join(dir, "host.toml"), "calc", "1.2.3", filepath.Join(dir, "build", "calc.wasm"), pinB)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Decode(out, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Extensions) != 1 || f.Extensions[0].Module != "build/calc.wasm" || f.Extensions[0].SHA256 != pinB {
			t.Errorf("got %s", out)
		}
	})
	t.Run("other version", func(t *testing.T) {
		if _, err := SetPin([]byte(devDoc), "", "fixture", "2.0.0", "x.wasm", pinB); err == nil || !strings.Contains(err.Error(), "pinned at version 1.0.0") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad digest", func(t *testing.T) {
		if _, err := SetPin([]byte(devDoc), "", "fixture", "1.0.0", "x.wasm", "xyz"); err == nil {
			t.Error("want error")
		}
	})
	t.Run("inline array", func(t *testing.T) {
		doc := "version = 1\nextensions = [ { id = \"e\", version = \"1.0.0\", module = \"m\", sha256 = \"\" } ]\n"
		out, err := SetPin([]byte(doc), "", "e", "1.0.0", "m", pinB)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := Decode(out, "")
		if f.Extensions[0].SHA256 != pinB {
			t.Errorf("got %s", out)
		}
	})
}

func TestPositionsMultiline(t *testing.T) {
	doc := "version = 1\n" +
		"s = \"\"\"\nline [fake]\nx = 1\n\"\"\"\n" +
		"arr = [\n  1,\n  { a = 1 },\n]\n" +
		"[t]\n\"quoted key\" = 1\n" +
		"[[a.b]]\nc = 1\n[[a.b]]\nc = 2\n[a.b.d]\ne = 3\n"
	p := scanPositions(doc)
	for path, want := range map[string]int{
		"version": 1, "s": 2, "arr": 6, "arr[1]": 8, "arr[1].a": 8, "t": 10, "t.quoted key": 11,
		"a.b[0]": 12, "a.b[0].c": 13, "a.b[1]": 14, "a.b[1].c": 15, "a.b[1].d": 16, "a.b[1].d.e": 17,
	} {
		if got := p[path]; got != want {
			t.Errorf("%s: line %d, want %d", path, got, want)
		}
	}
	if _, ok := p["x"]; ok {
		t.Error("key inside a multi-line string was recorded")
	}
}

// TestRepositoryHostTOML keeps the committed dev default valid.
func TestRepositoryHostTOML(t *testing.T) {
	path := filepath.Join("..", "..", "host.toml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no repository host.toml: %v", err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatalf("host.toml: %v", err)
	}
	if f.Server.Listen != DefaultListen || f.ExtensionByRef("fixture@1.0.0") == nil || f.ExtensionByRef("conformance-tools@1.0.0") == nil {
		t.Errorf("host.toml is not the dev default of host-config.md §4: %+v", f)
	}
	if len(f.Tokens) != 1 || f.Tokens[0].Secret.File != filepath.Join(f.Dir, "data", "dev.token") {
		t.Errorf("dev token: %+v", f.Tokens)
	}
}
