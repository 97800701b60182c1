package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Binary is one [[binaries]] entry: a local CLI (claude, codex, gemini)
// pinned by digest, which a provider instance of a CLI adapter binds to
// with its binary key. The host checks the digest at start and again
// before every run of the binary.
type Binary struct {
	ID string `toml:"id"`
	// Path is the executable (resolved against host.toml's directory).
	// Point it at the file itself, not a symlink an upgrade rewrites, and
	// keep it in a directory only the operator can write.
	Path   string `toml:"path"`
	SHA256 string `toml:"sha256"`
}

// BinaryByID returns the [[binaries]] entry with that id, or nil.
func (f *File) BinaryByID(id string) *Binary {
	for i := range f.Binaries {
		if f.Binaries[i].ID == id {
			return &f.Binaries[i]
		}
	}
	return nil
}

// validateBinaries checks [[binaries]] and the providers' binary and
// account_directory keys without touching the filesystem (CheckBinaries
// does), and resolves their relative paths against host.toml's directory.
func (f *File) validateBinaries(p *problems) {
	ids := map[string]int{}
	for i := range f.Binaries {
		b := &f.Binaries[i]
		key := fmt.Sprintf("binaries[%d]", i)
		if !idPattern.MatchString(b.ID) {
			p.add(key+".id", "%q is missing or does not match %s", b.ID, idPattern)
		} else if j, dup := ids[b.ID]; dup {
			p.add(key+".id", "duplicate binary id %q (also binaries[%d])", b.ID, j)
		} else {
			ids[b.ID] = i
		}
		if b.Path == "" {
			p.add(key+".path", "required (the CLI executable)")
		}
		f.resolve(&b.Path)
		if !sha256Pattern.MatchString(b.SHA256) {
			p.add(key+".sha256", "%q is not 64 lowercase hex digits (sha256sum of the executable)", b.SHA256)
		}
	}
	for i := range f.Providers {
		pr := &f.Providers[i]
		key := fmt.Sprintf("providers[%d]", i)
		switch {
		case pr.Binary != "" && f.BinaryByID(pr.Binary) == nil:
			p.add(key+".binary", "%q is not a [[binaries]] id", pr.Binary)
		case pr.Binary != "" && pr.AccountDirectory == "":
			p.add(key+".account_directory", "required with binary (a private directory that becomes the CLI's HOME)")
		case pr.Binary == "" && pr.AccountDirectory != "":
			p.add(key+".account_directory", "only for a provider bound to a binary")
		}
		f.resolve(&pr.AccountDirectory)
		pr.BinaryPin = f.BinaryByID(pr.Binary)
	}
}

func (f *File) resolve(path *string) {
	if f.Dir != "" && *path != "" && !filepath.IsAbs(*path) {
		*path = filepath.Join(f.Dir, *path)
	}
}

// CheckBinaries checks what validation cannot without the filesystem:
// every bound binary exists and matches its digest, and every account
// directory is a directory only its owner can access. Each problem names
// the key and line. serve refuses to start on any; doctor and plugins
// verify report them.
func (f *File) CheckBinaries() error {
	name := f.Path
	if name == "" {
		name = "host.toml"
	}
	p := &problems{f: f, name: name}
	used := map[string]bool{}
	for _, pr := range f.Providers {
		used[pr.Binary] = true
	}
	for i, b := range f.Binaries {
		if !used[b.ID] {
			continue // a pin no instance uses is checked when one does
		}
		key := fmt.Sprintf("binaries[%d]", i)
		got, err := FileDigest(b.Path)
		switch {
		case err != nil:
			p.add(key+".path", "%s: %v", b.Path, unwrapPathErr(err))
		case got != b.SHA256:
			p.add(key+".sha256", "sha256 mismatch for %s: expected %s, actual %s", b.Path, b.SHA256, got)
		}
	}
	for i, pr := range f.Providers {
		if pr.AccountDirectory == "" {
			continue
		}
		if err := checkPrivateDir(pr.AccountDirectory); err != nil {
			p.add(fmt.Sprintf("providers[%d].account_directory", i), "%v", err)
		}
	}
	return p.err()
}

// FileDigest is the lower-case hex sha256 of a regular file.
func FileDigest(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", errors.New("not executable")
	}
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkPrivateDir refuses a missing directory or one that group or others
// can access: it holds the CLI's login session.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s does not exist (create it with mkdir -m 0700)", dir)
	case err != nil:
		return unwrapPathErr(err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %#o: it must be private (chmod 0700)", dir, fi.Mode().Perm())
	}
	return nil
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
