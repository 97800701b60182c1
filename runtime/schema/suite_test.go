package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"adhost/runtime/protocol"
	"adhost/runtime/schema"
)

// suiteDir finds ../shared/testdata/json-schema-test-suite/tests relative to
// the repository root (the first parent of the package directory holding
// go.mod).
func suiteDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
	suite := filepath.Join(dir, "..", "shared", "testdata", "json-schema-test-suite", "tests")
	if _, err := os.Stat(suite); err != nil {
		t.Skipf("JSON-Schema-Test-Suite not found at %s (expected in ../shared/testdata next to the repository): %v", suite, err)
	}
	return suite
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// TestJSONSchemaTestSuite runs the required tests (top-level files, not
// optional/) of draft7 and draft2020-12 through Compile/ValidateJSON.
//
// Skipped, and counted separately:
//   - refRemote.json: every test there needs schemas served from
//     http://localhost:1234, and the host never loads remote references.
//   - any other group whose schema fails to compile only because it refers
//     to http://localhost:1234: a remote "$ref" (some ref.json, anchor.json
//     and dynamicRef.json groups) or a custom meta-schema as "$schema"
//     (vocabulary.json), which the host refuses as a dialect.
//
// No format-assertion skips are needed: the required suites only check
// that "format" is an annotation (2020-12) or ignores non-strings
// (draft-07), which holds with format assertion off; format assertion
// tests live in optional/, which is not run.
func TestJSONSchemaTestSuite(t *testing.T) {
	root := suiteDir(t)
	var passed, failed, skipped int
	var failures []string
	for _, draft := range []string{"draft7", "draft2020-12"} {
		files, err := filepath.Glob(filepath.Join(root, draft, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no test files in %s/%s (%v)", root, draft, err)
		}
		sort.Strings(files)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var groups []suiteGroup
			if err := json.Unmarshal(b, &groups); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			base := draft + "/" + filepath.Base(file)
			for _, g := range groups {
				if filepath.Base(file) == "refRemote.json" {
					skipped += len(g.Tests)
					continue
				}
				s, err := schema.Compile(g.Schema)
				if err != nil {
					if c := protocol.CodeOf(err); c != protocol.CodeInvalidSchema {
						t.Errorf("%s: %s: compile error code %s, want INVALID_SCHEMA", base, g.Description, c)
					}
					if needsRemote(err, g.Schema) {
						skipped += len(g.Tests)
						continue
					}
					failed += len(g.Tests)
					failures = append(failures, fmt.Sprintf("%s: %s: compile: %v", base, g.Description, err))
					continue
				}
				for _, tc := range g.Tests {
					err := s.ValidateJSON(tc.Data)
					if got := err == nil; got != tc.Valid {
						failed++
						failures = append(failures, fmt.Sprintf("%s: %s: %s: valid = %v, want %v (%v)",
							base, g.Description, tc.Description, got, tc.Valid, err))
						continue
					}
					if err != nil {
						var ve *schema.ValidationError
						if !errors.As(err, &ve) {
							failed++
							failures = append(failures, fmt.Sprintf("%s: %s: %s: error %T, want *ValidationError", base, g.Description, tc.Description, err))
							continue
						}
					}
					passed++
				}
			}
		}
	}
	// Printed (not t.Log) so the tally shows without -v.
	fmt.Printf("jsonschema: %d passed, %d failed (%d skipped: remote references)\n", passed, failed, skipped)
	for _, f := range failures {
		t.Error(f)
	}
	if passed == 0 {
		t.Fatal("no suite test ran")
	}
}

// needsRemote reports whether a compile failure is only due to a resource
// the suite serves from http://localhost:1234: a remote reference, or a
// custom meta-schema in "$schema" (vocabulary.json), which the host refuses
// as an unsupported dialect before any load.
func needsRemote(err error, doc json.RawMessage) bool {
	var ext *schema.ExternalRefError
	if errors.As(err, &ext) {
		return strings.HasPrefix(ext.URL, "http://localhost:1234")
	}
	if errors.Is(err, schema.ErrDialect) {
		var root struct {
			Schema string `json:"$schema"`
		}
		return json.Unmarshal(doc, &root) == nil && strings.HasPrefix(root.Schema, "http://localhost:1234")
	}
	return false
}
