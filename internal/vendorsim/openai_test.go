package vendorsim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends a Chat Completions request with the test key and returns the
// response.
func post(t *testing.T, s *Server, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.Endpoint()+"chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// dataLines returns the data fields of an SSE body (test helper; the
// simulator writes one data line per event).
func dataLines(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func chatBody(user string, extra string) string {
	b, _ := json.Marshal(user)
	return `{"model":"sim-large","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + string(b) + `}]` + extra + `}`
}

func TestOpenAIConformanceText(t *testing.T) {
	s := MustNew(t, "openai", Options{APIKey: "sk-test"})
	resp := post(t, s, "sk-test", chatBody(ScenarioText, ""))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := dataLines(t, resp.Body)
	if lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("last data = %q, want [DONE]", lines[len(lines)-1])
	}
	var text strings.Builder
	finish := ""
	for _, l := range lines[:len(lines)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("chunk %s: %v", l, err)
		}
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 || string(c.Usage) != "null" {
			t.Fatalf("unexpected chunk %s", l)
		}
		text.WriteString(c.Choices[0].Delta.Content)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text.String() != "Hello fixture" || finish != "stop" {
		t.Errorf("text %q finish %q", text.String(), finish)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Credential != CredentialOK || reqs[0].Header.Get("Authorization") != "REDACTED" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestOpenAICredential(t *testing.T) {
	s := MustNew(t, "openai", Options{APIKey: "sk-test"})
	for _, tc := range []struct{ key, want string }{
		{"", CredentialMissing},
		{"sk-other", CredentialWrong},
	} {
		resp := post(t, s, tc.key, chatBody(ScenarioText, ""))
		if resp.StatusCode != 401 {
			t.Errorf("key %q: status %d, want 401", tc.key, resp.StatusCode)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		if body.Error.Code != "invalid_api_key" {
			t.Errorf("key %q: error code %q", tc.key, body.Error.Code)
		}
		reqs := s.Requests()
		if got := reqs[len(reqs)-1].Credential; got != tc.want {
			t.Errorf("key %q: credential %s, want %s", tc.key, got, tc.want)
		}
	}
}

func TestOpenAIToolsRoundTrip(t *testing.T) {
	s := MustNew(t, "openai", Options{})
	tools := `,"tools":[{"type":"function","function":{"name":"conformance_lookup","parameters":{"type":"object"}}}]`
	lines := dataLines(t, post(t, s, "", chatBody(ScenarioTools, tools)).Body)
	var args strings.Builder
	for _, l := range lines {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if l == "[DONE]" {
			continue
		}
		json.Unmarshal([]byte(l), &c)
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if args.String() != `{"value":7}` {
		t.Fatalf("arguments %q", args.String())
	}
	second := `{"model":"m","stream":true,"messages":[{"role":"user","content":"conformance:tools"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_conformance_1","type":"function","function":{"name":"conformance_lookup","arguments":"{\"value\":7}"}}]},` +
		`{"role":"tool","tool_call_id":"call_conformance_1","content":"{\"receipt\":7}"}]}`
	body, _ := io.ReadAll(post(t, s, "", second).Body)
	if !strings.Contains(string(body), `"tool receipt: "`) || !strings.Contains(string(body), `"7"`) {
		t.Errorf("second turn body %s", body)
	}
	// A tool message without the assistant call before it is a 400, as at OpenAI.
	bad := `{"model":"m","messages":[{"role":"tool","tool_call_id":"x","content":"{}"}]}`
	if resp := post(t, s, "", bad); resp.StatusCode != 400 {
		t.Errorf("orphan tool message: status %d", resp.StatusCode)
	}
}

func TestOpenAIFaults(t *testing.T) {
	s := MustNew(t, "openai", Options{})
	resp := post(t, s, "", chatBody("vendorsim:rate-limit", ""))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("rate-limit: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp = post(t, s, "", chatBody(ScenarioPrivateError, ""))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), SecretMarker) {
		t.Errorf("private-error: %d %s", resp.StatusCode, b)
	}
	lines := dataLines(t, post(t, s, "", chatBody("vendorsim:truncated", "")).Body)
	if lines[len(lines)-1] == "[DONE]" {
		t.Errorf("truncated stream ended with [DONE]")
	}
	lines = dataLines(t, post(t, s, "", chatBody("vendorsim:stream-error", "")).Body)
	if !strings.HasPrefix(lines[len(lines)-1], `{"error":`) {
		t.Errorf("stream-error last line %s", lines[len(lines)-1])
	}
	n, _ := io.Copy(io.Discard, post(t, s, "", chatBody("vendorsim:oversize", "")).Body)
	if n < OversizeBytes {
		t.Errorf("oversize wrote %d bytes", n)
	}
}

func TestOpenAIHoldCancel(t *testing.T) {
	s := MustNew(t, "openai", Options{})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.Endpoint()+"chat/completions", strings.NewReader(chatBody(ScenarioCancel, "")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for { // read until the argument fragment arrived
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"arguments":"{\"val"`) {
			break
		}
	}
	cancel()
	if err := s.WaitCancelled(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAIModelsPagination(t *testing.T) {
	models := []string{"a", "b", "c", "d", "e"}
	s := MustNew(t, "openai", Options{Models: models, ModelsPageSize: 2})
	var got []string
	after := ""
	for page := 0; page < 10; page++ {
		u := s.Endpoint() + "models"
		if after != "" {
			u += "?after=" + after
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Object  string `json:"object"`
			Data    []struct{ ID string }
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		for _, d := range body.Data {
			got = append(got, d.ID)
		}
		if !body.HasMore {
			break
		}
		after = body.LastID
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Errorf("models %v", got)
	}
}

func TestParseCase(t *testing.T) {
	c, err := ParseCase([]byte(`Rate limited.
status: 429
header: retry-after: 2
2/status: 200
-- input.json --
{"model":"m","messages":[{"role":"user","content":"hi"}],"maxOutputTokens":5,"step":1}
-- response.json --
{"error":{}}
-- events.jsonl --
{"error":{"code":"RATE_LIMITED","retryable":true,"status":429,"retryAfterMs":2000}}
-- 2/input.json --
{"model":"m","messages":[],"maxOutputTokens":5,"step":1}
-- 2/response.sse --
data: [DONE]

`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Turns) != 2 || c.Turns[0].Status != 429 || c.Turns[0].Headers[0] != [2]string{"retry-after", "2"} ||
		c.Turns[1].Status != 200 || c.Turns[1].ContentType != "text/event-stream" || c.Turns[0].Events[0].Error.Code != "RATE_LIMITED" {
		t.Errorf("parsed %+v %+v", c.Turns[0], c.Turns[1])
	}
	for _, bad := range []string{
		"-- 2/input.json --\n{}\n",          // turn 1 missing
		"-- input.json --\n{\"bogus\":1}\n", // unknown input field
		"-- nope.txt --\n",                  // unknown file
		"status: x\n-- input.json --\n{}\n", // bad status
	} {
		if _, err := ParseCase([]byte(bad)); err == nil {
			t.Errorf("ParseCase(%q) succeeded", bad)
		}
	}
}

func FuzzParseCase(f *testing.F) {
	f.Add([]byte("status: 429\n-- input.json --\n{}\n-- events.jsonl --\n{\"cancelled\":true}\n"))
	f.Add([]byte("op: inspect\n-- response.json --\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCase(b)
		if err == nil && len(c.Turns) == 0 {
			t.Fatal("no turns without error")
		}
	})
}
