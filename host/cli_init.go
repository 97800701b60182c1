package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// cliStarterConfig is the host.toml `adhost init` writes: valid as is (a
// host with no providers), with the shape of a provider entry commented.
const cliStarterConfig = `# adhost configuration (host-config.md §2). Relative paths are relative to
# this file. Secrets never go here: only references to a file or variable.
version = 1

[server]
listen = "127.0.0.1:7433"        # non-loopback requires tls_cert and tls_key
allowed_origins = []             # exact browser origins; empty = deny all

[store]
path = "data"

[usage]
jsonl = "data/usage.jsonl"       # append-only usage records; omit to disable

# Pin an extension (its sha256 covers code and manifest):
#   adhost plugins pin fixture@1.0.0 build/plugins/fixture-1.0.0.wasm --write
# then add a provider instance that uses it:
#
# [[providers]]
# id = "fixture"
# extension = "fixture@1.0.0"
# models = ["fixture-model"]
#
# and grant it to the token below with providers = ["fixture"].

[[tokens]]
id = "dev"
subject = "dev-user"
secret = { file = "data/dev.token" }
providers = []
`

// cliInit is `adhost init [DIR]`: it writes DIR/host.toml, DIR/data (0700)
// and DIR/data/dev.token (0600, random), skipping whatever exists.
func cliInit(_ context.Context, env *cliEnv, args []string) int {
	fset := cliFlags(env, "init")
	pos, code, ok := cliParse(fset, args)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprintln(env.stderr, "usage: adhost init [DIR]")
		return cliExitUsage
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return env.fail("init", err)
	}
	cfgPath := filepath.Join(dir, "host.toml")
	dataDir := filepath.Join(dir, "data")
	tokenPath := filepath.Join(dataDir, "dev.token")

	wrote, err := cliCreateFile(cfgPath, []byte(cliStarterConfig), 0o644)
	if err != nil {
		return env.fail("init", err)
	}
	cliReport(env, cfgPath, wrote)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return env.fail("init", err)
	}
	tok, err := cliNewToken()
	if err != nil {
		return env.fail("init", err)
	}
	wrote, err = cliCreateFile(tokenPath, []byte(tok+"\n"), 0o600)
	if err != nil {
		return env.fail("init", err)
	}
	cliReport(env, tokenPath, wrote)
	fmt.Fprintf(env.stdout, "\nnext:\n  adhost serve --config %s\n  curl -H \"Authorization: Bearer $(cat %s)\" http://127.0.0.1:7433/v1/protocol\n", cfgPath, tokenPath)
	return cliExitOK
}

func cliReport(env *cliEnv, path string, wrote bool) {
	if wrote {
		fmt.Fprintf(env.stdout, "created %s\n", path)
	} else {
		fmt.Fprintf(env.stdout, "kept    %s (exists; never overwritten)\n", path)
	}
}

// cliCreateFile creates path with data unless it exists (O_EXCL: no
// check-then-write race). It reports whether it wrote.
func cliCreateFile(path string, data []byte, mode os.FileMode) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return false, err
	}
	return true, f.Close()
}

// cliNewToken returns 32 random bytes as 64 hex characters (≥ 32 characters
// as wire-core §11.1 requires).
func cliNewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
