package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/runtime/schema"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

func TestEvaluate(t *testing.T) {
	for expr, want := range map[string]string{
		"0.1 + 0.2":                            "0.3",
		"0.1+0.2-0.3":                          "0",
		"1/3":                                  "0.3333333333333333333333333333333333",
		"2/3":                                  "0.6666666666666666666666666666666667",
		"10/4":                                 "2.5",
		"-2^2":                                 "-4",
		"(-2)^2":                               "4",
		"2^-2":                                 "0.25",
		"2^3^2":                                "512",
		"2^10":                                 "1024",
		"1.5 * (2 + 3) - -1":                   "8.5",
		"  7 ":                                 "7",
		"+3":                                   "3",
		"--3":                                  "3",
		"1e3":                                  "1000",
		"1.20 * 1.0":                           "1.2",
		".5 + 5.":                              "5.5",
		"0 * -1":                               "0",
		"123456789012345678901234567890123456": "123456789012345678901234567890123500",
		"1234567890123456789012345678901234567890123": "1.234567890123456789012345678901235E+42",
		"10^39":           "1000000000000000000000000000000000000000",
		"10^40":           "1E+40",
		"10^-20":          "0.00000000000000000001",
		"10^-21":          "1E-21",
		"2^9999 / 2^9999": "1",
		"(((1)))":         "1",
	} {
		got, err := Evaluate(expr)
		if err != nil || got != want {
			t.Errorf("Evaluate(%q) = %q, %v; want %q", expr, got, err, want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	for _, tc := range []struct {
		expr, msg string
		pos       int
	}{
		{"1/0", "division by zero", 1},
		{"1 / (2 - 2)", "division by zero", 2},
		{"0/0", "division by zero", 1},
		{"0^-1", "division by zero (zero to a negative power)", 1},
		{"0^0", "undefined result", 1},
		{"1 +", "expected a number or '(' but the expression ended", 3},
		{"1 + * 2", "expected a number or '(' but found '*'", 4},
		{"(1 + 2", "unclosed parenthesis", 0},
		{"1 + 2)", "unexpected ')'", 5},
		{"2 x 3", "unexpected 'x'", 2},
		{"", "empty expression", 0},
		{"   ", "empty expression", 0},
		{"2^0.5", "exponent must be an integer", 2},
		{"2^10000", "exponent outside -9999..9999", 2},
		{"2^99999999999", "exponent outside -9999..9999", 2},
		{"1.2.3", "unexpected '.'", 3},
		{"1e", "malformed number exponent", 0},
		{"1e99999", "number exponent outside -6144..6144", 0},
		{".", "malformed number", 0},
		{"abc", "expected a number or '(' but found 'a'", 0},
		{"9^9999", "result too large (magnitude beyond 1e6144)", 1},
		{"1e6000 * 1e6000", "result too large (magnitude beyond 1e6144)", 7},
		{"1e-6000 * 1e-6000", "result too small (magnitude below 1e-6144)", 8},
		{strings.Repeat("1", MaxNumberDigits+1), "number with more than 100 digits", 0},
		{strings.Repeat("(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1), "expression nested deeper than 64", 64},
		{strings.Repeat("-", MaxDepth) + "1", "expression nested deeper than 64", 64},
		{strings.Repeat("1+", MaxExpressionBytes/2) + "1", "expression longer than 1000 bytes", -1},
	} {
		_, err := Evaluate(tc.expr)
		var ee *EvalError
		if !errors.As(err, &ee) || ee.Msg != tc.msg || ee.Pos != tc.pos {
			t.Errorf("Evaluate(%.40q) error = %#v, want %q at %d", tc.expr, err, tc.msg, tc.pos)
		}
	}
	// The limits at their edge still evaluate.
	for _, expr := range []string{
		strings.Repeat("1", MaxNumberDigits),
		strings.Repeat("(", MaxDepth-1) + "1" + strings.Repeat(")", MaxDepth-1),
		strings.Repeat("1+", (MaxExpressionBytes-1)/2) + "1",
		"2^9999", "2^-9999",
	} {
		if _, err := Evaluate(expr); err != nil {
			t.Errorf("Evaluate(%.40q) at the limit: %v", expr, err)
		}
	}
}

// FuzzEvaluate checks that no expression panics or escapes the bounds: a
// result is a decimal of at most Precision digits, an error is an
// EvalError pointing inside the expression.
func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"0.1+0.2", "-2^2", "(1/3)*3", "2^-9999", "1e6144", "((((", "1/0", "9^9^9", "1.5e-3*-(2)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		res, err := Evaluate(expr)
		if err != nil {
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Pos > len(expr) || ee.Pos < -1 || ee.Msg == "" {
				t.Fatalf("Evaluate(%q): bad error %#v", expr, err)
			}
			return
		}
		digits := 0
		for _, c := range res {
			if c == 'E' {
				break
			}
			if c >= '0' && c <= '9' {
				digits++
			}
		}
		if res == "" || digits > Precision+21 {
			t.Fatalf("Evaluate(%q) = %q", expr, res)
		}
	})
}

// TestManifest checks the pinned declaration against the plugin: same id,
// version and definition as List, no side effects, no network, no kv.
func TestManifest(t *testing.T) {
	m := plugintest.CheckToolManifest(t, ID, tools{})
	if m.Network != nil || m.KV || m.Tool(ToolName).HasSideEffects() {
		t.Fatalf("manifest grants more than calculate needs: %+v", m)
	}
}

func TestInvoke(t *testing.T) {
	out := plugintest.Manifest(t, ID).ToolDefs()[0].OutputSchema
	s, err := schema.Compile(out)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"expression":"0.1 + 0.2"}`:     `{"result":"0.3"}`,
		`{"expression":"1/0"}`:           `{"error":"division by zero","position":1}`,
		`{"expression":"1e6000*1e6000"}`: `{"error":"result too large (magnitude beyond 1e6144)","position":6}`,
		`{"expression":"(1"}`:            `{"error":"unclosed parenthesis","position":0}`,
	} {
		res := sdktest.Invoke(t, tools{}, &abi.ToolInvokeInput{CallID: "c1", Name: ToolName, Arguments: json.RawMessage(args)}, sdktest.Options{})
		if res.Status != abi.StatusOK || string(res.Output) != want {
			t.Errorf("%s: status %d output %s error %+v", args, res.Status, res.Output, res.Error)
			continue
		}
		if err := s.ValidateJSON(res.Output); err != nil {
			t.Errorf("%s: output %s does not match the declared schema: %v", args, res.Output, err)
		}
	}
	res := sdktest.Invoke(t, tools{}, &abi.ToolInvokeInput{CallID: "c1", Name: "other", Arguments: json.RawMessage(`{}`)}, sdktest.Options{})
	if res.Status != abi.StatusError || res.Error.Code != sdk.CodeToolFailed {
		t.Errorf("unknown tool: %+v", res)
	}
}
