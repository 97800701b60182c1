package config

import (
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the strict decoder and the validator:
// neither may panic, and a document that decodes must validate without
// panicking and survive a SetPin round trip when it pins an extension.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(devDoc))
	f.Add([]byte("version = 1\n"))
	f.Add([]byte("version = 1\n[server]\nlisten = \"0.0.0.0:1\"\nallowed_origins = [\"https://a.example\"]\n"))
	f.Add([]byte("version = 1\nextensions = [ { id = \"e\", version = \"1.0.0\", module = \"m\", sha256 = \"\" } ]\n"))
	f.Add([]byte("version = 1\n[[tokens]]\nid = \"t\"\nsecret = { env = \"X\" }\n[tokens.grants]\nretrieval = { search = [\"d\"] }\n"))
	f.Add([]byte("s = '''\n[[x]]\n'''\nversion = 1\n\"a.b\" = 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = scanPositions(string(data))
		cfg, err := Decode(data, "")
		if err != nil {
			if cfg != nil {
				t.Fatal("Decode returned a file with an error")
			}
			return
		}
		_ = cfg.Validate()
		for _, e := range cfg.Extensions {
			if e.ID == "" || strings.ContainsAny(e.ID+e.Version, "\"\n\\") {
				continue
			}
			out, err := SetPin(data, "", e.ID, e.Version, "m.wasm", strings.Repeat("c", 64))
			if err != nil {
				continue // some layouts cannot be edited in place; that is reported
			}
			g, err := Decode(out, "")
			if err != nil {
				t.Fatalf("SetPin produced an undecodable file: %v\n%s", err, out)
			}
			if len(g.Extensions) < len(cfg.Extensions) {
				t.Fatalf("SetPin lost extensions")
			}
			break
		}
	})
}
