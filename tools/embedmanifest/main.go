// Command embedmanifest appends an extension manifest to a wasm module as
// the custom section abi.CustomSectionManifest, so that one sha256 pins the
// code and its declared permissions together.
//
//	go run ./tools/embedmanifest -manifest manifests/fixture.toml -in raw.wasm -out build/plugins/fixture-1.0.0.wasm
//
// The manifest is parsed and validated first; the output is a deterministic
// function of the two inputs (reproducible builds keep their digests).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"adhost/runtime/manifest"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "embedmanifest:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("embedmanifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	manifestPath := fs.String("manifest", "", "manifest TOML file (manifests/<id>.toml)")
	in := fs.String("in", "", "input wasm module")
	out := fs.String("out", "", "output wasm module")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *manifestPath == "" || *in == "" || *out == "" || fs.NArg() != 0 {
		return errors.New("usage: embedmanifest -manifest M.toml -in raw.wasm -out out.wasm")
	}
	return Embed(*manifestPath, *in, *out)
}

// Embed reads the manifest and module, validates the manifest and writes
// the module with the manifest embedded to out (atomically, via a temporary
// file in out's directory).
func Embed(manifestPath, in, out string) error {
	toml, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	if _, err := manifest.Parse(toml); err != nil {
		return fmt.Errorf("%s: %w", manifestPath, err)
	}
	wasm, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	b, err := manifest.Embed(wasm, toml)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".embedmanifest-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}
