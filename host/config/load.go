package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Load reads, strictly decodes and validates host.toml. On a validation
// error it still returns the decoded file (callers such as `plugins pin`
// and `doctor` report on it); on a read or decode error the file is nil.
func Load(path string) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, err // *PathError names the file
	}
	f, err := Decode(b, abs)
	if err != nil {
		return nil, err
	}
	return f, f.Validate()
}

// typeErr matches BurntSushi/toml's type errors, which are plain errors
// (not ParseError) but carry the line and key in their text.
var typeErr = regexp.MustCompile(`^toml: line (\d+) \(last key "(.*?)"\): (.*)$`)

// Decode strictly decodes a host.toml document without validating it:
// unknown keys, wrong types and syntax errors are errors naming the key and
// line. path (may be empty) is used in messages and its directory resolves
// relative paths; with no path they resolve against the working directory.
func Decode(data []byte, path string) (*File, error) {
	name := path
	if name == "" {
		name = "host.toml"
	}
	f := defaults()
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			if pe.LastKey != "" {
				return nil, fmt.Errorf("%s:%d: %s: %s", name, pe.Position.Line, pe.LastKey, pe.Message)
			}
			return nil, fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
		}
		if m := typeErr.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("%s:%s: %s: %s", name, m[1], m[2], m[3])
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.pos = scanPositions(string(data))
	if extra := md.Undecoded(); len(extra) > 0 {
		var errs []error
		reported := map[string]bool{}
		for _, k := range extra {
			// Settings are free-form here; the manifest's settings schema
			// validates them when the extension is loaded.
			if len(k) > 2 && k[0] == "providers" && k[1] == "settings" {
				continue
			}
			// Report an unknown table once, not each key inside it.
			if hasReportedPrefix(reported, k) {
				continue
			}
			reported[k.String()] = true
			errs = append(errs, fmt.Errorf("%s: unknown key %q", f.where(name, f.pos.lookupKey(k)), k.String()))
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	if !md.IsDefined("version") {
		return nil, fmt.Errorf("%s: version: required key is missing (version = 1)", name)
	}
	if path != "" {
		f.Path = path
		f.Dir = filepath.Dir(path)
	}
	f.resolvePaths()
	return &f, nil
}

func hasReportedPrefix(reported map[string]bool, k toml.Key) bool {
	for i := 1; i < len(k); i++ {
		if reported[k[:i].String()] {
			return true
		}
	}
	return false
}

// where formats "name:line" (or just name when the line is unknown).
func (f *File) where(name string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", name, line)
	}
	return name
}

// resolvePaths makes every relative path relative to host.toml's directory
// (no ~ expansion, no environment expansion).
func (f *File) resolvePaths() {
	if f.Dir == "" {
		return
	}
	res := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(f.Dir, *p)
		}
	}
	res(&f.Server.TLSCert)
	res(&f.Server.TLSKey)
	res(&f.Store.Path)
	res(&f.Usage.JSONL)
	for i := range f.Extensions {
		res(&f.Extensions[i].Module)
	}
	for i := range f.Providers {
		for k, s := range f.Providers[i].Secrets {
			res(&s.File)
			f.Providers[i].Secrets[k] = s
		}
	}
	for i := range f.Tokens {
		res(&f.Tokens[i].Secret.File)
	}
	f.resolveRetrievalPaths(res)
}

// problems collects validation errors with their key path and line.
type problems struct {
	f    *File
	name string
	errs []error
}

func (p *problems) add(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if flag, ok := p.f.overrides[path]; ok {
		p.errs = append(p.errs, fmt.Errorf("%s: %s", flag, msg))
		return
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s: %s", p.f.where(p.name, p.f.pos.line(path)), path, msg))
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// sortedKeys returns a map's keys in order (stable error output).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// StorePath reads only [store] path from the file at path, leniently (any
// other key, valid or not, is ignored), with its default ("data") resolved
// against the file's directory. Commands that must find a running host
// through its data directory use it when the file as a whole does not
// load — `adhost reload` of a broken file, which the host itself then
// refuses, logs and reports.
func StorePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return "", err
	}
	var f struct {
		Store struct {
			Path string `toml:"path"`
		} `toml:"store"`
	}
	if _, err := toml.Decode(string(b), &f); err != nil {
		return "", fmt.Errorf("%s: [store] path cannot be read: %w", abs, err)
	}
	p := f.Store.Path
	if p == "" {
		p = "data"
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(abs), p)
	}
	return p, nil
}
