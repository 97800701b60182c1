package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"adhost/runtime/protocol"
)

// The accepted "$schema" values (after removing one trailing '#').
const (
	Draft07URL   = "http://json-schema.org/draft-07/schema"
	Draft2020URL = "https://json-schema.org/draft/2020-12/schema"
)

// rootURL is the base URI of a compiled document without "$id". It is not
// a file path, so relative references never resolve into the filesystem;
// they resolve under this URI and are then refused by the loader.
const rootURL = "https://schema.adhost.invalid/root.json"

// Errors carried as the private cause of an INVALID_SCHEMA *protocol.Error.
// None of them holds an instance value.
var (
	// ErrMalformed: the schema is not a single valid JSON value.
	ErrMalformed = errors.New("schema: not valid JSON")
	// ErrDialect: "$schema" is not a string naming draft-07 or 2020-12.
	ErrDialect = errors.New("schema: unsupported $schema (only draft-07 and 2020-12)")
	// ErrAsync: the schema is asynchronous ("$async": true).
	ErrAsync = errors.New("schema: asynchronous schemas are not supported")
	// ErrInvalidJSON is returned by ValidateJSON when the instance is not a
	// single valid JSON value (wire-core §9: "not valid JSON").
	ErrInvalidJSON = errors.New("schema: instance is not valid JSON")
)

// ExternalRefError reports a reference the schema would need to load from
// outside itself (file, http(s), or any other URL). The host never performs
// such a load. URL comes from the request: treat it as request data.
type ExternalRefError struct {
	URL string
}

func (e *ExternalRefError) Error() string {
	scheme := "?"
	if u, err := url.Parse(e.URL); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	return "schema: external reference refused (scheme " + scheme + ")"
}

// Schema is a compiled JSON Schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// Compile compiles a schema document. Any failure is a *protocol.Error with
// code INVALID_SCHEMA whose private cause is ErrMalformed, ErrDialect,
// ErrAsync, an *ExternalRefError, or the library's compile error.
func Compile(raw json.RawMessage) (*Schema, error) {
	s, err := compile(raw)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeInvalidSchema, err)
	}
	return s, nil
}

func compile(raw []byte) (*Schema, error) {
	if !utf8.Valid(raw) {
		return nil, ErrMalformed
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, ErrMalformed
	}
	if err := checkRoot(doc); err != nil {
		return nil, err
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	loader := &refusingLoader{}
	c.UseLoader(loader)
	for _, name := range builtinFormats {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
	}
	// "regex" is the one format the library does not let us override. Its
	// validator calls the compiler's regexp engine, so the engine checks
	// patterns while compiling (invalid "pattern" values must fail, as
	// upstream's compile does) and accepts everything once compiled, which
	// turns the "regex" format into an annotation like every other format.
	var compiled atomic.Bool
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) {
		if compiled.Load() {
			return acceptAll{}, nil
		}
		return regexp.Compile(s)
	})

	if err := c.AddResource(rootURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(rootURL)
	if loader.refused != "" {
		return nil, &ExternalRefError{URL: loader.refused}
	}
	if err != nil {
		return nil, err
	}
	compiled.Store(true)
	return &Schema{s: sch}, nil
}

// checkRoot applies the dialect and $async rules to the root document.
func checkRoot(doc any) error {
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil // a boolean schema (or an invalid one the compiler rejects)
	}
	if v, ok := obj["$schema"]; ok {
		s, ok := v.(string)
		if !ok {
			return ErrDialect
		}
		switch strings.TrimSuffix(s, "#") {
		case Draft07URL, Draft2020URL:
		default:
			return ErrDialect
		}
	}
	if v, ok := obj["$async"]; ok && v == true {
		return ErrAsync
	}
	return nil
}

// builtinFormats are the formats the library asserts by default for
// draft-07; each is registered as a no-op.
var builtinFormats = []string{
	"json-pointer", "relative-json-pointer", "uuid", "duration", "period",
	"ipv4", "ipv6", "hostname", "email", "date", "time", "date-time", "uri",
	"iri", "uri-reference", "iri-reference", "uri-template", "semver",
}

type acceptAll struct{}

func (acceptAll) String() string          { return "" }
func (acceptAll) MatchString(string) bool { return true }

// refusingLoader refuses every load and remembers the first URL asked for.
// One loader serves one compile, on one goroutine.
type refusingLoader struct {
	refused string
}

func (l *refusingLoader) Load(u string) (any, error) {
	if l.refused == "" {
		l.refused = u
	}
	return nil, &ExternalRefError{URL: u}
}

// ValidationError reports that an instance does not match a schema.
// Locations are the failing keywords' locations in the schema (JSON
// pointers), sorted and de-duplicated; they never contain instance data.
type ValidationError struct {
	Locations []string
}

// maxLocations bounds the Error string.
const maxLocations = 8

func (e *ValidationError) Error() string {
	locs := e.Locations
	more := ""
	if len(locs) > maxLocations {
		more = fmt.Sprintf("; and %d more", len(locs)-maxLocations)
		locs = locs[:maxLocations]
	}
	return "schema: instance does not match at " + strings.Join(locs, "; ") + more
}

// Validate validates a decoded JSON value: what jsonschema.UnmarshalJSON
// or encoding/json with UseNumber produce (json.Number, string, bool, nil,
// []any, map[string]any); float64 and integer Go types are accepted too.
// It returns nil or a *ValidationError.
func (s *Schema) Validate(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Locations: []string{"#"}}
	}
	return &ValidationError{Locations: locations(ve)}
}

// ValidateJSON parses raw as one JSON value (numbers kept exact) and
// validates it. A parse failure is ErrInvalidJSON; a mismatch a
// *ValidationError.
func (s *Schema) ValidateJSON(raw []byte) error {
	v, err := Parse(raw)
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// Parse decodes raw as exactly one JSON value the way Validate wants it
// (numbers as json.Number). Invalid UTF-8, a syntax error or trailing data
// is ErrInvalidJSON.
func Parse(raw []byte) (any, error) {
	if !utf8.Valid(raw) {
		return nil, ErrInvalidJSON
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, ErrInvalidJSON
	}
	return v, nil
}

// locations collects the keyword locations of the leaf errors of ve,
// sorted: the library's order varies between runs.
func locations(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, keywordLocation(e))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		out = []string{"#"}
	}
	return out
}

// keywordLocation is the fragment of the failing keyword's absolute
// location, e.g. "#/properties/risks/maxItems". The schema URL part is
// dropped: it is either rootURL or an "$id" from the request.
func keywordLocation(e *jsonschema.ValidationError) string {
	frag := ""
	if i := strings.IndexByte(e.SchemaURL, '#'); i >= 0 {
		frag = e.SchemaURL[i+1:]
	}
	for _, p := range e.ErrorKind.KeywordPath() {
		frag += "/" + escapePointer(p)
	}
	return "#" + frag
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
