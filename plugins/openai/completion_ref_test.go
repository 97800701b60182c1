package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"adhost/abi"
	"adhost/sdk-plugin/jsonscan"
)

// refCompletion is the encoding/json decoding decodeCompletion replaced.
type refCompletion struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// refDecodeCompletion decodes body with encoding/json into the shape
// decodeCompletion returns.
func refDecodeCompletion(body []byte) (ch completionChoice, usage []byte, ok bool) {
	var cp refCompletion
	if err := json.Unmarshal(body, &cp); err != nil || len(cp.Choices) == 0 {
		return ch, nil, false
	}
	c := &cp.Choices[0]
	if c.Message.Content != nil {
		ch.content, ch.hasContent = []byte(*c.Message.Content), true
	}
	if c.FinishReason != nil {
		ch.finish, ch.hasFinish = *c.FinishReason, true
	}
	ch.refusal = c.Message.Refusal
	for _, tc := range c.Message.ToolCalls {
		args := []byte(tc.Function.Arguments)
		var s string
		if json.Unmarshal(args, &s) == nil {
			args = []byte(s)
		}
		ch.calls = append(ch.calls, &toolCall{id: tc.ID, name: tc.Function.Name, args: args})
	}
	u := bytes.TrimSpace(cp.Usage)
	if len(u) > 0 && u[0] != '{' && string(u) != "null" {
		return ch, nil, false // completeJSON refuses it: usage is not an object
	}
	return ch, cp.Usage, true
}

// refUsage is the usage a streamed chunk's raw usage member maps to.
func refUsage(raw []byte) *abi.Usage {
	v, err := jsonscan.Parse(raw)
	if err != nil || v.Kind() != jsonscan.Object {
		return nil
	}
	return mapUsage(v)
}

func dumpUsage(u *abi.Usage) string {
	if u == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(u)
	return string(b)
}

var completionCases = []string{
	`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello fixture","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	// sorted keys, as Go's encoding/json writes a map
	`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"w0 w1 ","role":"assistant"}}],"created":0,"id":"chatcmpl-mock","model":"mock-model","object":"chat.completion","usage":{"completion_tokens":20,"prompt_tokens":5,"total_tokens":25}}`,
	`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"value\":7}"}}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}},null]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"index":0,"message":{"content":"","refusal":"no"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"message":{"content":"esc \u00e9\n\"q\""},"finish_reason":"length"},{"index":1,"message":{"content":"second"},"finish_reason":"stop"}]}`,
	`{"choices":[{"message":{"content":"x"}}]}`,
	`{"choices":[null]}`,
	`{"choices":[{"message":null,"finish_reason":null}]}`,
	`{"choices":[]}`,
	`{"choices":null}`,
	`{}`,
	`[]`,
	`null`,
	`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}],"usage":null}`,
	`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}],"usage":"bad"}`,
	`{"choices":[{"index":0,"message":{"content":7},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":"0","message":{"content":"x"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0.5,"message":{"content":"x"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":1}]}`,
	`{"choices":{"index":0}}`,
	`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]`,
	`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]} trailing`,
	`{"choices":[{"index":0,"message":{"content":"x","tool_calls":[{"id":3}]},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"message":{"content":"x","tool_calls":{}},"finish_reason":"stop"}]}`,
}

// TestDecodeCompletion checks decodeCompletion against encoding/json.
func TestDecodeCompletion(t *testing.T) {
	for _, body := range completionCases {
		ch, usage, ok := decodeCompletion([]byte(body), make([]byte, 0, 8))
		rch, rusage, rok := refDecodeCompletion([]byte(body))
		if ok != rok {
			t.Errorf("%s: ok %v, encoding/json %v", body, ok, rok)
			continue
		}
		if !ok {
			continue
		}
		if dumpChoice(ch) != dumpChoice(rch) {
			t.Errorf("%s:\n got %s\nwant %s", body, dumpChoice(ch), dumpChoice(rch))
		}
		if dumpUsage(usage) != dumpUsage(refUsage(rusage)) {
			t.Errorf("%s: usage %s, mapUsage %s", body, dumpUsage(usage), dumpUsage(refUsage(rusage)))
		}
	}
}

func dumpChoice(c completionChoice) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	var content, finish *string
	if c.hasContent {
		t := string(c.content)
		content = &t
	}
	if c.hasFinish {
		finish = &c.finish
	}
	out := "content=" + s(content) + " refusal=" + s(c.refusal) + " finish=" + s(finish)
	for _, tc := range c.calls {
		out += " call{" + tc.id + " " + tc.name + " " + string(tc.args) + "}"
	}
	return out
}

// FuzzDecodeCompletion: whatever the body, decodeCompletion agrees with
// encoding/json on bodies both accept with exact lower-case members
// (encoding/json also matches members case-insensitively).
func FuzzDecodeCompletion(f *testing.F) {
	for _, c := range completionCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ch, usage, ok := decodeCompletion(body, nil)
		rch, rusage, rok := refDecodeCompletion(body)
		if ok && !rok && exactMembers(body) {
			t.Fatalf("%q: accepted, encoding/json refuses", body)
		}
		if ok && rok && exactMembers(body) {
			if dumpChoice(ch) != dumpChoice(rch) || dumpUsage(usage) != dumpUsage(refUsage(rusage)) {
				t.Fatalf("%q:\n got %s usage %s\nwant %s usage %s", body, dumpChoice(ch), dumpUsage(usage), dumpChoice(rch), dumpUsage(refUsage(rusage)))
			}
		}
	})
}

// exactMembers reports whether every object member name in body is unique
// in its object and already lower case, where encoding/json and exact
// matching agree.
func exactMembers(body []byte) bool {
	d := json.NewDecoder(bytes.NewReader(body))
	var walk func() bool
	walk = func() bool {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return false
				}
				ks := k.(string)
				for _, r := range ks {
					if r >= 'A' && r <= 'Z' || r > 0x7f {
						return false
					}
				}
				if seen[ks] {
					return false
				}
				seen[ks] = true
				if !walk() {
					return false
				}
			}
			_, err = d.Token()
			return err == nil
		case json.Delim('['):
			for d.More() {
				if !walk() {
					return false
				}
			}
			_, err = d.Token()
			return err == nil
		}
		return true
	}
	return walk()
}
