package vendorsim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func geminiPost(t *testing.T, s *Server, key, method, body string) *http.Response {
	t.Helper()
	u := s.Endpoint() + "models/gemini-x:" + method
	if method == "streamGenerateContent" {
		u += "?alt=sse"
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func geminiUser(text string) string {
	b, _ := json.Marshal(text)
	return `{"contents":[{"role":"user","parts":[{"text":` + string(b) + `}]}]}`
}

func TestGeminiStreamShape(t *testing.T) {
	s := MustNew(t, "gemini", Options{APIKey: "k"})
	resp := geminiPost(t, s, "k", "streamGenerateContent", geminiUser("vendorsim:usage"))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if !strings.Contains(string(b), "\r\n\r\n") || strings.Contains(string(b), "event:") {
		t.Errorf("want data-only events with CRLF line ends: %q", b)
	}
	chunks := strings.Split(strings.TrimSpace(string(b)), "\r\n\r\n")
	last := strings.TrimPrefix(chunks[len(chunks)-1], "data: ")
	var resp2 struct {
		Candidates []struct {
			FinishReason string `json:"finishReason"`
		}
		UsageMetadata map[string]int64
	}
	if err := json.Unmarshal([]byte(last), &resp2); err != nil {
		t.Fatal(err)
	}
	u := resp2.UsageMetadata
	if resp2.Candidates[0].FinishReason != "STOP" || u["promptTokenCount"] != 100 || u["cachedContentTokenCount"] != 64 ||
		u["candidatesTokenCount"] != 24 || u["thoughtsTokenCount"] != 16 {
		t.Errorf("last chunk = %s", last)
	}
}

func TestGeminiSignatureRequired(t *testing.T) {
	s := MustNew(t, "gemini", Options{})
	call := `{"role":"model","parts":[{"functionCall":{"name":"conformance_lookup","args":{"value":7}}%s}]}`
	result := `{"role":"user","parts":[{"functionResponse":{"name":"conformance_lookup","response":{"receipt":7}}}]}`
	body := func(sig string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"conformance:tools"}]},` + strings.Replace(call, "%s", sig, 1) + `,` + result + `]}`
	}
	resp := geminiPost(t, s, "", "generateContent", body(""))
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), "thought_signature") {
		t.Errorf("without signature: status %d %s", resp.StatusCode, b)
	}
	resp = geminiPost(t, s, "", "generateContent", body(`,"thoughtSignature":"skip_thought_signature_validator"`))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "tool receipt: 7") {
		t.Errorf("with signature: status %d %s", resp.StatusCode, b)
	}
}

func TestGeminiRequestRules(t *testing.T) {
	s := MustNew(t, "gemini", Options{})
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"minimal", geminiUser("hi"), true},
		{"no contents", `{"contents":[]}`, false},
		{"bad role", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, false},
		{"empty parts", `{"contents":[{"role":"user","parts":[]}]}`, false},
		{"unknown field", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"max_tokens":3}`, false},
		{"schema without mime", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseJsonSchema":{"type":"object"}}}`, false},
		{"both schemas", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"},"responseJsonSchema":{"type":"object"}}}`, false},
		{"json schema", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":5,"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}}`, true},
		{"response not object", `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":[1]}}]}]}`, false},
		{"system and tools", `{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f","description":"d","parametersJsonSchema":{"type":"object"}}]}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := geminiPost(t, s, "", "generateContent", tc.body)
			b, _ := io.ReadAll(resp.Body)
			if (resp.StatusCode == 200) != tc.ok {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if !tc.ok && !strings.Contains(string(b), `"INVALID_ARGUMENT"`) {
				t.Errorf("error body = %s", b)
			}
		})
	}
	t.Run("stream without alt=sse", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", s.Endpoint()+"models/g:streamGenerateContent", strings.NewReader(geminiUser("hi")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

func TestGeminiErrors(t *testing.T) {
	s := MustNew(t, "gemini", Options{APIKey: "k"})
	resp := geminiPost(t, s, "bad", "generateContent", geminiUser("hi"))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "API_KEY_INVALID") {
		t.Errorf("bad key: status %d %s", resp.StatusCode, b)
	}
	resp = geminiPost(t, s, "k", "generateContent", geminiUser("vendorsim:rate-limit"))
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || !strings.Contains(string(b), `"retryDelay":"2s"`) || !strings.Contains(string(b), "RESOURCE_EXHAUSTED") {
		t.Errorf("rate limit: status %d %s", resp.StatusCode, b)
	}
	resp = geminiPost(t, s, "k", "streamGenerateContent", geminiUser("vendorsim:stream-error"))
	b, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `data: {"error":{"code":500`) {
		t.Errorf("stream error: %s", b)
	}
	resp = geminiPost(t, s, "k", "streamGenerateContent", geminiUser("vendorsim:refusal"))
	b, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"finishReason":"SAFETY"`) {
		t.Errorf("refusal: %s", b)
	}
}

func TestGeminiModelsPagination(t *testing.T) {
	models := []string{"a", "b", "c", "d", "e"}
	s := MustNew(t, "gemini", Options{Models: models, ModelsPageSize: 2})
	var got []string
	token := ""
	for page := 0; page < 10; page++ {
		u := s.Endpoint() + "models?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + token
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Models []struct {
				Name                       string
				SupportedGenerationMethods []string
			}
			NextPageToken string
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Models {
			got = append(got, m.Name)
		}
		if p.NextPageToken == "" {
			break
		}
		token = p.NextPageToken
	}
	if strings.Join(got, ",") != "models/a,models/b,models/c,models/d,models/e" {
		t.Errorf("models = %v", got)
	}
}

func FuzzGeminiParsePrompt(f *testing.F) {
	f.Add(geminiUser("hi"))
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"x"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"s"}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"a":1}}}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1beta/models/g:generateContent", strings.NewReader(body))
		p, err := gemini{}.ParsePrompt(r, []byte(body))
		if err == nil && p.Model != "g" {
			t.Fatalf("model %q", p.Model)
		}
	})
}
