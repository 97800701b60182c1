package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/runtime/schema"
	"adhost/sdk-plugin/sdktest"
)

const doc = `{"items":[{"name":"a","price":1.5},{"name":"b","price":2}],"big":12345678901234567890123}`

func TestQuery(t *testing.T) {
	for query, want := range map[string]string{
		`.items[].name`: `["a","b"]`,
		`[.items[] | select(.price > 1.6) | .name]`: `[["b"]]`,
		`.items | map(.price) | add`:                `[3.5]`,
		`.big`:                                      `[12345678901234567890123]`,
		`.missing`:                                  `[null]`,
		`empty`:                                     `[]`,
		`.items | length`:                           `[2]`,
		`env`:                                       `[{}]`,
		`$ENV`:                                      `[{}]`,
		`first(range(10000000))`:                    `[0]`,
		`limit(3; repeat(1))`:                       `[1,1,1]`,
		`"<&>"`:                                     `["<&>"]`,
	} {
		got, err := Query(t.Context(), query, json.RawMessage(doc))
		if err != nil || string(got) != want {
			t.Errorf("Query(%s) = %s, %v; want %s", query, got, err, want)
		}
	}
}

func TestQueryErrors(t *testing.T) {
	for _, tc := range []struct {
		query, doc, msg string
		pos             int
	}{
		{`.items[`, doc, "query does not parse: unexpected EOF", 7},
		{`.items | foo`, doc, "query does not compile: function not defined: foo/0", -1},
		{`.items + 1`, doc, "cannot add: array", -1},
		{`error("boom")`, doc, "error: boom", -1},
		{`input`, doc, "", -1},
		{`range(1001)`, doc, "query produced more than 1000 results", -1},
		{`[range(300000)] | tostring`, doc, "results larger than 262144 bytes", -1},
		{`import "a" as a; .`, doc, "", -1},
		{`.`, `{nope`, "document is not JSON", -1},
		{strings.Repeat(" ", MaxQueryBytes+1), doc, "query longer than 4096 bytes", -1},
	} {
		_, err := Query(t.Context(), tc.query, json.RawMessage(tc.doc))
		var qe *QueryError
		if !errors.As(err, &qe) || qe.Pos != tc.pos || !strings.HasPrefix(qe.Msg, tc.msg) {
			t.Errorf("Query(%.40s) error = %#v, want %q at %d", tc.query, err, tc.msg, tc.pos)
		}
	}
	// At the bounds.
	if got, err := Query(t.Context(), `range(1000)`, nil); err != nil || strings.Count(string(got), ",") != 999 {
		t.Errorf("1000 results: %v", err)
	}
	if _, err := Query(t.Context(), strings.Repeat(" ", MaxQueryBytes-1)+".", nil); err != nil {
		t.Errorf("a 4096-byte query: %v", err)
	}
}

// FuzzQuery: no query panics; every answer is JSON within the bounds.
// Queries that would run long are the host watchdog's business, so the
// fuzzer's queries get a deadline.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{`.a`, `.[]?`, `[.[] | tostring]`, `reduce .[] as $x (0; . + $x)`, `path(..)`, `to_entries`, `.a as [$x, {b: $y}] | $y`, `@base64d`, `ltrimstr("x")`} {
		f.Add(s, `{"a":[1,{"b":"x"}]}`)
	}
	f.Fuzz(func(t *testing.T, query, document string) {
		ctx, cancel := context.WithTimeout(context.Background(), 200_000_000)
		defer cancel()
		out := answer(ctx, query, json.RawMessage(document))
		if !json.Valid(out) || len(out) > MaxOutputBytes+64 {
			t.Fatalf("answer(%q, %q) = %.200s", query, document, out)
		}
	})
}

func TestManifest(t *testing.T) {
	m := plugintest.CheckToolManifest(t, ID, tools{})
	if m.Network != nil || m.KV || m.Tool(ToolName).HasSideEffects() {
		t.Fatalf("manifest grants more than json_query needs: %+v", m)
	}
}

func TestInvoke(t *testing.T) {
	s, err := schema.Compile(plugintest.Manifest(t, ID).ToolDefs()[0].OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"query":".a","document":{"a":[1,2]}}`:   `{"results":[[1,2]]}`,
		`{"query":".[]","document":[1,"x",null]}`: `{"results":[1,"x",null]}`,
		`{"query":".a[","document":{}}`:           `{"error":"query does not parse: unexpected EOF","position":3}`,
		`{"query":".a.b","document":{"a":5}}`:     `{"error":"expected an object but got: number (5)"}`,
	} {
		res := sdktest.Invoke(t, tools{}, &abi.ToolInvokeInput{CallID: "c1", Name: ToolName, Arguments: json.RawMessage(args)}, sdktest.Options{})
		if res.Status != abi.StatusOK || string(res.Output) != want {
			t.Errorf("%s: status %d output %s error %+v", args, res.Status, res.Output, res.Error)
			continue
		}
		if err := s.ValidateJSON(res.Output); err != nil {
			t.Errorf("%s: output does not match the declared schema: %v", args, err)
		}
	}
}
