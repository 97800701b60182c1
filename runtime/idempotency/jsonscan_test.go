package idempotency

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestRenumber(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		seq            int64
		ok             bool
	}{
		{"envelope", `{"type":"step.started","runId":"r","sequence":7,"timestamp":"t","step":1}`,
			`{"type":"step.started","runId":"r","sequence":1,"timestamp":"t","step":1}`, 1, true},
		{"more digits", `{"type":"x","sequence":9}`, `{"type":"x","sequence":10}`, 10, true},
		{"fewer digits", `{"sequence":123,"a":1}`, `{"sequence":4,"a":1}`, 4, true},
		{"sequence inside a string value is not a member", `{"text":"\"sequence\":5","sequence":5}`,
			`{"text":"\"sequence\":5","sequence":2}`, 2, true},
		{"nested sequence is skipped", `{"call":{"sequence":1,"x":[{"sequence":2}]},"sequence":3}`,
			`{"call":{"sequence":1,"x":[{"sequence":2}]},"sequence":9}`, 9, true},
		{"escaped quotes and brackets in strings", `{"o":"}]\\\"{","sequence":1}`, `{"o":"}]\\\"{","sequence":2}`, 2, true},
		{"whitespace", ` { "sequence" : 1 , "b" : true } `, ` { "sequence" : 5 , "b" : true } `, 5, true},
		{"no sequence", `{"type":"x"}`, "", 1, false},
		{"not a number", `{"sequence":"1"}`, "", 1, false},
		{"negative", `{"sequence":-1}`, "", 1, false},
		{"not an object", `[1]`, "", 1, false},
		{"truncated", `{"type":"x","sequence":1`, "", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := renumber([]byte(tc.in), tc.seq)
			if ok != tc.ok || string(got) != tc.want {
				t.Errorf("renumber(%s, %d) = %s, %v; want %s, %v", tc.in, tc.seq, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestMemberString(t *testing.T) {
	data := []byte(`{"type":"tool.called","runId":"abc","call":{"type":"inner"},"esc":"a\"b"}`)
	if got, ok := memberString(data, "type"); !ok || got != "tool.called" {
		t.Errorf("type = %q, %v", got, ok)
	}
	if got, ok := memberString(data, "runId"); !ok || got != "abc" {
		t.Errorf("runId = %q, %v", got, ok)
	}
	if _, ok := memberString(data, "call"); ok {
		t.Error("an object member read as a string")
	}
	if _, ok := memberString(data, "esc"); ok {
		t.Error("a string with escapes was returned unescaped")
	}
}

// FuzzRenumber: no input panics; on a valid JSON object the result is
// valid JSON whose sequence (as the scanner finds it) is the new one and
// which equals the input everywhere else.
func FuzzRenumber(f *testing.F) {
	for _, s := range []string{
		`{"type":"run.started","runId":"r","sequence":1,"timestamp":"2026-01-01T00:00:00.000Z","provider":"p","model":"m"}`,
		`{"type":"tool.completed","runId":"r","sequence":12,"callId":"c","output":{"sequence":"x","a":[1,{"b":"]"}]}}`,
		`{"sequence":0}`, `{}`, `{"a":"\\","sequence":3}`, `{"a":[}`,
	} {
		f.Add([]byte(s), int64(5))
	}
	f.Fuzz(func(t *testing.T, data []byte, seq int64) {
		if seq < 0 {
			seq = -seq
		}
		if seq < 0 {
			return
		}
		out, ok := renumber(data, seq)
		if !ok {
			return
		}
		s, e, ok := member(out, "sequence")
		if !ok || string(out[s:e]) != string(json.Number(itoa(seq))) {
			t.Fatalf("renumber(%q, %d) = %q: sequence not found", data, seq, out)
		}
		is, ie, _ := member(data, "sequence")
		if !bytes.Equal(out[:s], data[:is]) || !bytes.Equal(out[e:], data[ie:]) {
			t.Fatalf("renumber(%q) changed other bytes: %q", data, out)
		}
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("renumber(%q) = %q: invalid JSON", data, out)
		}
	})
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
