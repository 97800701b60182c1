package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MinTokenLen is the minimum bearer token length (wire-core §11.1).
const MinTokenLen = 32

// maxSecretBytes bounds a secret file read: tokens and API keys are short.
const maxSecretBytes = 64 << 10

// ErrInsecureSecretFile reports a secret file readable by group or others.
var ErrInsecureSecretFile = errors.New("secret file is readable by group or others (chmod 600)")

// Resolve returns the secret's value: the environment variable's value or
// the file's content with one trailing newline removed. Secret files must
// not be readable by group or others, and the value must be a single,
// non-empty line. Errors name the variable or file, never the value.
func (s SecretRef) Resolve() (string, error) {
	var v string
	switch {
	case s.Env != "" && s.File != "":
		return "", errors.New("secret: set exactly one of env and file")
	case s.Env != "":
		val, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", s.Env)
		}
		v = val
	case s.File != "":
		b, err := readSecretFile(s.File)
		if err != nil {
			return "", err
		}
		v = string(b)
		v = strings.TrimSuffix(v, "\n")
		v = strings.TrimSuffix(v, "\r")
	default:
		return "", errors.New("secret: neither env nor file is set")
	}
	if v == "" {
		return "", fmt.Errorf("%s is empty", s)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("%s must hold a single line", s)
	}
	return v, nil
}

// String names the reference (never the value).
func (s SecretRef) String() string {
	if s.Env != "" {
		return "environment variable " + s.Env
	}
	return "secret file " + s.File
}

func readSecretFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("secret file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, &fs.PathError{Op: "check", Path: path, Err: ErrInsecureSecretFile}
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read secret file %s: %w", path, err)
	}
	if len(b) > maxSecretBytes {
		return nil, fmt.Errorf("secret file %s is larger than %d bytes", path, maxSecretBytes)
	}
	return b, nil
}

// TokenSecret is a token with its resolved value.
type TokenSecret struct {
	Token *Token
	Value string
}

// ResolveTokens reads every token's secret and checks it: ≥ 32 characters,
// one line, and distinct across tokens (wire-core §11.1). All problems are
// returned joined, each naming the token and the file or variable.
func (f *File) ResolveTokens() ([]TokenSecret, error) {
	var errs []error
	out := make([]TokenSecret, 0, len(f.Tokens))
	seen := map[string]string{}
	for i := range f.Tokens {
		t := &f.Tokens[i]
		key := fmt.Sprintf("tokens[%d].secret", i)
		v, err := t.Secret.Resolve()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (token %q): %w", key, t.ID, err))
			continue
		}
		if n := len([]rune(v)); n < MinTokenLen {
			errs = append(errs, fmt.Errorf("%s (token %q): %s holds %d characters, need at least %d", key, t.ID, t.Secret, n, MinTokenLen))
			continue
		}
		if other, dup := seen[v]; dup {
			errs = append(errs, fmt.Errorf("%s (token %q): same value as token %q; tokens must be distinct", key, t.ID, other))
			continue
		}
		seen[v] = t.ID
		out = append(out, TokenSecret{Token: t, Value: v})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
