package runtime

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"adhost/abi"
	"adhost/runtime/protocol"
)

func TestEncodeEvent(t *testing.T) {
	ts := time.Date(2026, 3, 4, 10, 15, 30, 123_456_789, time.FixedZone("x", 3600))
	i64 := int64(5)
	for _, tc := range []struct {
		p    payload
		want string
	}{
		{payload{typ: EventRunStarted, provider: "acme", model: "m/1"}, `{"type":"run.started","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","provider":"acme","model":"m/1"}`},
		{payload{typ: EventStepStarted, step: 2}, `{"type":"step.started","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","step":2}`},
		{payload{typ: EventTextDelta, text: "a\nb\"c</>\u2028\x01"}, `{"type":"text.delta","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","text":"a\nb\"c</>\u2028\u0001"}`},
		{payload{typ: EventRunProgress, phase: PhaseTool}, `{"type":"run.progress","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","phase":"tool"}`},
		{payload{typ: EventUsageReported, step: 1, usage: &protocol.Usage{InputTokens: &i64}}, `{"type":"usage.reported","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","step":1,"usage":{"inputTokens":5}}`},
		{payload{typ: EventToolCalled, call: &abi.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":1}`)}}, `{"type":"tool.called","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","call":{"id":"c","name":"n","arguments":{"a":1}}}`},
		{payload{typ: EventToolCompleted, callID: "c", output: json.RawMessage(`[1,"x"]`)}, `{"type":"tool.completed","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","callId":"c","output":[1,"x"]}`},
		{payload{typ: EventRunCompleted, result: &protocol.RunResult{RunID: "R", Provider: "p", Model: "m", Text: "t", Steps: 1, FinishReason: "stop"}}, `{"type":"run.completed","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","result":{"runId":"R","provider":"p","model":"m","text":"t","usage":{},"steps":1,"finishReason":"stop"}}`},
		{payload{typ: EventRunFailed, err: &protocol.ErrorInfo{Code: "X", Message: "m", Outcome: "uncertain"}}, `{"type":"run.failed","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","error":{"code":"X","message":"m","retryable":false,"outcome":"uncertain"}}`},
		{payload{typ: EventRunCancelled, err: &protocol.ErrorInfo{Code: "IDLE_TIMEOUT", Message: "m", Retryable: true}}, `{"type":"run.cancelled","runId":"R","sequence":7,"timestamp":"2026-03-04T09:15:30.123Z","error":{"code":"IDLE_TIMEOUT","message":"m","retryable":true}}`},
	} {
		tc.p.ts = ts
		got := encodeEvent("R", 7, &tc.p)
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("%s: invalid JSON %s", tc.p.typ, got)
		}
		must(0, json.Unmarshal([]byte(tc.want), &wantV))
		if string(must(json.Marshal(gotV))) != string(must(json.Marshal(wantV))) {
			t.Errorf("%s:\n got %s\nwant %s", tc.p.typ, got, tc.want)
		}
		if bytes.ContainsAny(got, "\r\n") {
			t.Errorf("%s: not one line", tc.p.typ)
		}
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\tnl\ncr\r", "\x00\x1f\x7f", "quote\" back\\", "é漢🙂", "\xff\xfe", "a\u2028b\u2029c", "<&>", string([]byte{0xed, 0xa0, 0x80})} {
		checkAppendString(t, s)
	}
}

func checkAppendString(t *testing.T, s string) {
	t.Helper()
	b := appendString(nil, s)
	if len(b) != jsonStringLen(s) {
		t.Fatalf("jsonStringLen(%q) = %d, encoded %d bytes", s, jsonStringLen(s), len(b))
	}
	if !utf8.Valid(b) || bytes.ContainsAny(b, "\r\n") {
		t.Fatalf("appendString(%q) = %q", s, b)
	}
	var got string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("appendString(%q) = %s: %v", s, b, err)
	}
	want := strings.ToValidUTF8(s, "\ufffd")
	// encoding/json replaces each invalid byte; ToValidUTF8 replaces runs.
	var ref string
	must(0, json.Unmarshal(must(json.Marshal(s)), &ref))
	if got != ref && got != want {
		t.Fatalf("appendString(%q) decodes to %q, encoding/json to %q", s, got, ref)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\nb", "\xff", "🙂", "\u2028", `"\`} {
		f.Add(s)
	}
	f.Fuzz(checkAppendString)
}

func TestTimestamp(t *testing.T) {
	for _, ts := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("x", -7200)),
		time.Date(1999, 7, 8, 9, 10, 11, 7_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := formatTimestamp(ts), ts.UTC().Format(timestampLayout); got != want {
			t.Errorf("formatTimestamp(%v) = %s, want %s", ts, got, want)
		}
	}
}

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		u := newUUID()
		if len(u) != 36 || u[14] != '4' || !strings.ContainsRune("89ab", rune(u[19])) || strings.ToLower(u) != u {
			t.Fatalf("uuid %s", u)
		}
		if seen[u] {
			t.Fatal("duplicate uuid")
		}
		seen[u] = true
	}
}
