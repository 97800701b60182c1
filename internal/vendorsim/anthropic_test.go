package vendorsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func anthropicPost(t *testing.T, s *Server, headers map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.Endpoint()+"messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", AnthropicVersion)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// anthropicEvents reads a whole SSE body as (name, data) pairs.
func anthropicEvents(t *testing.T, r io.Reader) [][2]string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var evs [][2]string
	for _, block := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		var name, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		evs = append(evs, [2]string{name, data})
	}
	return evs
}

func TestAnthropicStreamShape(t *testing.T) {
	s := MustNew(t, "anthropic", Options{APIKey: "k"})
	resp := anthropicPost(t, s, map[string]string{"x-api-key": "k"},
		`{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"vendorsim:usage"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := anthropicEvents(t, resp.Body)
	var names []string
	for _, e := range evs {
		names = append(names, e[0])
		var m map[string]any
		if err := json.Unmarshal([]byte(e[1]), &m); err != nil || m["type"] != e[0] {
			t.Errorf("event %s: data %s does not name its type", e[0], e[1])
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	// input_tokens excludes the cache read: 100 - 64.
	if !strings.Contains(evs[0][1], `"input_tokens":36`) || !strings.Contains(evs[0][1], `"cache_read_input_tokens":64`) {
		t.Errorf("message_start = %s", evs[0][1])
	}
	if !strings.Contains(evs[5][1], `"output_tokens":40`) || !strings.Contains(evs[5][1], `"stop_reason":"end_turn"`) {
		t.Errorf("message_delta = %s", evs[5][1])
	}
}

func TestAnthropicNonStreamed(t *testing.T) {
	s := MustNew(t, "anthropic", Options{})
	resp := anthropicPost(t, s, nil, `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"conformance:tools"}]}],"tools":[{"name":"conformance_lookup","input_schema":{"type":"object"}}]}`)
	var msg struct {
		Content []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || string(msg.Content[0].Input) != `{"value":7}` {
		t.Errorf("message = %+v", msg)
	}
}

// TestAnthropicRequestRules checks the request rules the real API enforces.
func TestAnthropicRequestRules(t *testing.T) {
	s := MustNew(t, "anthropic", Options{})
	tu := `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}`
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"minimal", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
		{"no model", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"no messages", `{"model":"m","max_tokens":1,"messages":[]}`, false},
		{"system role", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, false},
		{"assistant first", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":"hello"},{"role":"user","content":"hi"}]}`, false},
		{"roles repeat", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, false},
		{"empty text", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, false},
		{"empty content", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]}]}`, false},
		{"tool round trip", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},` + tu + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{}"},{"type":"text","text":"go on"}]}]}`, true},
		{"result missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},` + tu + `,{"role":"user","content":"next"}]}`, false},
		{"result after text", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},` + tu + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"t1","content":"{}"}]}]}`, false},
		{"unknown result id", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},` + tu + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{}"},{"type":"tool_result","tool_use_id":"t2","content":"{}"}]}]}`, false},
		{"tool_use input not object", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":"x"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{}"}]}]}`, false},
		{"not json", `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := anthropicPost(t, s, nil, tc.body)
			b, _ := io.ReadAll(resp.Body)
			if (resp.StatusCode == 200) != tc.ok {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if !tc.ok && !strings.Contains(string(b), `"type":"invalid_request_error"`) {
				t.Errorf("error body = %s", b)
			}
		})
	}
	t.Run("version header required", func(t *testing.T) {
		resp := anthropicPost(t, s, map[string]string{"anthropic-version": ""}, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 400 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

func TestAnthropicErrors(t *testing.T) {
	s := MustNew(t, "anthropic", Options{APIKey: "k"})
	resp := anthropicPost(t, s, map[string]string{"x-api-key": "bad"}, `{}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"authentication_error"`) {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
	resp = anthropicPost(t, s, map[string]string{"x-api-key": "k"}, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"vendorsim:rate-limit"}]}`)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("retry-after") != "2" || !strings.Contains(string(b), `"rate_limit_error"`) {
		t.Errorf("status %d retry-after %q body %s", resp.StatusCode, resp.Header.Get("retry-after"), b)
	}
	for _, st := range []int{400, 401, 403, 404, 413, 429, 500, 529} {
		rec := httptest.NewRecorder()
		anthropic{}.WriteError(rec, &HTTPError{Status: st, Message: "m"})
		var body struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Type != "error" || body.Error.Type != anthropicErrorType(st) {
			t.Errorf("status %d: %s", st, rec.Body.Bytes())
		}
	}
}

func TestAnthropicModelsPagination(t *testing.T) {
	models := []string{"a", "b", "c", "d", "e"}
	s := MustNew(t, "anthropic", Options{Models: models, ModelsPageSize: 2})
	var got []string
	after := ""
	for page := 0; page < 10; page++ {
		u := s.Endpoint() + "models?limit=1000"
		if after != "" {
			u += "&after_id=" + after
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Data    []struct{ ID string }
			HasMore bool   `json:"has_more"`
			LastID  string `json:"last_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Data {
			got = append(got, m.ID)
		}
		if !p.HasMore {
			break
		}
		after = p.LastID
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Errorf("models = %v", got)
	}
}

func FuzzAnthropicParsePrompt(f *testing.F) {
	f.Add(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"{}"}]}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
		r.Header.Set("anthropic-version", AnthropicVersion)
		r.Header.Set("Content-Type", "application/json")
		p, err := anthropic{}.ParsePrompt(r, []byte(body))
		if err == nil && (p.Model == "" || p.MaxTokens < 1) {
			t.Fatalf("accepted %s as %+v", body, p)
		}
	})
}
