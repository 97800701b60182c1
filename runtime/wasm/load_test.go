package wasm

import (
	"errors"
	"os"
	"strings"
	"testing"

	"adhost/abi"
)

func TestLoadRefuses(t *testing.T) {
	good := pinOf(t, "provider", "hostile", "1.0.0")
	dir := t.TempDir()
	raw, _ := os.ReadFile(good.Path)
	flipped := append([]byte{}, raw...)
	flipped[len(flipped)/2] ^= 1
	flippedPath := writeFile(t, dir, "flipped.wasm", flipped)
	noManifest := writeFile(t, dir, "plain.wasm", []byte("\x00asm\x01\x00\x00\x00"))
	notWasm := writeFile(t, dir, "text.wasm", []byte("hello"))

	for _, tc := range []struct {
		name    string
		pin     Pin
		want    error
		wantSub []string
	}{
		{"digest mismatch", Pin{ID: "hostile", Version: "1.0.0", Path: flippedPath, SHA256: good.SHA256}, ErrDigestMismatch,
			[]string{"hostile@1.0.0", "expected " + good.SHA256, "actual "}},
		{"pin id", Pin{ID: "other", Version: "1.0.0", Path: good.Path, SHA256: good.SHA256}, ErrPinMismatch, []string{`expected "other", actual "hostile"`}},
		{"pin version", Pin{ID: "hostile", Version: "1.0.1", Path: good.Path, SHA256: good.SHA256}, ErrPinMismatch, []string{`expected "1.0.1", actual "1.0.0"`}},
		{"missing marker", tiny{infoID: "tiny"}.build(t), ErrNoMarker, []string{"plugin_abi_v1"}},
		{"unknown marker", tiny{marker: "plugin_abi_v9", infoID: "tiny"}.build(t), ErrUnsupportedABI, []string{"plugin_abi_v9"}},
		{"import not allowed", tiny{marker: abi.ExportMarkerV1, importHTTP: true, infoID: "tiny"}.build(t), ErrImportDenied, []string{"llmhost.http_start", "[network]"}},
		{"info disagrees", tiny{marker: abi.ExportMarkerV1, infoID: "hostile"}.build(t), ErrInfoMismatch, []string{`id expected "tiny", actual "hostile"`}},
		// A start function would run during instantiation, beyond the
		// watchdog and cancellation: refused before anything runs.
		{"start function", tiny{marker: abi.ExportMarkerV1, infoID: "tiny", startLoop: true}.build(t), ErrCompile, []string{"start function"}},
		{"no manifest", pinFor(t, noManifest, "x", "1.0.0"), ErrManifest, nil},
		{"not wasm", pinFor(t, notWasm, "x", "1.0.0"), ErrManifest, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Load(t.Context(), tc.pin, Options{Cache: sharedCache})
			if err == nil {
				x.Close(t.Context())
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Load error = %v, want %v", err, tc.want)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, sub := range tc.wantSub {
				if !strings.Contains(msg, sub) {
					t.Errorf("error %q does not contain %q", msg, sub)
				}
			}
		})
	}
	if _, err := Load(t.Context(), Pin{ID: "x", Version: "1.0.0", Path: dir + "/missing.wasm"}, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func pinFor(t *testing.T, path, id, version string) Pin {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Pin{ID: id, Version: version, Path: path, SHA256: sha256Hex(b)}
}

func TestLoadCacheDir(t *testing.T) {
	dir := t.TempDir() + "/cache"
	pin := tiny{marker: abi.ExportMarkerV1, infoID: "tiny"}.build(t)
	x, err := Load(t.Context(), pin, Options{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	x.Close(t.Context())
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode = %v, %v", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Error("compilation cache directory is empty")
	}
	open := t.TempDir() + "/open"
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Load(t.Context(), pin, Options{CacheDir: open})
	if !errors.Is(err, ErrCacheDirUnsafe) {
		t.Errorf("Load with a 0755 cache dir: %v, want ErrCacheDirUnsafe", err)
	}
}
