package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

var sha256Assign = regexp.MustCompile(`(sha256\s*=\s*)("[^"\n]*"|'[^'\n]*')`)

// SetPin returns doc (a host.toml) with the sha256 pin of extension
// id@version set to digest, editing only that value so comments and layout
// stay as they are. When no [[extensions]] entry has that id, a new entry
// with module (made relative to the file's directory when possible) is
// appended. An entry with the same id but another version is an error: the
// operator decides about upgrades. path is used for messages and to make
// module relative; it may be empty.
func SetPin(doc []byte, path, id, version, module, digest string) ([]byte, error) {
	if !sha256Pattern.MatchString(digest) {
		return nil, fmt.Errorf("invalid digest %q", digest)
	}
	f, err := Decode(doc, path)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, e := range f.Extensions {
		if e.ID != id {
			continue
		}
		if e.Version != version {
			return nil, fmt.Errorf("extension %q is pinned at version %s, not %s: edit [[extensions]] by hand to upgrade", id, e.Version, version)
		}
		idx = i
	}
	var out []byte
	if idx < 0 {
		out = appendPin(doc, f.Dir, id, version, module, digest)
	} else {
		out, err = replacePin(doc, f, idx, digest)
		if err != nil {
			return nil, err
		}
	}
	// Safety net: the edit must decode to exactly the intended pin.
	g, err := Decode(out, path)
	if err != nil {
		return nil, fmt.Errorf("internal error: edited host.toml does not decode: %w", err)
	}
	if e := g.ExtensionByRef(id + "@" + version); e == nil || e.SHA256 != digest {
		return nil, fmt.Errorf("could not update the pin of %s@%s in place; edit host.toml by hand", id, version)
	}
	return out, nil
}

func replacePin(doc []byte, f *File, idx int, digest string) ([]byte, error) {
	lines := bytes.SplitAfter(doc, []byte("\n"))
	if l, ok := f.pos[fmt.Sprintf("extensions[%d].sha256", idx)]; ok && l >= 1 && l <= len(lines) {
		line := lines[l-1]
		loc := sha256Assign.FindSubmatchIndex(line)
		if loc == nil {
			return nil, fmt.Errorf("line %d: cannot find the sha256 value to update", l)
		}
		var b bytes.Buffer
		b.Write(line[:loc[4]])
		fmt.Fprintf(&b, "%q", digest)
		b.Write(line[loc[5]:])
		lines[l-1] = b.Bytes()
		return bytes.Join(lines, nil), nil
	}
	// No sha256 key yet: add one after the entry's version (or id) line,
	// which must be a [[extensions]] table, not an inline table.
	after := 0
	for _, k := range []string{"version", "id", "module"} {
		if l, ok := f.pos[fmt.Sprintf("extensions[%d].%s", idx, k)]; ok && l > after {
			after = l
		}
	}
	hdr := f.pos[fmt.Sprintf("extensions[%d]", idx)]
	if after == 0 || after == hdr || after > len(lines) {
		return nil, fmt.Errorf("cannot place a sha256 key for extensions[%d]", idx)
	}
	ins := fmt.Appendf(nil, "sha256 = %q\n", digest)
	if !bytes.HasSuffix(lines[after-1], []byte("\n")) {
		lines[after-1] = append(lines[after-1], '\n')
	}
	rest := append([][]byte{ins}, lines[after:]...)
	lines = append(lines[:after], rest...)
	return bytes.Join(lines, nil), nil
}

func appendPin(doc []byte, dir, id, version, module, digest string) []byte {
	if dir != "" {
		if abs, err := filepath.Abs(module); err == nil {
			if rel, err := filepath.Rel(dir, abs); err == nil && !strings.HasPrefix(rel, "..") {
				module = rel
			}
		}
	}
	var b bytes.Buffer
	b.Write(doc)
	if len(doc) > 0 && !bytes.HasSuffix(doc, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\n[[extensions]]\nid = %q\nversion = %q\nmodule = %q\nsha256 = %q\n",
		id, version, filepath.ToSlash(module), digest)
	return b.Bytes()
}
