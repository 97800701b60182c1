package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"adhost/runtime/protocol"
	"adhost/runtime/schema"
)

func mustCompile(t testing.TB, s string) *schema.Schema {
	t.Helper()
	c, err := schema.Compile(json.RawMessage(s))
	if err != nil {
		t.Fatalf("Compile(%s): %v", s, err)
	}
	return c
}

func TestCompileFailures(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		cause        error // nil: any cause
	}{
		{"malformed", `{"type":`, schema.ErrMalformed},
		{"trailing data", `{} {}`, schema.ErrMalformed},
		{"empty", ``, schema.ErrMalformed},
		{"invalid utf8", "{\"description\":\"\xff\"}", schema.ErrMalformed},
		{"not a schema", `"string"`, nil},
		{"bad type keyword", `{"type":5}`, nil},
		{"bad type name", `{"type":"strin"}`, nil},
		{"bad pattern", `{"pattern":"("}`, nil},
		{"bad pattern 2020", `{"$schema":"https://json-schema.org/draft/2020-12/schema","pattern":"[a"}`, nil},
		{"items array in 2020-12", `{"$schema":"https://json-schema.org/draft/2020-12/schema","items":[{}]}`, nil},
		{"unresolvable local ref", `{"$ref":"#/definitions/missing"}`, nil},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#"}`, schema.ErrDialect},
		{"draft-06", `{"$schema":"http://json-schema.org/draft-06/schema#"}`, schema.ErrDialect},
		{"2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema"}`, schema.ErrDialect},
		{"latest alias", `{"$schema":"http://json-schema.org/schema#"}`, schema.ErrDialect},
		{"draft-07 over https", `{"$schema":"https://json-schema.org/draft-07/schema#"}`, schema.ErrDialect},
		{"2020-12 over http", `{"$schema":"http://json-schema.org/draft/2020-12/schema"}`, schema.ErrDialect},
		{"two hashes", `{"$schema":"http://json-schema.org/draft-07/schema##"}`, schema.ErrDialect},
		{"custom meta-schema", `{"$schema":"https://example.com/meta"}`, schema.ErrDialect},
		{"non-string $schema", `{"$schema":7}`, schema.ErrDialect},
		{"null $schema", `{"$schema":null}`, schema.ErrDialect},
		{"async", `{"$async":true,"type":"object"}`, schema.ErrAsync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := schema.Compile(json.RawMessage(tc.schema))
			if protocol.CodeOf(err) != protocol.CodeInvalidSchema {
				t.Fatalf("err = %v, want INVALID_SCHEMA", err)
			}
			if s != nil {
				t.Error("schema returned with an error")
			}
			if pe := protocol.AsPublic(err); pe.Message != protocol.Message(protocol.CodeInvalidSchema) || pe.Retryable {
				t.Errorf("public error = %+v, want the fixed INVALID_SCHEMA", pe.Info())
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("cause = %v, want %v", err, tc.cause)
			}
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	for _, s := range []string{
		`{}`, `true`, `false`,
		`{"$schema":"http://json-schema.org/draft-07/schema#"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema"}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema"}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema#"}`,
		`{"$async":false}`,
		`{"unknownKeyword":{"anything":1},"type":"object"}`,  // non-strict
		`{"$ref":"http://json-schema.org/draft-07/schema#"}`, // embedded meta-schema, no I/O
		`{"$id":"https://example.com/a","definitions":{"x":{"$id":"b","type":"string"}},"$ref":"b"}`,
	} {
		if _, err := schema.Compile(json.RawMessage(s)); err != nil {
			t.Errorf("Compile(%s): %v", s, err)
		}
	}
}

func TestDialects(t *testing.T) {
	// Without $schema, draft-07: prefixItems is an unknown keyword and
	// items as an array is tuple validation.
	d7 := mustCompile(t, `{"prefixItems":[{"type":"string"}],"items":[{"type":"integer"}]}`)
	if err := d7.ValidateJSON([]byte(`[1]`)); err != nil {
		t.Errorf("draft-07 default: %v", err)
	}
	if err := d7.ValidateJSON([]byte(`["x"]`)); err == nil {
		t.Error("draft-07 default: tuple items not enforced")
	}
	d2020 := mustCompile(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}]}`)
	if err := d2020.ValidateJSON([]byte(`[1]`)); err == nil {
		t.Error("2020-12: prefixItems not enforced")
	}
	if err := d2020.ValidateJSON([]byte(`["x",1]`)); err != nil {
		t.Errorf("2020-12: %v", err)
	}
}

func TestFormatNotAsserted(t *testing.T) {
	for _, dialect := range []string{"", `"$schema":"https://json-schema.org/draft/2020-12/schema",`} {
		for _, f := range []string{"email", "date-time", "uri", "ipv4", "uuid", "regex", "hostname", "date", "json-pointer", "unknown-format"} {
			s := mustCompile(t, `{`+dialect+`"format":"`+f+`"}`)
			if err := s.ValidateJSON([]byte(`"(not a ` + f + `"`)); err != nil {
				t.Errorf("format %s (%q) asserted: %v", f, dialect, err)
			}
		}
	}
	// The regex format must not disable pattern checks.
	s := mustCompile(t, `{"pattern":"^a+$","format":"regex"}`)
	if s.ValidateJSON([]byte(`"b"`)) == nil {
		t.Error("pattern not enforced")
	}
}

func TestExternalRefsRefused(t *testing.T) {
	dir := t.TempDir()
	// If the host read this file, compiling would succeed.
	target := filepath.Join(dir, "other.json")
	if err := os.WriteFile(target, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"string"}`)
	}))
	defer srv.Close()

	for _, tc := range []struct{ name, schema string }{
		{"file", `{"$ref":"file://` + filepath.ToSlash(target) + `"}`},
		{"file in definitions", `{"definitions":{"a":{"$ref":"file://` + filepath.ToSlash(target) + `#"}},"properties":{"x":{"$ref":"#/definitions/a"}}}`},
		{"file via $id base", `{"$id":"file://` + filepath.ToSlash(dir) + `/root.json","$ref":"other.json"}`},
		{"relative", `{"$ref":"other.json"}`},
		{"http", `{"$ref":"` + srv.URL + `/schema.json"}`},
		{"http 2020-12", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"` + srv.URL + `/s.json"}`},
		{"https", `{"$ref":"https://example.com/schema.json"}`},
		{"http dynamicRef target", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicRef":"` + srv.URL + `/x#meta"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schema.Compile(json.RawMessage(tc.schema))
			if protocol.CodeOf(err) != protocol.CodeInvalidSchema {
				t.Fatalf("err = %v, want INVALID_SCHEMA", err)
			}
			var ext *schema.ExternalRefError
			if !errors.As(err, &ext) {
				t.Fatalf("cause = %v, want *ExternalRefError", err)
			}
			if strings.Contains(ext.Error(), dir) || strings.Contains(ext.Error(), srv.URL) {
				t.Errorf("error text %q echoes the URL", ext.Error())
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the HTTP server was contacted %d times", n)
	}
}

func TestNoSharedIDRegistry(t *testing.T) {
	mustCompile(t, `{"$id":"https://example.com/shared.json","type":"string"}`)
	_, err := schema.Compile(json.RawMessage(`{"$ref":"https://example.com/shared.json"}`))
	var ext *schema.ExternalRefError
	if !errors.As(err, &ext) {
		t.Fatalf("second schema resolved the first one's $id: err = %v", err)
	}
}

func TestValidationErrors(t *testing.T) {
	s := mustCompile(t, `{"type":"object","required":["risks","b"],"properties":{
		"risks":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2},
		"n":{"type":"integer","enum":[1,2]},"b":{}},"additionalProperties":false}`)
	if err := s.ValidateJSON([]byte(`{"risks":["a","bcd"],"b":1}`)); err != nil {
		t.Fatalf("valid instance: %v", err)
	}
	inst := `{"risks":["secret-value-1","x","y"],"n":7.5,"extra-key-secret":"secret-value-2"}`
	var msgs []string
	for range 20 { // the library's error order varies; ours must not
		err := s.ValidateJSON([]byte(inst))
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v, want *ValidationError", err)
		}
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Fatalf("unstable message:\n%s\n%s", msgs[0], m)
		}
	}
	want := "schema: instance does not match at #/additionalProperties; #/properties/n/type; #/properties/risks/items/maxLength; #/properties/risks/maxItems; #/required"
	if msgs[0] != want {
		t.Errorf("message\n%s\nwant\n%s", msgs[0], want)
	}
	for _, secret := range []string{"secret", "7.5", "extra-key"} {
		if strings.Contains(msgs[0], secret) {
			t.Errorf("message echoes instance data %q", secret)
		}
	}
}

func TestValidateValues(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}`)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"n":1}`, true}, {`{"n":1.0}`, true}, {`{"n":1.5}`, false},
		{`{"n":9007199254740993}`, true}, {`{"n":9007199254740994}`, false},
		{` {"n":2} `, true},
	} {
		if err := s.ValidateJSON([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("ValidateJSON(%s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	for _, bad := range []string{``, `{`, `{"n":1} x`, `{"n":1}{}`, "\"\xff\"", "\ufeff{}", `NaN`} {
		if err := s.ValidateJSON([]byte(bad)); !errors.Is(err, schema.ErrInvalidJSON) {
			t.Errorf("ValidateJSON(%q) = %v, want ErrInvalidJSON", bad, err)
		}
	}
	// Validate takes values from encoding/json too.
	var v any
	if err := json.Unmarshal([]byte(`{"n":3}`), &v); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("Validate(float64 value): %v", err)
	}
	if err := s.Validate(map[string]any{"n": "x"}); err == nil {
		t.Error("Validate accepted a string for an integer")
	}
}

func TestConcurrentValidate(t *testing.T) {
	s := mustCompile(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"a":{"type":"string","pattern":"^x"},"b":{"$ref":"#/$defs/n"}},
		"$defs":{"n":{"type":"integer"}},"unevaluatedProperties":false,"format":"regex"}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				good := fmt.Sprintf(`{"a":"x%d","b":%d}`, i, j)
				bad := fmt.Sprintf(`{"a":"y%d","b":%d,"c":1}`, i, j)
				if err := s.ValidateJSON([]byte(good)); err != nil {
					t.Errorf("good: %v", err)
					return
				}
				if err := s.ValidateJSON([]byte(bad)); err == nil {
					t.Error("bad accepted")
					return
				}
			}
		})
	}
	wg.Wait()
}

// doc14 is a ~1.4 KB instance, the size DESIGN §7 measured.
var (
	benchSchema = `{"type":"object","required":["title","risks","owner"],"additionalProperties":false,
	"properties":{"title":{"type":"string","maxLength":200},"owner":{"type":"string"},
	"risks":{"type":"array","maxItems":20,"items":{"type":"object","required":["name","severity"],
	"properties":{"name":{"type":"string"},"severity":{"enum":["low","medium","high"]},
	"mitigation":{"type":"string"},"score":{"type":"number","minimum":0,"maximum":10}}}},
	"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}}}`
	doc14 = func() []byte {
		var b strings.Builder
		b.WriteString(`{"title":"Billing migration risk review","owner":"ops-team","tags":["billing","migration","q3"],"risks":[`)
		for i := range 10 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"risk number %d with a description","severity":"medium","mitigation":"rollback within the four hour window","score":%d.5}`, i, i%9)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}()
)

func BenchmarkValidateJSON(b *testing.B) {
	s := mustCompile(b, benchSchema)
	if err := s.ValidateJSON(doc14); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc14)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateJSON(doc14); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	raw := json.RawMessage(benchSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.Compile(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, benchSchema)
	v, err := schema.Parse(doc14)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCompile: untrusted schemas never panic the compiler or the validator,
// and every failure is INVALID_SCHEMA.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{}`, `true`, benchSchema,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}],"unevaluatedItems":false}`,
		`{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/a"}}}`,
		`{"$ref":"file:///etc/passwd"}`, `{"pattern":"(a+)+$"}`, `{"$async":true}`,
		`{"$id":"http://x/","$defs":{"a":{"$anchor":"a"}},"$ref":"#a"}`,
	} {
		f.Add([]byte(s), []byte(`{"a":[1,"x",null,{"b":true}]}`))
	}
	f.Fuzz(func(t *testing.T, raw, inst []byte) {
		s, err := schema.Compile(raw)
		if err != nil {
			if c := protocol.CodeOf(err); c != protocol.CodeInvalidSchema {
				t.Fatalf("code %s", c)
			}
			return
		}
		err = s.ValidateJSON(inst)
		var ve *schema.ValidationError
		if err != nil && !errors.Is(err, schema.ErrInvalidJSON) && !errors.As(err, &ve) {
			t.Fatalf("unexpected error type %T", err)
		}
	})
}
