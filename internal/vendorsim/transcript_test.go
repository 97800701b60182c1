package vendorsim

import (
	"strings"
	"testing"
)

// SetFile is what an update-mode replay uses to rewrite expectations: new
// files land in their turn in canonical order, existing ones are replaced,
// and Format keeps the comment (directives included) byte for byte.
func TestCaseSetFile(t *testing.T) {
	const src = `Two turns.
status: 429
-- input.json --
{"model":"m","messages":[],"maxOutputTokens":5,"step":1}
-- response.json --
{"error":{}}
-- events.jsonl --
{"cancelled":true}
-- 2/input.json --
{"model":"m","messages":[],"maxOutputTokens":5,"step":1}
-- 2/response.sse --
data: [DONE]

`
	c, err := ParseCase([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c.SetFile(2, "events.jsonl", []byte("{\"text\":\"b\"}\n"))
	c.SetFile(1, "request.json", []byte("{\"a\":1}\n"))
	c.SetFile(1, "events.jsonl", []byte("{\"text\":\"a\"}\n"))
	out := string(c.Format())
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "-- ") {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --"))
		}
	}
	want := "input.json request.json response.json events.jsonl 2/input.json 2/response.sse 2/events.jsonl"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("files %s, want %s", got, want)
	}
	if !strings.HasPrefix(out, "Two turns.\nstatus: 429\n") {
		t.Errorf("comment lost:\n%s", out)
	}
	again, err := ParseCase([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Turns) != 2 || again.Turns[0].Status != 429 || string(again.Turns[0].Request) != "{\"a\":1}\n" ||
		again.Turns[0].Events[0].Text != "a" || again.Turns[1].Events[0].Text != "b" {
		t.Errorf("reparsed %+v %+v", again.Turns[0], again.Turns[1])
	}
}

// A Case built without ParseCase still formats and takes files.
func TestCaseSetFileNoArchive(t *testing.T) {
	c := &Case{Comment: "op: inspect\n"}
	c.SetFile(1, "response.json", []byte("{}\n"))
	if got, want := string(c.Format()), "op: inspect\n-- response.json --\n{}\n"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
}
