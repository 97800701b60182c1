package protocol_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"adhost/runtime/protocol"
)

// base is a minimal valid request; with() inserts extra members.
const base = `"provider":"p","model":"m","input":"hi"`

func with(extra string) string {
	if extra == "" {
		return "{" + base + "}"
	}
	return "{" + base + "," + extra + "}"
}

// q JSON-quotes s.
func q(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func list(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func obj(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

const (
	rocket = "\U0001F680" // non-BMP: 2 UTF-16 units, 4 UTF-8 bytes
	eacute = "é"          // BMP: 1 unit, 2 bytes
)

func TestDecodeRunRequestRules(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		// Body shape.
		{"minimal", with(""), true},
		{"example §3.5", `{"provider":"acme-api","model":"acme-large-2","input":"List three risks in the attached plan.","instructions":"Answer tersely.","tools":["lookup_ticket"],"requiredCapabilities":["tools","textStreaming"],"maxSteps":4,"idleTimeoutMs":120000,"metadata":{"app":"planner"}}`, true},
		{"whitespace around", " \t\r\n" + with("") + " \n", true},
		{"empty body", ``, false},
		{"array body", `[` + with("") + `]`, false},
		{"string body", `"x"`, false},
		{"number body", `1`, false},
		{"null body", `null`, false},
		{"trailing garbage", with("") + `x`, false},
		{"second value", with("") + `{}`, false},
		{"trailing bracket", with("") + `]`, false},
		{"truncated", `{"provider":"p","model":"m","input":"hi"`, false},
		{"trailing comma", `{"provider":"p","model":"m","input":"hi",}`, false},
		{"single quotes", `{'provider':"p","model":"m","input":"hi"}`, false},
		{"leading BOM", "\ufeff" + with(""), false},
		{"invalid utf8 in string", `{"provider":"p","model":"m","input":"h` + "\xff" + `"}`, false},
		{"invalid utf8 outside string", with("") + "\xc3", false},
		{"raw control char in string", `{"provider":"p","model":"m","input":"a` + "\x01" + `"}`, false},
		{"escaped control char", with(`"instructions":"a\u0001\n"`), true},

		// Required fields.
		{"missing provider", `{"model":"m","input":"hi"}`, false},
		{"missing model", `{"provider":"p","input":"hi"}`, false},
		{"missing input", `{"provider":"p","model":"m"}`, false},
		{"null provider", `{"provider":null,"model":"m","input":"hi"}`, false},

		// Unknown and mis-cased fields.
		{"unknown field", with(`"bogus":1`), false},
		{"cased Provider", `{"Provider":"p","model":"m","input":"hi"}`, false},
		{"cased extra", with(`"Model":"m"`), false},
		{"messages field", with(`"messages":[]`), false},
		{"context field", with(`"context":{}`), false},
		{"unicode-escaped known name", `{"provider":"p","model":"m","\u0069nput":"hi"}`, true},

		// Extension fields are unknown on a core-only host.
		{"attachments", with(`"attachments":[]`), false},
		{"outputArtifact", with(`"outputArtifact":{"name":"a","mediaType":"text/plain"}`), false},
		{"retrieval", with(`"retrieval":{}`), false},
		{"session", with(`"session":{}`), false},
		{"approvals", with(`"approvals":{}`), false},
		{"applicationTools", with(`"applicationTools":[]`), false},

		// Null is never accepted for an optional field.
		{"null instructions", with(`"instructions":null`), false},
		{"null history", with(`"history":null`), false},
		{"null tools", with(`"tools":null`), false},
		{"null requiredCapabilities", with(`"requiredCapabilities":null`), false},
		{"null maxSteps", with(`"maxSteps":null`), false},
		{"null maxOutputTokens", with(`"maxOutputTokens":null`), false},
		{"null idleTimeoutMs", with(`"idleTimeoutMs":null`), false},
		{"null outputSchema", with(`"outputSchema":null`), false},
		{"null metadata", with(`"metadata":null`), false},
		{"null idempotencyKey", with(`"idempotencyKey":null`), false},
		{"null retry", with(`"retry":null`), false},
		{"null tool entry", with(`"tools":[null]`), false},
		{"null metadata value", with(`"metadata":{"a":null}`), false},
		{"null retry member", with(`"retry":{"maxAttempts":1,"baseDelayMs":null}`), false},

		// Wrong types.
		{"tools string", with(`"tools":"x"`), false},
		{"tools number entry", with(`"tools":[1]`), false},
		{"metadata number value", with(`"metadata":{"a":1}`), false},
		{"metadata array", with(`"metadata":[]`), false},
		{"input number", `{"provider":"p","model":"m","input":1}`, false},
		{"maxSteps string", with(`"maxSteps":"8"`), false},
		{"maxSteps bool", with(`"maxSteps":true`), false},
		{"maxSteps array", with(`"maxSteps":[8]`), false},
		{"history object", with(`"history":{}`), false},
		{"retry array", with(`"retry":[1]`), false},
		{"outputSchema array", with(`"outputSchema":[]`), false},
		{"outputSchema true", with(`"outputSchema":true`), false},
		{"outputSchema string", with(`"outputSchema":"{}"`), false},
		{"outputSchema object", with(`"outputSchema":{"type":"object"}`), true},
		{"outputSchema empty", with(`"outputSchema":{}`), true},

		// Integers: integral doubles accepted.
		{"maxSteps 8", with(`"maxSteps":8`), true},
		{"maxSteps 8.0", with(`"maxSteps":8.0`), true},
		{"maxSteps 8e0", with(`"maxSteps":8e0`), true},
		{"maxSteps 80e-1", with(`"maxSteps":80e-1`), true},
		{"maxSteps 0.8E1", with(`"maxSteps":0.8E1`), true},
		{"maxSteps 8.5", with(`"maxSteps":8.5`), false},
		{"maxSteps 1e400", with(`"maxSteps":1e400`), false},
		{"maxSteps -1", with(`"maxSteps":-1`), false},
		{"maxSteps leading zero", with(`"maxSteps":08`), false},
		{"maxSteps plus", with(`"maxSteps":+8`), false},
		{"maxSteps hex", with(`"maxSteps":0x8`), false},
		{"maxSteps NaN", with(`"maxSteps":NaN`), false},
		{"idleTimeoutMs -0", with(`"idleTimeoutMs":-0`), true},
		{"idleTimeoutMs underflow", with(`"idleTimeoutMs":1e-400`), true},
		{"idleTimeoutMs 0.5", with(`"idleTimeoutMs":0.5`), false},

		// Integer ranges at the edges.
		{"maxSteps 1", with(`"maxSteps":1`), true},
		{"maxSteps 0", with(`"maxSteps":0`), false},
		{"maxSteps 64", with(`"maxSteps":64`), true},
		{"maxSteps 65", with(`"maxSteps":65`), false},
		{"maxOutputTokens 1", with(`"maxOutputTokens":1`), true},
		{"maxOutputTokens 0", with(`"maxOutputTokens":0`), false},
		{"maxOutputTokens 65536", with(`"maxOutputTokens":65536`), true},
		{"maxOutputTokens 65537", with(`"maxOutputTokens":65537`), false},
		{"idleTimeoutMs 0", with(`"idleTimeoutMs":0`), true},
		{"idleTimeoutMs -1", with(`"idleTimeoutMs":-1`), false},
		{"idleTimeoutMs max", with(`"idleTimeoutMs":2147483647`), true},
		{"idleTimeoutMs max+1", with(`"idleTimeoutMs":2147483648`), false},
		{"idleTimeoutMs huge", with(`"idleTimeoutMs":9223372036854775808`), false},

		// Retry.
		{"retry minimal", with(`"retry":{"maxAttempts":1}`), true},
		{"retry full", with(`"retry":{"maxAttempts":5,"baseDelayMs":0,"maxDelayMs":60000}`), true},
		{"retry attempts 0", with(`"retry":{"maxAttempts":0}`), false},
		{"retry attempts 6", with(`"retry":{"maxAttempts":6}`), false},
		{"retry attempts 2.5", with(`"retry":{"maxAttempts":2.5}`), false},
		{"retry missing attempts", with(`"retry":{"baseDelayMs":1}`), false},
		{"retry empty", with(`"retry":{}`), false},
		{"retry base -1", with(`"retry":{"maxAttempts":1,"baseDelayMs":-1}`), false},
		{"retry base 60001", with(`"retry":{"maxAttempts":1,"baseDelayMs":60001}`), false},
		{"retry maxDelay 60001", with(`"retry":{"maxAttempts":1,"maxDelayMs":60001}`), false},
		{"retry unknown member", with(`"retry":{"maxAttempts":1,"jitter":true}`), false},
		{"retry cased member", with(`"retry":{"MaxAttempts":1}`), false},

		// Patterns.
		{"provider dotted", `{"provider":"a.b_c-d9","model":"m","input":"hi"}`, true},
		{"provider leading dot", `{"provider":".a","model":"m","input":"hi"}`, false},
		{"provider leading dash", `{"provider":"-a","model":"m","input":"hi"}`, false},
		{"provider empty", `{"provider":"","model":"m","input":"hi"}`, false},
		{"provider colon", `{"provider":"a:b","model":"m","input":"hi"}`, false},
		{"provider space", `{"provider":"a b","model":"m","input":"hi"}`, false},
		{"provider trailing newline", `{"provider":"a\n","model":"m","input":"hi"}`, false},
		{"provider non-ascii", `{"provider":"a` + eacute + `","model":"m","input":"hi"}`, false},
		{"provider 80", `{"provider":"` + strings.Repeat("a", 80) + `","model":"m","input":"hi"}`, true},
		{"provider 81", `{"provider":"` + strings.Repeat("a", 81) + `","model":"m","input":"hi"}`, false},
		{"model brackets", `{"provider":"p","model":"model[1m]","input":"hi"}`, true},
		{"model slash colon", `{"provider":"p","model":"org/model:tag-1.5_x","input":"hi"}`, true},
		{"model leading bracket", `{"provider":"p","model":"[m","input":"hi"}`, false},
		{"model space", `{"provider":"p","model":"m x","input":"hi"}`, false},
		{"model 200", `{"provider":"p","model":"` + strings.Repeat("m", 200) + `","input":"hi"}`, true},
		{"model 201", `{"provider":"p","model":"` + strings.Repeat("m", 201) + `","input":"hi"}`, false},
		{"tool underscore first", with(`"tools":["_x9"]`), true},
		{"tool digit first", with(`"tools":["9x"]`), false},
		{"tool dash", with(`"tools":["a-b"]`), false},
		{"tool dot", with(`"tools":["a.b"]`), false},
		{"tool 64", with(`"tools":["` + strings.Repeat("t", 64) + `"]`), true},
		{"tool 65", with(`"tools":["` + strings.Repeat("t", 65) + `"]`), false},
		{"tool empty", with(`"tools":[""]`), false},
		{"tools empty list", with(`"tools":[]`), true},
		{"tools duplicates are semantic", with(`"tools":["a","a"]`), true},
		{"capability dotted", with(`"requiredCapabilities":["a.b-c_d"]`), true},
		{"capability digit first", with(`"requiredCapabilities":["1a"]`), false},
		{"capability underscore first", with(`"requiredCapabilities":["_a"]`), false},
		{"capability 80", with(`"requiredCapabilities":["` + strings.Repeat("c", 80) + `"]`), true},
		{"capability 81", with(`"requiredCapabilities":["` + strings.Repeat("c", 81) + `"]`), false},
		{"capability duplicate", with(`"requiredCapabilities":["tools","tools"]`), false},
		{"capability case differs", with(`"requiredCapabilities":["tools","Tools"]`), true},
		{"idempotencyKey colon", with(`"idempotencyKey":"a:b.c_d-e"`), true},
		{"idempotencyKey slash", with(`"idempotencyKey":"a/b"`), false},
		{"idempotencyKey empty", with(`"idempotencyKey":""`), false},
		{"idempotencyKey 128", with(`"idempotencyKey":"` + strings.Repeat("k", 128) + `"`), true},
		{"idempotencyKey 129", with(`"idempotencyKey":"` + strings.Repeat("k", 129) + `"`), false},

		// Array counts at the edges.
		{"tools 32", with(`"tools":` + list(32, func(i int) string { return fmt.Sprintf(`"t%d"`, i) })), true},
		{"tools 33", with(`"tools":` + list(33, func(i int) string { return fmt.Sprintf(`"t%d"`, i) })), false},
		{"capabilities 32", with(`"requiredCapabilities":` + list(32, func(i int) string { return fmt.Sprintf(`"c%d"`, i) })), true},
		{"capabilities 33", with(`"requiredCapabilities":` + list(33, func(i int) string { return fmt.Sprintf(`"c%d"`, i) })), false},
		{"history 100", with(`"history":` + list(100, func(int) string { return `{"role":"user","content":"x"}` })), true},
		{"history 101", with(`"history":` + list(101, func(int) string { return `{"role":"user","content":"x"}` })), false},

		// History items.
		{"history assistant", with(`"history":[{"role":"assistant","content":""}]`), true},
		{"history role tool", with(`"history":[{"role":"tool","content":"x"}]`), false},
		{"history role system", with(`"history":[{"role":"system","content":"x"}]`), false},
		{"history role cased", with(`"history":[{"role":"User","content":"x"}]`), false},
		{"history missing role", with(`"history":[{"content":"x"}]`), false},
		{"history missing content", with(`"history":[{"role":"user"}]`), false},
		{"history extra member", with(`"history":[{"role":"user","content":"x","name":"n"}]`), false},
		{"history null content", with(`"history":[{"role":"user","content":null}]`), false},
		{"history string item", with(`"history":["x"]`), false},
		{"history null item", with(`"history":[null]`), false},
		{"history nested junk skipped", with(`"history":[{"role":"user","content":"x","extra":{"a":[1,{"b":2}]}}]`), false},

		// Metadata.
		{"metadata empty", with(`"metadata":{}`), true},
		{"metadata empty key", with(`"metadata":{"":"v"}`), true},
		{"metadata 32", with(`"metadata":` + obj(32, func(i int) string { return fmt.Sprintf(`"k%d":"v"`, i) })), true},
		{"metadata 33", with(`"metadata":` + obj(33, func(i int) string { return fmt.Sprintf(`"k%d":"v"`, i) })), false},
		{"metadata 33 with dup = 32", with(`"metadata":` + obj(33, func(i int) string { return fmt.Sprintf(`"k%d":"v"`, i%32) })), true},
		{"metadata key 80", with(`"metadata":{"` + strings.Repeat("k", 80) + `":"v"}`), true},
		{"metadata key 81", with(`"metadata":{"` + strings.Repeat("k", 81) + `":"v"}`), false},
		{"metadata key 79+rocket", with(`"metadata":{"` + strings.Repeat("k", 78) + rocket + `":"v"}`), true},
		{"metadata key 79+rocket over", with(`"metadata":{"` + strings.Repeat("k", 79) + rocket + `":"v"}`), false},
		{"metadata value 500", with(`"metadata":{"k":"` + strings.Repeat("v", 500) + `"}`), true},
		{"metadata value 501", with(`"metadata":{"k":"` + strings.Repeat("v", 501) + `"}`), false},
		{"metadata value 250 rockets", with(`"metadata":{"k":"` + strings.Repeat(rocket, 250) + `"}`), true},
		{"metadata value 250 rockets+1", with(`"metadata":{"k":"` + strings.Repeat(rocket, 250) + `v"}`), false},
		{"metadata value 500 BMP", with(`"metadata":{"k":"` + strings.Repeat(eacute, 500) + `"}`), true},
		{"metadata value object", with(`"metadata":{"k":{}}`), false},

		// UTF-16 string lengths at the edges.
		{"input empty", `{"provider":"p","model":"m","input":""}`, false},
		{"input 1", `{"provider":"p","model":"m","input":"x"}`, true},
		{"input 1 rocket", `{"provider":"p","model":"m","input":"` + rocket + `"}`, true},
		{"input 100000", `{"provider":"p","model":"m","input":"` + strings.Repeat("x", 100_000) + `"}`, true},
		{"input 100001", `{"provider":"p","model":"m","input":"` + strings.Repeat("x", 100_001) + `"}`, false},
		{"input 50000 rockets", `{"provider":"p","model":"m","input":"` + strings.Repeat(rocket, 50_000) + `"}`, true},
		{"input 50000 rockets+1", `{"provider":"p","model":"m","input":"` + strings.Repeat(rocket, 50_000) + `x"}`, false},
		{"input 49999 rockets+2", `{"provider":"p","model":"m","input":"x` + strings.Repeat(rocket, 49_999) + `x"}`, true},
		{"input 100000 BMP (200 KB)", `{"provider":"p","model":"m","input":"` + strings.Repeat(eacute, 100_000) + `"}`, true},
		{"input 100000 escaped pairs", `{"provider":"p","model":"m","input":"` + strings.Repeat(`\ud83d\ude80`, 50_000) + `"}`, true},
		{"input 100001 escaped pairs", `{"provider":"p","model":"m","input":"` + strings.Repeat(`\ud83d\ude80`, 50_000) + `x"}`, false},
		{"instructions empty", with(`"instructions":""`), true},
		{"instructions 100000", with(`"instructions":"` + strings.Repeat("x", 100_000) + `"`), true},
		{"instructions 100001", with(`"instructions":"` + strings.Repeat("x", 100_001) + `"`), false},
		{"instructions rockets over", with(`"instructions":"` + strings.Repeat(rocket, 50_001) + `"`), false},
		{"history content 100000", with(`"history":[{"role":"user","content":"` + strings.Repeat("x", 100_000) + `"}]`), true},
		{"history content 100001", with(`"history":[{"role":"user","content":"` + strings.Repeat("x", 100_001) + `"}]`), false},
		{"history content rockets", with(`"history":[{"role":"user","content":"` + strings.Repeat(rocket, 50_000) + `"}]`), true},
		{"history content rockets over", with(`"history":[{"role":"user","content":"` + strings.Repeat(rocket, 50_000) + `x"}]`), false},

		// Duplicate keys: the last one wins at every level.
		{"dup: invalid then valid", with(`"maxSteps":null,"maxSteps":3`), true},
		{"dup: valid then invalid", with(`"maxSteps":3,"maxSteps":null`), false},
		{"dup required", `{"provider":"bad provider","provider":"p","model":"m","input":"hi"}`, true},
		{"dup: nested unknown rescued", with(`"history":[{"bogus":1}],"history":[]`), true},
		{"dup: history member", with(`"history":[{"role":"x","content":"a","role":"user"}]`), true},
		{"dup: history member last bad", with(`"history":[{"role":"user","content":"a","role":"x"}]`), false},
		{"dup: metadata value", with(`"metadata":{"k":1,"k":"v"}`), true},
		{"dup: metadata value last bad", with(`"metadata":{"k":"v","k":1}`), false},
		{"dup: retry member", with(`"retry":{"maxAttempts":9,"maxAttempts":2}`), true},
		{"dup: capabilities rescued", with(`"requiredCapabilities":["a","a"],"requiredCapabilities":["a"]`), true},
		{"dup: unknown stays unknown", with(`"bogus":1,"bogus":2`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := protocol.DecodeRunRequest([]byte(tc.in))
			if tc.ok {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if req == nil {
					t.Fatal("nil request without error")
				}
				return
			}
			if got := protocol.CodeOf(err); got != protocol.CodeInvalidRequest {
				t.Fatalf("code = %q, want INVALID_REQUEST (err %v)", got, err)
			}
			var pe *protocol.Error
			if !asError(err, &pe) || pe.Message != protocol.Message(protocol.CodeInvalidRequest) || pe.Retryable {
				t.Errorf("error = %+v, want the fixed INVALID_REQUEST error", pe)
			}
			if req != nil {
				t.Errorf("request %+v returned with an error", req)
			}
		})
	}
}

func asError(err error, pe **protocol.Error) bool {
	e, ok := err.(*protocol.Error)
	*pe = e
	return ok
}

func TestDecodeRunRequestValues(t *testing.T) {
	in := `{"provider":"acme-api","model":"m[1m]","input":"hi ` + rocket + `",
		"instructions":"be brief","history":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],
		"tools":["b","a","b"],"requiredCapabilities":["tools"],"maxSteps":4.0,"maxOutputTokens":1e3,
		"idleTimeoutMs":0,"outputSchema": { "type" : "object", "type":"array" },
		"metadata":{"app":"x","app":"planner","k":""},"idempotencyKey":"key:1",
		"retry":{"maxAttempts":2,"maxDelayMs":100}}`
	got, err := protocol.DecodeRunRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(v int) *int { return &v }
	instr, key, idle := "be brief", "key:1", int64(0)
	want := &protocol.RunRequest{
		Provider: "acme-api", Model: "m[1m]", Input: "hi " + rocket,
		Instructions:         &instr,
		History:              []protocol.HistoryItem{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}},
		Tools:                []string{"b", "a", "b"},
		RequiredCapabilities: []string{"tools"},
		MaxSteps:             ptr(4),
		MaxOutputTokens:      ptr(1000),
		IdleTimeoutMs:        &idle,
		// Raw, compacted; duplicate keys inside are the schema parser's
		// business (it also keeps the last).
		OutputSchema:   json.RawMessage(`{"type":"object","type":"array"}`),
		Metadata:       map[string]string{"app": "planner", "k": ""},
		IdempotencyKey: &key,
		Retry:          &protocol.Retry{MaxAttempts: 2, MaxDelayMs: ptr(100)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if protocol.DuplicateTools(got.Tools) != true {
		t.Error("DuplicateTools missed a duplicate")
	}

	// Absent optional fields stay nil.
	min, err := protocol.DecodeRunRequest([]byte(with("")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(min, &protocol.RunRequest{Provider: "p", Model: "m", Input: "hi"}) {
		t.Errorf("minimal = %+v", min)
	}
}

func TestDecodeOptionsExtensions(t *testing.T) {
	all := protocol.DecodeOptions{Attachments: true, OutputArtifact: true, Retrieval: true,
		Session: true, Approvals: true, ApplicationTools: true}
	tests := []struct {
		name string
		opts protocol.DecodeOptions
		in   string
		ok   bool
	}{
		{"attachments on", protocol.DecodeOptions{Attachments: true}, with(`"attachments":[{"type":"text"}]`), true},
		{"attachments on, object", protocol.DecodeOptions{Attachments: true}, with(`"attachments":{}`), false},
		{"attachments on, null", protocol.DecodeOptions{Attachments: true}, with(`"attachments":null`), false},
		{"session needs its own flag", protocol.DecodeOptions{Attachments: true}, with(`"session":{}`), false},
		{"all on", all, with(`"attachments":[],"outputArtifact":{},"retrieval":{},"session":{},"approvals":{},"applicationTools":[]`), true},
		{"applicationTools object", all, with(`"applicationTools":{}`), false},
		{"approvals array", all, with(`"approvals":[]`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.Decode([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && protocol.CodeOf(err) != protocol.CodeInvalidRequest {
				t.Fatalf("code = %s", protocol.CodeOf(err))
			}
		})
	}
	req, err := all.Decode([]byte(with(`"session":{ "id" : "x" }`)))
	if err != nil {
		t.Fatal(err)
	}
	if string(req.Session) != `{"id":"x"}` {
		t.Errorf("session raw = %s", req.Session)
	}
}

func TestUTF16Len(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"", 0}, {"abc", 3}, {eacute, 1}, {"€", 1}, {"\uFFFF", 1}, {rocket, 2},
		{"a" + rocket + eacute, 4}, {"\U0010FFFF", 2}, {"\uFFFD", 1},
	} {
		if got := protocol.UTF16Len(tc.s); got != tc.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestDuplicateTools(t *testing.T) {
	many := make([]string, 32)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	manyDup := append(append([]string{}, many...), "t0")
	for _, tc := range []struct {
		in   []string
		want bool
	}{
		{nil, false}, {[]string{"a"}, false}, {[]string{"a", "b"}, false},
		{[]string{"a", "b", "a"}, true}, {[]string{"a", "A"}, false},
		{many, false}, {manyDup, true},
	} {
		if got := protocol.DuplicateTools(tc.in); got != tc.want {
			t.Errorf("DuplicateTools(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestErrorBody(t *testing.T) {
	for _, tc := range []struct {
		err  *protocol.Error
		want string
	}{
		{protocol.New(protocol.CodeUnsupportedCapability), `{"error":{"code":"UNSUPPORTED_CAPABILITY","message":"The selected provider does not support every required capability.","retryable":false}}`},
		{&protocol.Error{Code: protocol.CodeToolOutcomeUncertain, Message: "m", Uncertain: true, Err: fmt.Errorf("secret")}, `{"error":{"code":"TOOL_OUTCOME_UNCERTAIN","message":"m","retryable":false,"outcome":"uncertain"}}`},
		{protocol.New(protocol.CodeBusy), `{"error":{"code":"BUSY","message":"No execution slot is available.","retryable":true}}`},
		{nil, `{"error":{"code":"INTERNAL_ERROR","message":"An internal error occurred.","retryable":false}}`},
	} {
		if got := string(protocol.ErrorBody(tc.err)); got != tc.want {
			t.Errorf("ErrorBody = %s\nwant %s", got, tc.want)
		}
	}
}

func TestDecodeDepth(t *testing.T) {
	// Nesting is bounded at 10,000 levels counting the top-level object as
	// level 1 (encoding/json's bound; JSON.parse's is its stack). The
	// reference decoder bounds only sub-values it decodes whole, so it is
	// not compared here.
	nest := func(levels int) string { return strings.Repeat(`{"a":`, levels) + "1" + strings.Repeat("}", levels) }
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"outputSchema at 10000", with(`"outputSchema":` + nest(9999)), true},
		{"outputSchema at 10001", with(`"outputSchema":` + nest(10000)), false},
		{"history junk at 10000", with(`"history":[{"x":` + nest(9997) + `}],"history":[]`), true},
		{"history junk at 10001", with(`"history":[{"x":` + nest(9998) + `}],"history":[]`), false},
		{"arrays at 10000", with(`"tools":[` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `],"tools":[]`), true},
		{"arrays at 10001", with(`"tools":[` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `],"tools":[]`), false},
	} {
		if _, err := protocol.DecodeRunRequest([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
